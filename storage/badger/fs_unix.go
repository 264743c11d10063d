//go:build unix

package badger

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// lockDir takes an exclusive, non-blocking flock on the directory dir and
// returns the open directory that holds it: closing it, or the process
// ending in any way, releases the lock. It refuses at once, with
// errStoreLocked, if another open file description holds it, in this
// process or another.
func lockDir(dir string) (*os.File, error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("ledger: opening the store directory to lock it: %w", err)
	}
	for {
		err = unix.Flock(int(d.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		d.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s", errStoreLocked, dir)
		}
		return nil, fmt.Errorf("ledger: locking the store directory %s: %w", dir, err)
	}
	return d, nil
}
