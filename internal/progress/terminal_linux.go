package progress

import "golang.org/x/sys/unix"

// isTerminal reports whether fd is a terminal: whether it has a terminal's
// settings (TCGETS). /dev/null, a character device, has none.
func isTerminal(fd int) bool {
	_, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	return err == nil
}
