package badger_test

import (
	"runtime/debug"
	"testing"

	"github.com/decisionledger/ledger/storage/badger"
)

// SetMemoryLimit sets 48 MiB when GOMEMLIMIT is unset or empty, and leaves
// the runtime's limit alone when it is set.
func TestSetMemoryLimit(t *testing.T) {
	if badger.MemoryLimit != 48<<20 {
		t.Errorf("MemoryLimit is %d; the measurements in docs/performance.md are for 48 MiB", badger.MemoryLimit)
	}
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	for _, tc := range []struct {
		env  string
		want int64
	}{
		// The runtime read GOMEMLIMIT at start; 1 TiB stands for its value.
		{"1TiB", 1 << 40},
		{"off", 1 << 40},
		{"", 48 << 20},
	} {
		debug.SetMemoryLimit(1 << 40)
		t.Setenv("GOMEMLIMIT", tc.env)
		if got := badger.SetMemoryLimit(); got != tc.want {
			t.Errorf("GOMEMLIMIT=%q: limit %d, want %d", tc.env, got, tc.want)
		}
	}
}
