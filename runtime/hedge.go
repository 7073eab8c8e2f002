package runtime

import (
	"context"
	"errors"
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/status"
)

// maxHedgeBuffer bounds the buffer of a hedged call's results.
const maxHedgeBuffer = 8

// copyResult is what one hedged copy came back with.
type copyResult[Resp any] struct {
	resp       *Resp
	err        error
	timedOut   bool          // cut by its own per-attempt timeout
	refused    bool          // the breaker did not let the copy through
	retryAfter time.Duration // of the breaker's refusal
	push       time.Duration // the server's pushback, when pushed
	pushed     bool
	local      bool        // failed on the client's side or by a size limit: no copy would fare better
	mark       refusalMark // the Guard's refusal mark of its failure, if any (see refusalMarked)
	meta       *copyMeta   // what the copy's attempt learnt for the caller's options; nil without them
	n          int         // the copy's number, from 1
	unsent     bool        // not sent: the call was over before the copy started
}

// hedgedCall is what a hedged call's copies share: the invocation they
// repeat, the count of those still running, and the count of those let
// through. charged holds the times at which the budget was charged a
// retry for each copy after the first, written by the call's goroutine
// alone (room for four without an allocation).
type hedgedCall[Req, Resp any] struct {
	copies    invocation[Req, Resp]
	running   sync.WaitGroup
	sent      atomic.Int32 // copies let through (invocation.copiesSent)
	charged   []int64
	chargedAt [4]int64
	// panicked is the first copy's panic (copyGoexit for a copy whose
	// goroutine runtime.Goexit ended), nil until then; later copies'
	// panics are dropped (the first goes on, as emitAll's). One pointer,
	// allocated by a copy that panics: the call's allocation keeps its
	// size class.
	panicked atomic.Pointer[copyPanic]
}

// copyPanic is what a hedged copy panicked with.
type copyPanic struct{ p any }

// fail hands a copy's panic p (copyGoexit for a runtime.Goexit) to the
// call: the first one is kept and closes panics, which wakes the call's
// loop; the others are dropped.
func (hc *hedgedCall[Req, Resp]) fail(panics chan struct{}, p any) {
	if hc.panicked.CompareAndSwap(nil, &copyPanic{p}) {
		close(panics)
	}
}

// wait waits for every copy to end; then, for a call that came to its end
// (finished: not one whose own goroutine panics or ends by
// runtime.Goexit, whose panic goes on alone), it goes on with the first
// copy's panic or runtime.Goexit, if a copy had one: whether the call
// was still reading its copies' answers then or waiting for its losers
// to end (TestAttack27GObserverPanicAtADeadlineCutCopyReachesTheCaller).
func (hc *hedgedCall[Req, Resp]) wait(finished *bool) {
	hc.running.Wait()
	cp := hc.panicked.Load()
	if !*finished || cp == nil {
		return
	}
	if _, ok := cp.p.(copyGoexit); ok {
		goruntime.Goexit() // the caller's goroutine ends, as unhedged
	}
	panic(cp.p)
}

// refund squares the retry budget once every copy has ended: it holds one
// retry for each copy let through after the call's first, whatever their
// numbers (copies decided 1 ns apart are let through in any order), and
// each copy after the first was charged one when it was decided; the
// charges of copies never sent (refused by the breaker or an adaptive
// layer, or the call over before they went) are given back. Until then
// the budget holds them: a call's charges are never given back early and
// taken again, which left another call room for a retry the budget did
// not have (the budget may be lower than it need be while a call runs,
// never higher).
func (hc *hedgedCall[Req, Resp]) refund(m *methodState) {
	unsent := len(hc.charged) - max(int(hc.sent.Load())-1, 0)
	for i := range unsent {
		m.budget.giveBack(hc.charged[len(hc.charged)-1-i])
	}
}

