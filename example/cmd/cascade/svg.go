package main

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// colours of the outcomes in the chart.
var outcomeColours = [numOutcomes]string{
	outOK: "#2e7d32", outFallback: "#64b5f6", outTimeout: "#ef6c00", outCircuitOpen: "#9e9e9e",
	outBulkheadFull: "#8e24aa", outUnavailable: "#c62828", outOther: "#212121", outShed: "#fbc02d", outWaiting: "#6d1b1b",
	outLimited: "#00897b", outThrottled: "#5d4037",
}

// writeChart draws one panel per result: stacked bars of the outcomes of
// the requests that arrived in each second, with a line where the fault
// began.
func writeChart(path, title string, results []*result, faultAt time.Duration) error {
	const (
		panelW, panelH = 640, 150
		left, top      = 60, 40
		gap            = 50
	)
	height := top + len(results)*(panelH+gap) + 40
	width := left + panelW + 220
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", left, escape(title))
	maxPerSec := 1
	for _, r := range results {
		for _, sec := range r.perSecond {
			total := 0
			for _, n := range sec {
				total += n
			}
			maxPerSec = max(maxPerSec, total)
		}
	}
	for i, r := range results {
		y0 := top + i*(panelH+gap) + 20
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-weight="bold">%s</text>`+"\n", left, y0-6, escape(r.name))
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#bbb"/>`+"\n", left, y0, panelW, panelH)
		secs := len(r.perSecond)
		barW := float64(panelW) / float64(secs)
		for s, counts := range r.perSecond {
			y := float64(y0 + panelH)
			bar := func(n int, colour, opacity, label string) {
				if n == 0 {
					return
				}
				h := float64(n) / float64(maxPerSec) * panelH
				y -= h
				fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" fill-opacity="%s"><title>t=%ds %s: %d</title></rect>`+"\n",
					float64(left)+float64(s)*barW+1, y, barW-2, h, colour, opacity, s, label, n)
			}
			for o := range numOutcomes {
				if o != outFallback {
					bar(counts[o], outcomeColours[o], "1", outcomeNames[o])
					continue
				}
				// A fallback answer is drawn in the pale colour of its cause.
				for cause, n := range r.causesPerSecond[s] {
					bar(n, outcomeColours[cause], "0.35", "fallback after "+outcomeNames[cause])
				}
			}
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%d</text>`+"\n", float64(left)+(float64(s)+0.5)*barW, y0+panelH+14, s)
		}
		fx := float64(left) + faultAt.Seconds()*barW
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#c62828" stroke-dasharray="4 3"/>`+"\n", fx, y0, fx, y0+panelH)
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end" fill="#555">%d/s</text>`+"\n", left-6, y0+10, maxPerSec)
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end" fill="#555">0</text>`+"\n", left-6, y0+panelH)
	}
	legend := func(i int, colour, opacity, label string) {
		y := top + 30 + i*20
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="12" height="12" fill="%s" fill-opacity="%s"/><text x="%d" y="%d">%s</text>`+"\n",
			left+panelW+20, y, colour, opacity, left+panelW+38, y+10, label)
	}
	i := 0
	for o := range numOutcomes {
		if o == outShed && !anyOutcome(results, outShed) {
			continue // only run 3 sheds
		}
		if o != outFallback {
			legend(i, outcomeColours[o], "1", outcomeNames[o])
			i++
		}
	}
	for _, o := range []outcome{outCircuitOpen, outBulkheadFull, outTimeout} {
		legend(i, outcomeColours[o], "0.35", "fallback after "+outcomeNames[o])
		i++
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#555">seconds since the start (by arrival of the request); dashed line: the fault begins</text>`+"\n", left, height-12)
	b.WriteString("</svg>\n")
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

func escape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

func anyOutcome(results []*result, o outcome) bool {
	for _, r := range results {
		if r.counts[o] > 0 {
			return true
		}
	}
	return false
}
