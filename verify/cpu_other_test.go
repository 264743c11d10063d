//go:build !unix

package verify_test

import "time"

// processCPU is not measured on this platform: BenchmarkVerifyRatio then
// reports no CPU time per entry.
func processCPU() time.Duration { return 0 }
