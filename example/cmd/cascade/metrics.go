package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
)

// metrics is the registry of the full-stack client of run 1.
var metrics = prometheus.NewRegistry()

// exposeMetrics serves the registry (-metrics-addr) and schedules the
// scrape written to a file (-scrape) during run 1. stop ends both.
func (c config) exposeMetrics(w io.Writer) (stop func(), err error) {
	var stops []func()
	stop = func() {
		for _, f := range stops {
			f()
		}
	}
	if c.metricsAddr != "" {
		lis, err := net.Listen("tcp", c.metricsAddr)
		if err != nil {
			return nil, fmt.Errorf("-metrics-addr: %w", err)
		}
		srv := &http.Server{Handler: promhttp.HandlerFor(metrics, promhttp.HandlerOpts{}), ReadHeaderTimeout: time.Second}
		go srv.Serve(lis) //nolint:errcheck // ends with Close
		stops = append(stops, func() { srv.Close() })
		fmt.Fprintf(w, "metrics of the full-stack client on http://%s/metrics\n\n", lis.Addr())
	}
	if c.scrape != "" {
		done := make(chan struct{})
		t := time.AfterFunc(c.scrapeAt, func() {
			defer close(done)
			if err := writeScrape(c.scrape, c.scrapeAt); err != nil {
				fmt.Fprintln(os.Stderr, "cascade: -scrape:", err)
			}
		})
		stops = append(stops, func() {
			if t.Stop() {
				close(done)
			}
			<-done
		})
	}
	return stop, nil
}

// writeScrape writes the registry in the text exposition format, as
// Prometheus would scrape it.
func writeScrape(path string, at time.Duration) error {
	mfs, err := metrics.Gather()
	if err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Scrape of the full-stack client of run 1, taken %s after arrivals began (go run ./example/cmd/cascade -scrape FILE).\n", at)
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
			return err
		}
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
