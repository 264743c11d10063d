package approverpage

import (
	"testing"
	"time"
)

func TestRelativeTime(t *testing.T) {
	now := time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{0, "now"},
		{999 * time.Millisecond, "now"},
		{-999 * time.Millisecond, "now"},
		{time.Second, "in 1 s"},
		{59*time.Second + 999*time.Millisecond, "in 59 s"},
		{-45 * time.Second, "45 s ago"},
		{time.Minute, "in 1 min"},
		{4*time.Minute + 59*time.Second, "in 4 min"},
		{-3*time.Minute - 10*time.Second, "3 min ago"},
		{time.Hour, "in 1 h"},
		{2*time.Hour + 5*time.Minute + 59*time.Second, "in 2 h 5 min"},
		{-23*time.Hour - 59*time.Minute, "23 h 59 min ago"},
		{24 * time.Hour, "in 1 d"},
		{3*24*time.Hour + 4*time.Hour + 30*time.Minute, "in 3 d 4 h"},
		{-400 * 24 * time.Hour, "400 d ago"},
	} {
		if got := relativeTime(now.Add(c.d), now); got != c.want {
			t.Errorf("%v: %q, want %q", c.d, got, c.want)
		}
	}
}