// hedged runs the call as hedged copies: the first copy at once, each
// further one after Delay without an answer (or at once after a copy
// failed with a non-fatal code), up to MaxCopies. Every copy goes through
// the breaker and its own per-attempt timeout; every copy after the first
// takes a retry from the budget when it is decided, given back at the end
// unless a copy was sent after the call's first (see refund). The first success or
// fatal answer wins and the other copies are cancelled; hedged returns once they have
// ended, so that no copy reads the request after the call returned. A
// copy's panic (or runtime.Goexit) while hedged runs, a loser's after the
// answer included, goes on from hedged once every copy has ended: the
// first one, on the caller's goroutine (see hedgedCall.wait). An
// open breaker, a spent budget or a server's negative pushback stops
// further copies (one on the last copy the policy allows stops nothing,
// and the call's copies ran out: ErrRetriesExhausted); a positive
// pushback delays the next one. Once no copy is in flight and none may be
// sent, whatever event stopped them, the call ends at once. wait is nil
// for a call; for a cache's shared call, see unary: once it is cut, no
// further copy is sent.
func hedged[Req, Resp any](ctx context.Context, m *methodState, wait context.Context, in *invocation[Req, Resp]) (*Resp, error) {
	h := m.policy.Hedging
	c := m.client
	// The copies' own (in stays in its caller's frame), and the count of
	// those running: one allocation.
	hc := &hedgedCall[Req, Resp]{copies: *in}
	hc.charged = hc.chargedAt[:0]
	copies := &hc.copies
	// A copy is counted once it is let through: the first as the call's
	// request, any other as a hedged copy sent.
	copies.copiesSent = &hc.sent
	copies.start = time.Time{} // each copy reads the clock as it starts
	mx := m.metrics
	// The caller's grpc.Header, Trailer and Peer targets get the metadata
	// of the copy whose result is returned, and no copy writes them itself.
	caller := callerMetaOf(in.opts)
	var chosen *copyMeta // the last copy heard from that reached gRPC
	if caller != nil {
		defer func() { caller.fill(chosen) }()
	}

	// The call returns once every copy it sent has ended: a copy still in
	// gRPC may be marshalling the caller's request, which is the caller's
	// to reuse once the call returned. The losers are cut first (the
	// deferred cancel runs before the wait); gRPC gives up on a cancelled
	// call at once, so the wait is one wake-up per loser. A copy's panic
	// goes on from the wait, on the caller's goroutine, once every copy
	// has ended (hc.wait): no copy outlives the call, and none panics on
	// its own goroutine.
	running := &hc.running
	panics := make(chan struct{}) // closed by the first copy that panics
	finished := false             // the loop returned: the caller's goroutine is not unwinding
	defer hc.refund(m)            // once every copy has ended
	defer hc.wait(&finished)
	// The copies' context ends at ctx's deadline by a timer of its own: a
	// context of the program's may report a deadline its Done never
	// closes at, and the wait below would then take its whole second
	// (TestAttack27GHedgedCallWhoseDeadlineNeverEndsItsContext).
	var hctx context.Context
	var cancel context.CancelFunc
	dl, hasDeadline := ctx.Deadline()
	if hasDeadline {
		hctx, cancel = context.WithDeadline(ctx, dl)
	} else {
		hctx, cancel = context.WithCancel(ctx)
	}
	defer func() {
		// The copies still running are the losers, but for a call whose
		// deadline has passed: a copy's DEADLINE_EXCEEDED (gRPC and the
		// server read the deadline themselves) may come back before the
		// deadline's timer has ended hctx, and cut here the copies in
		// flight would be judged as the caller's cancellation, nothing
		// for the throttler and the breaker, where the deadline ended
		// them (TestAttack27BHedgedCopiesTheDeadlineCutAreFailures). The
		// timer is due, and hctx's own: its end reaches hctx within its
		// lateness, whatever ctx does.
		if hasDeadline && hctx.Err() == nil && !time.Now().Before(dl) {
			<-hctx.Done()
		}
		cancel()
	}()
	// The buffer is not sized by MaxCopies, which an operator may set as
	// high as a uint32 (the budget bounds the copies sent): a copy whose
	// result is no longer read gives up sending it once hctx is cut.
	results := make(chan copyResult[Resp], min(h.MaxCopies, maxHedgeBuffer))
	// launch sends copy n.
	launch := func(n int) {
		running.Add(1)
		go func() {
			defer running.Done()
			returned := false
			defer func() {
				// A panic in a copy (an interceptor, a codec, an observer) is
				// the caller's to see, as if it had made the call itself, and
				// the call waits for every copy before it returns, a loser
				// cut once the call has its answer included: the panic is
				// handed to the call, which goes on with it once every copy
				// has ended (hc.wait), never on this goroutine.
				if p := recover(); p != nil {
					hc.fail(panics, p)
				} else if !returned {
					// runtime.Goexit (an observer's t.FailNow): the copy
					// sends no result, and a caller still waiting would
					// wait for it until its context ended. It is handed
					// to the call as a panic is: the caller's goroutine
					// ends, as the call's would have unhedged.
					hc.fail(panics, copyGoexit{})
				}
			}()
			// The copy is classified against hctx: a loser cancelled here
			// says nothing about the dependency.
			own := copies
			var cm *copyMeta
			if caller != nil {
				own = &invocation[Req, Resp]{req: copies.req, opts: copies.opts, call: copies.call, copiesSent: copies.copiesSent}
				cm = new(copyMeta)
				own.opts = optsFor(copies.opts, cm)
			}
			var resp *Resp
			var end attemptEnd
			var err error
			unsent := false
			if e := over(hctx); n > 1 && e != nil {
				// The call ended (or its caller left) before the copy
				// started, its deadline passed though its timer has not
				// run yet included (gRPC would refuse to send it): nothing
				// is sent (TestAttack26AHedgedCopyPastItsDeadlineIsNotSent).
				err, unsent = statusFromContext(e), true
			} else {
				resp, end, err = attemptOnce(hctx, m, own, true)
			}
			if end.timedOut {
				err = attemptTimeoutError(m.dependency(), m.policy.Name, n, m.policy.Timeout, err)
			}
			r := copyResult[Resp]{resp: resp, err: err, refused: end.refused, retryAfter: end.retryAfter,
				timedOut: end.timedOut, push: end.push, pushed: end.pushed, local: end.local, mark: end.mark, meta: cm, n: n,
				unsent: unsent}
			select {
			case results <- r:
			case <-hctx.Done(): // the call is over (or ends now): nobody reads it
			}
			returned = true
		}()
	}

	sent, pending := 1, 1
	stopped := false // no further copy: breaker open, budget spent, told not to
	var last error
	var refusal time.Duration
	refused := false
	var local error         // an adaptive layer's refusal of a copy
	var heldUntil time.Time // no copy before it: a server's pushback
	// why is the first refusal of a copy by the client (the budget, the
	// breaker, an adaptive layer): when the copies sent failed, the call's
	// error is the last of them matching it, as a retried call's is.
	why := 0
	const (
		byBudget = 1 + iota
		byBreaker
		byLocal
	)
	refusedBy := func(w int) {
		if why == 0 {
			why = w
		}
	}
	if c.events != nil {
		m.budgetRecovered()
	}
	launch(1)
	timer := time.NewTimer(h.Delay)
	defer timer.Stop()
	var gone <-chan struct{} // a shared call's callers all left: no copy for nobody
	if wait != nil {
		gone = wait.Done()
	}
	next := func() { // sends the next copy, if the budget allows
		if stopped || sent >= h.MaxCopies || ctx.Err() != nil || wait != nil && wait.Err() != nil {
			return
		}
		at := c.now()
		if !m.budget.tryRetry(at) {
			m.budgetRefused(last)
			stopped = true
			refusedBy(byBudget)
			return
		}
		hc.charged = append(hc.charged, at)
		sent++
		pending++
		launch(sent)
		if sent < h.MaxCopies {
			timer.Reset(h.Delay)
		}
	}
	// told stops further copies on a negative pushback, counting it, when
	// it stops a copy the policy would have sent. One that stops nothing
	// (every copy the policy allows was sent) does not stop the call: its
	// copies ran out, and the error says so, ErrRetriesExhausted, as
	// without the pushback
	// (TestAttack29BLastAttemptsDoNotRetryStillExhaustsTheRetries).
	told := func() {
		if !stopped && sent < h.MaxCopies {
			if mx != nil {
				mx.retries[retryPushback].Inc()
			}
			stopped = true
		}
	}
	resp, err := func() (*Resp, error) {
		for {
			select {
			case <-panics:
				// A copy panicked (or ended by runtime.Goexit): the deferred
				// cancel cuts the other copies, and hc.wait goes on with the
				// first panic once they have ended.
				return nil, nil
			case r := <-results:
				pending--
				if !r.refused {
					chosen = r.meta
				}
				switch {
				case r.refused && r.err != nil:
					// An adaptive layer refused the copy: no further copy. A
					// copy after the first is a repeat not made, counted as
					// the breaker's refusal of one is.
					if r.n > 1 {
						m.adaptiveRefused(r.err)
					}
					stopped = true
					if local == nil {
						local = r.err
					}
					refusedBy(byLocal)
				case r.refused:
					// A copy after the first is a repeat the breaker refused;
					// the first is not, whichever copies were decided before
					// its refusal was read (a delay shorter than the refusal
					// takes to come back).
					m.breakerRefused(r.n > 1)
					stopped, refused, refusal = true, true, r.retryAfter
					refusedBy(byBreaker)
				case r.err == nil:
					return r.resp, nil
				case r.unsent && last != nil:
					// A copy the call's end kept from going: the last real
					// failure is the call's, as for a retry not sent.
					return nil, ended(ctx, last)
				case ctx.Err() != nil:
					return nil, ended(ctx, r.err) // the call's own end
				case r.local:
					return nil, r.err // a failure every copy would meet
				case !retryable(h.NonFatalCodes, r.err, r.timedOut):
					// Refused at the server's door for this copy's own reason
					// (the Guard's mark): the mark the attempt read, or, where
					// it read none (markUnread), the details read here; never
					// where it found there was none. Read for a fatal failure
					// only, the one answer it changes.
					marked := r.mark != markAbsent && refusalMarked(status.Convert(r.err), r.mark)
					if !(pending > 0 && (r.pushed && r.push >= 0 || marked) || last != nil && marked) {
						return nil, r.err // the call's answer
					}
					// A copy refused with a pushback while others are in
					// flight: the server shedding the extra load it was sent,
					// not the call's answer. Or refused at the server's door
					// for a reason that is this copy's alone (the Guard's mark:
					// shed, or sent too late to start), while others are in
					// flight or one already failed. No more copies; the ones
					// it admitted answer, and the failure of one it admitted
					// stays the call's answer whichever came back first. A
					// do-not-retry mark (a negative pushback) that stops a
					// copy the policy would have sent is counted, as in the
					// default case below.
					if last == nil || !marked {
						last = r.err
					}
					if r.pushed && r.push < 0 {
						told()
					}
					// Only what the policy would still send is stopped: with
					// every copy sent, the call's copies run out as without
					// the refusal, and an error of copies that all failed
					// non-fatally says so, ErrRetriesExhausted, which a
					// Guard upstream reads as do-not-retry
					// (TestAttack30ShedCopyAfterTheLastCopyWasSentStillExhausts).
					if sent < h.MaxCopies {
						stopped = true
					}
				default:
					last = r.err
					switch {
					case r.pushed && r.push < 0:
						told()
					case r.pushed:
						if endsInTime(ctx, r.push) {
							// The longest wait the server asked for holds: a
							// shorter pushback of another copy does not
							// shorten it.
							if until := time.Now().Add(r.push); until.After(heldUntil) {
								heldUntil = until
								timer.Reset(r.push)
							}
						} else if !stopped && sent < h.MaxCopies {
							// The next copy could not start before the deadline:
							// counted as a retry's is. A pushback that stops no
							// copy (none was left to send) stops nothing, as told.
							if mx != nil {
								mx.retries[retryDeadline].Inc()
							}
							stopped = true
						}
					case !heldUntil.IsZero() && time.Now().Before(heldUntil):
						// A non-fatal failure without a pushback while the
						// server's pushback of another copy holds: the next
						// copy waits for it, its timer sends it
						// (TestAHedgedPushbackHoldsAgainstALaterFailureWithoutOne:
						// before, it went at once).
					default:
						next() // a non-fatal failure: the next copy goes now
					}
				}
			case <-timer.C:
				next()
			case <-gone:
				gone, stopped = nil, true
				if pending == 0 {
					return nil, firstOf(last, wait)
				}
			case <-hctx.Done():
				// ctx's end, or its deadline by hctx's own timer (a copy
				// whose context ended may give up sending its result).
				if errors.Is(hctx.Err(), context.Canceled) {
					return nil, statusFromContext(hctx.Err())
				}
				if last != nil && pending == 0 {
					// Every copy sent failed (non-fatally: last never holds OK)
					// and none is in flight: the last real error is the answer.
					return nil, last
				}
				return nil, statusFromContext(hctx.Err())
			}
			// Whatever the event (a copy's result, the timer of the delay
			// or of a pushback whose next copy the budget refused), once
			// nothing is in flight and nothing more may be sent, the call
			// ends now, with what its copies and refusals say. (Before, only
			// a result was followed by this check: a copy refused by the
			// budget at a pushback's end left the call waiting for its
			// deadline, or, without one, for ever:
			// TestAttack29BPushedHedgeRefusedByTheBudgetEndsAtOnce.) A shared
			// call whose callers all left ends above.
			if pending == 0 && (stopped || sent >= h.MaxCopies) {
				switch {
				case last == nil && local != nil:
					return nil, local
				case last == nil && refused:
					return nil, circuitOpenError(m.dependency(), m.policy.Name, refusal, nil)
				case last != nil && why == byBudget:
					// A further copy refused by the budget: the last real
					// error, which matches ErrBudgetExhausted, as a retry's.
					return nil, budgetExhaustedError(m.dependency(), m.policy.Name, last)
				case last != nil && why == byBreaker:
					return nil, circuitOpenError(m.dependency(), m.policy.Name, refusal, last)
				case last != nil && why == byLocal:
					return nil, withCause(local, last)
				case sent >= h.MaxCopies && !stopped:
					return nil, retriesExhaustedError(m.dependency(), m.policy.Name, sent, "hedged copies", last)
				}
				return nil, last
			}
		}
	}()
	finished = true
	return resp, err
}

// copyGoexit is what a hedged copy whose goroutine runtime.Goexit ended
// hands to the caller, in place of a panic.
type copyGoexit struct{}
