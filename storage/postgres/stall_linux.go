package postgres

import (
	"fmt"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// setUserTimeout sets TCP_USER_TIMEOUT on c: data sent and not
// acknowledged for d (or keepalive probes unanswered for d) ends the
// connection.
func setUserTimeout(c syscall.RawConn, d time.Duration) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(wholeMillis(d)))
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("postgres: setting TCP_USER_TIMEOUT: %w", err)
	}
	return nil
}
