package adaptive

// baselineBuckets is the number of buckets of the baseline window.
const baselineBuckets = 10

// baseline is the smallest round RTT over a sliding window of time, in
// baselineBuckets buckets that each keep the smallest RTT of their stretch.
// It is guarded by the limiter's mutex.
type baseline struct {
	width   int64 // nanoseconds per bucket
	buckets [baselineBuckets]struct {
		epoch int64 // now / width of the RTTs kept; -1 for none
		rtt   int64 // nanoseconds
	}
}

func newBaseline(window int64) baseline {
	b := baseline{width: max(window/baselineBuckets, 1)}
	for i := range b.buckets {
		b.buckets[i].epoch = -1
	}
	return b
}

// observe adds the RTT of a round that ended at now (nanoseconds since the
// clock base, not negative) and returns the smallest RTT of the window
// ending at now, this one included.
func (b *baseline) observe(now, rtt int64) int64 {
	q := now / b.width
	s := &b.buckets[q%baselineBuckets]
	if s.epoch != q {
		s.epoch, s.rtt = q, rtt
	} else {
		s.rtt = min(s.rtt, rtt)
	}
	least := rtt
	for _, s := range b.buckets {
		if s.epoch >= 0 && s.epoch <= q && q-s.epoch < baselineBuckets {
			least = min(least, s.rtt)
		}
	}
	return least
}

// restart forgets every RTT kept and keeps rtt, of a round that ended at
// now, alone.
func (b *baseline) restart(now, rtt int64) {
	for i := range b.buckets {
		b.buckets[i].epoch = -1
	}
	b.observe(now, rtt)
}
