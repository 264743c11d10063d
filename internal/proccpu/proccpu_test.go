package proccpu

import (
	"runtime"
	"testing"
)

// Work done shows in Used, where the platform reports it.
func TestUsedGrows(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" || runtime.GOOS == "js" || runtime.GOOS == "wasip1" {
		t.Skip("no getrusage here: Used reports 0")
	}
	before := Used()
	x := 0
	for Used() == before {
		for i := range 1 << 20 {
			x += i
		}
	}
	if Used() < before {
		t.Fatalf("Used went back from %v to %v", before, Used())
	}
	_ = x
}
