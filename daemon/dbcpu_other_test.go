//go:build !linux

package daemon

import "time"

// databaseCPU is not measured here.
func databaseCPU() time.Duration { return 0 }
