package main

import (
	"testing"
	"time"
)

// BenchmarkLimiterAllow is allow on the append path (readMediatorBody):
// a mediator without a rate, one within its rate, one refused (with the
// wait for its Retry-After), and one within its rate from every core.
func BenchmarkLimiterAllow(b *testing.B) {
	l := newLimiter(&Config{Mediators: []Mediator{
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
