//go:build darwin || dragonfly || freebsd || netbsd || openbsd

package progress

import "golang.org/x/sys/unix"

// isTerminal reports whether fd is a terminal: whether it has a terminal's
// settings (TIOCGETA). /dev/null, a character device, has none.
func isTerminal(fd int) bool {
	_, err := unix.IoctlGetTermios(fd, unix.TIOCGETA)
	return err == nil
}
