//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd)

package progress

// isTerminal is false: no progress line where the terminal test is not
// written.
func isTerminal(int) bool { return false }

func terminalWidth(int) int { return 0 }
