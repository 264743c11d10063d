package badger

import (
	"os"
	"runtime/debug"
)

// MemoryLimit is the Go memory limit (runtime/debug.SetMemoryLimit) that
// goes with the zero Options: ledgerd sets it when the environment sets no
// GOMEMLIMIT, and the ledger's benchmarks set it the same way. With it,
// ledgerd's and the append benchmark's peak RSS stayed within 96 MiB
// (docs/performance.md, "Memory").
//
// 48 MiB because the rest of the peak is file pages: the binary and
// badger's mapped files took 34-47 MiB of RSS in those runs. Most of what
// badger keeps live is plain byte slices (memtable arenas,
// table buffers), which the collector marks at little cost, so a limit
// close above the live heap costs little CPU; without a limit the heap
// grows to twice what is live before each collection. The limit is soft:
// near it the collector runs more often, and no allocation fails. It does
// not bound the pages of badger's memory-mapped files, which also count in
// RSS and grow with the index.
const MemoryLimit = 48 << 20

// SetMemoryLimit sets the process's Go memory limit to MemoryLimit unless
// the environment sets GOMEMLIMIT (the Go runtime has then applied that
// value, or no limit for GOMEMLIMIT=off), and returns the limit in force.
// A process that opens a Store with the zero Options calls it at its
// start; Open warns when no limit is set.
func SetMemoryLimit() int64 {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(MemoryLimit)
	}
	return debug.SetMemoryLimit(-1)
}
