//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package progress

import "golang.org/x/sys/unix"

// terminalWidth is the terminal's number of columns, or 0 if unknown.
func terminalWidth(fd int) int {
	ws, err := unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ)
	if err != nil {
		return 0
	}
	return int(ws.Col)
}
