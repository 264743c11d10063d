package server

import (
	"testing"
	"time"

	"github.com/decisionledger/ledger/config"
)

// A refused request's wait is the time until the bucket holds a whole
// token again, from the fraction it refilled meanwhile.
func TestLimiterWaitAfterRefill(t *testing.T) {
	l := newLimiter(&config.Config{Mediators: []config.Mediator{{Name: "m", RatePerSecond: 2, Burst: 1}}})
	now := time.Now()
	if ok, _ := l.allow("m", now); !ok {
		t.Fatal("the first request refused")
	}
	for _, c := range []struct{ after, wait time.Duration }{{0, 500 * time.Millisecond}, {250 * time.Millisecond, 250 * time.Millisecond}, {375 * time.Millisecond, 125 * time.Millisecond}} {
		if ok, wait := l.allow("m", now.Add(c.after)); ok || wait != c.wait {
			t.Errorf("%v after a spent bucket: allowed %v, wait %v; want refused, %v", c.after, ok, wait, c.wait)
		}
	}
	if ok, _ := l.allow("m", now.Add(500*time.Millisecond)); !ok {
		t.Error("refused once the token is back")
	}
}

// After a reload, a mediator whose rate and burst stay draws on one
// bucket through the credentials before and after it (requests still
// running with the former spend the same tokens); one whose burst
// changed, at the same rate, starts a full bucket of its own.
func TestReloadSharesRateBucket(t *testing.T) {
	cfg := &config.Config{Mediators: []config.Mediator{{Name: "a", RatePerSecond: 0.001, Burst: 2}, {Name: "b", RatePerSecond: 0.001, Burst: 1}}}
	now := time.Now()
	prev := newCredentials(cfg, nil)
	if ok, _ := prev.limiter.allow("b", now); !ok {
		t.Fatal("b's first request refused")
	}
	next := newCredentials(withMediators(cfg, cfg.Mediators[0], config.Mediator{Name: "b", RatePerSecond: 0.001, Burst: 2}), prev)
	for i, l := range []*limiter{next.limiter, prev.limiter} {
		if ok, _ := l.allow("a", now); !ok {
			t.Fatalf("a's request %d within its burst of 2 refused", i)
		}
	}
	for _, l := range []*limiter{prev.limiter, next.limiter} {
		if ok, _ := l.allow("a", now); ok {
			t.Error("a's third request allowed: the credentials before and after the reload have a bucket each")
		}
	}
	for i := range 2 {
		if ok, _ := next.limiter.allow("b", now); !ok {
			t.Errorf("b's request %d after its burst became 2 refused", i)
		}
	}
}

// BenchmarkLimiterAllow is allow on the append path (readMediatorBody):
// a mediator without a rate, one within its rate, one refused (with the
// wait for its Retry-After), and one within its rate from every core.
func BenchmarkLimiterAllow(b *testing.B) {
	l := newLimiter(&config.Config{Mediators: []config.Mediator{
		{Name: "unlimited"},
		{Name: "within", RatePerSecond: 1e9, Burst: 1e9},
		{Name: "refused", RatePerSecond: 0.001, Burst: 1},
	}})
	if ok, _ := l.allow("refused", time.Now()); !ok {
		b.Fatal("refused's first request refused")
	}
	for _, c := range []struct {
		mediator string
		ok       bool
	}{{"unlimited", true}, {"within", true}, {"refused", false}} {
		b.Run(c.mediator, func(b *testing.B) {
			for b.Loop() {
				if ok, _ := l.allow(c.mediator, time.Now()); ok != c.ok {
					b.Fatalf("allowed %v, want %v", ok, c.ok)
				}
			}
		})
	}
	b.Run("within-parallel", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if ok, _ := l.allow("within", time.Now()); !ok {
					b.Error("refused")
					return
				}
			}
		})
	})
}
