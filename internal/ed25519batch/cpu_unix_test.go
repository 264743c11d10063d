//go:build unix

package ed25519batch_test

import (
	"syscall"
	"time"
)

// cpuTime returns the CPU time (user and system) the process has used.
// On this project's shared benchmark machine, CPU per signature varies far
// less than wall time per signature.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
