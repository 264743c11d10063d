//go:build !linux

package postgres

import (
	"syscall"
	"time"
)

// setUserTimeout does nothing where TCP_USER_TIMEOUT is not available;
// the keepalives still apply.
func setUserTimeout(syscall.RawConn, time.Duration) error { return nil }
