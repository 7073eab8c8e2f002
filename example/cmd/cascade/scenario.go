package main

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/go-resilient/resilient/runtime"
)

// outcome is what one request of the simulated caller ended as.
type outcome int

const (
	outOK outcome = iota
	outFallback
	outTimeout
	outCircuitOpen
	outBulkheadFull
	outUnavailable
	outOther
	outShed      // refused at once by the server's load shedding (run 3)
	outLimited   // refused at once by the adaptive concurrency limit
	outThrottled // refused locally by the client-side throttler
	outWaiting   // still queued or in flight when the run ended
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"ok", "fallback", "timeout", "circuit open", "bulkhead full", "unavailable", "other error", "shed", "adaptive limit", "throttled", "still waiting"}

// classifyErr maps the error a call returned to an outcome.
func classifyErr(err error) outcome {
	switch {
	case err == nil:
		return outOK
	case errors.Is(err, runtime.ErrCircuitOpen):
		return outCircuitOpen
	case errors.Is(err, runtime.ErrBulkheadFull):
		return outBulkheadFull
	case errors.Is(err, runtime.ErrConcurrencyLimited):
		return outLimited
	case errors.Is(err, runtime.ErrThrottled):
		return outThrottled
	case isShed(err):
		return outShed
	case status.Code(err) == codes.DeadlineExceeded:
		return outTimeout
	case status.Code(err) == codes.Unavailable:
		return outUnavailable
	}
	return outOther
}

// call is one request through the client under test. It returns the error
// that reached the caller and, when a fallback answered instead, the error
// the fallback was given.
type call func(ctx context.Context) (err, fallbackCause error)

// load is the traffic of one run.
type load struct {
	rate     int           // requests per second
	duration time.Duration // how long requests arrive
	workers  int           // the caller's goroutines (its thread pool)
}

// result is what one scenario measured.
type result struct {
	name      string
	sent      int
	counts    [numOutcomes]int
	perSecond [][numOutcomes]int // by arrival second
	causes    [numOutcomes]int   // why the fallback answered
	// causesPerSecond breaks perSecond's fallbacks down by cause.
	causesPerSecond [][numOutcomes]int
	latencies       []time.Duration // of the requests that completed
	// lastArrival is when, after the run's start, the last request
	// arrived; late is how far behind its schedule the generator put the
	// latest of them (a few ms on an idle machine). Together they say what
	// offered load the machine generated: sent requests over lastArrival.
	lastArrival, late time.Duration
}

func (r *result) percentile(p float64) time.Duration {
	if len(r.latencies) == 0 {
		return 0
	}
	return r.latencies[min(len(r.latencies)-1, int(float64(len(r.latencies))*p))]
}

// run sends l.rate requests per second for l.duration to a pool of
// l.workers goroutines, as the course's simulation does, and tallies what
// the caller sees. Requests queue when every worker is busy; a second after
// the arrival period ends, what is still queued or in flight is cut and
// counted as waiting, never drained.
func run(name string, l load, c call) *result {
	total := int(l.duration.Seconds() * float64(l.rate))
	secs := max(1, int(l.duration.Seconds()))
	r := &result{name: name, perSecond: make([][numOutcomes]int, secs), causesPerSecond: make([][numOutcomes]int, secs)}
	queue := make(chan time.Time, total) // arrival instants
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var mu sync.Mutex
	var done atomic.Int64
	record := func(arrived time.Time, start time.Time, o, cause outcome) {
		mu.Lock()
		defer mu.Unlock()
		r.counts[o]++
		sec := min(int(arrived.Sub(start).Seconds()), len(r.perSecond)-1)
		r.perSecond[sec][o]++
		if o == outFallback {
			r.causes[cause]++
			r.causesPerSecond[sec][cause]++
		}
		if o != outWaiting {
			r.latencies = append(r.latencies, time.Since(arrived))
		}
	}

	start := time.Now()
	var wg sync.WaitGroup
	for range l.workers {
		wg.Go(func() {
			for arrived := range queue {
				if ctx.Err() != nil {
					record(arrived, start, outWaiting, 0)
					continue
				}
				err, cause := c(ctx)
				o := classifyErr(err)
				if ctx.Err() != nil && err != nil {
					o = outWaiting // cut by the end of the run
				} else if cause != nil {
					o = outFallback
				}
				record(arrived, start, o, classifyErr(cause))
				done.Add(1)
			}
		})
	}
	// Request i arrives at start + i/rate. A generator late for its
	// schedule (a loaded machine) sends every request due at once, as
	// callers who do not wait for it would, rather than drop them and
	// arrive at a lower rate than asked; its lateness is measured.
	for r.sent < total {
		due := start.Add(time.Duration(int64(r.sent) * int64(time.Second) / int64(l.rate)))
		if wait := time.Until(due); wait > 0 {
			time.Sleep(wait)
		}
		now := time.Now()
		r.late = max(r.late, now.Sub(due))
		queue <- now
		r.sent++
	}
	r.lastArrival = time.Since(start)
	close(queue)
	// Requests still queued or in flight get one more second, longer than
	// any protected call may take (timeout plus bulkhead wait); what remains
	// after it is cut and counted as waiting, never drained.
	for cut := time.Now().Add(time.Second); done.Load() < int64(r.sent) && time.Now().Before(cut); {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	slices.Sort(r.latencies)
	return r
}
