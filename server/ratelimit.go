package server

import (
	"math"
	"time"

	"github.com/decisionledger/ledger/config"
	xrate "golang.org/x/time/rate"
)

// limiter is a token bucket per mediator (golang.org/x/time/rate, imported as xrate): rate
// tokens a second, at most burst saved, full at the start. Its map is
// not changed once the credentials holding it are in force.
type limiter struct {
	buckets map[string]*xrate.Limiter
}

func newLimiter(cfg *config.Config) *limiter {
	l := &limiter{buckets: map[string]*xrate.Limiter{}}
	for _, m := range cfg.Mediators {
		if m.RatePerSecond <= 0 {
			continue
		}
		burst := m.Burst
		if burst == 0 {
			burst = int(math.Max(1, math.Ceil(m.RatePerSecond)))
		}
		l.buckets[m.Name] = xrate.NewLimiter(xrate.Limit(m.RatePerSecond), burst)
	}
	return l
}

// allow takes a token for mediator at now, or says how long until one is
// free.
func (l *limiter) allow(mediator string, now time.Time) (bool, time.Duration) {
	b := l.buckets[mediator]
	if b == nil || b.AllowN(now, 1) {
		return true, 0
	}
	// Refused: the bucket held less than a token, and kept it.
	return false, time.Duration((1 - b.TokensAt(now)) / float64(b.Limit()) * float64(time.Second))
}

// keepLevels gives each mediator of l whose rate and burst are the same
// in prev prev's bucket, level and all: the credentials in force before
// and after a reload then draw on one bucket. Called before l is in
// force.
func (l *limiter) keepLevels(prev *limiter) {
	for name, b := range l.buckets {
		if p := prev.buckets[name]; p != nil && p.Limit() == b.Limit() && p.Burst() == b.Burst() {
			l.buckets[name] = p
		}
	}
}
