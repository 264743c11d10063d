//go:build !unix

package daemon

import "time"

// processCPU is not measured here.
func processCPU() time.Duration { return 0 }
