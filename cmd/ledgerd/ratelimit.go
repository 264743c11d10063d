package main

import (
	"math"
	"sync"
	"time"

	"github.com/decisionledger/ledger/config"
)

// limiter is a token bucket per mediator: rate tokens a second, at most
// burst saved. Written here rather than taken from golang.org/x/time/rate
// because this one decision (allow now, or how long to wait) is all
// ledgerd needs.
type limiter struct {
	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	rate, burst, tokens float64
	last                time.Time
}

func newLimiter(cfg *config.Config) *limiter {
	l := &limiter{buckets: map[string]*bucket{}}
	for _, m := range cfg.Mediators {
		if m.RatePerSecond <= 0 {
			continue
		}
		burst := float64(m.Burst)
		if burst == 0 {
			burst = math.Max(1, math.Ceil(m.RatePerSecond))
		}
		l.buckets[m.Name] = &bucket{rate: m.RatePerSecond, burst: burst, tokens: burst}
	}
	return l
}

// allow takes a token for mediator at now, or says how long until one is
// free.
func (l *limiter) allow(mediator string, now time.Time) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[mediator]
	if b == nil {
		return true, 0
	}
	if !b.last.IsZero() {
		b.tokens = math.Min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	}
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) / b.rate * float64(time.Second))
}
