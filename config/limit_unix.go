//go:build unix

package config

import "syscall"

// fileLimit returns the soft limit on open files (RLIMIT_NOFILE). Go
// raises it to the hard limit when the process starts.
func fileLimit() (uint64, bool) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0, false
	}
	return uint64(r.Cur), true
}
