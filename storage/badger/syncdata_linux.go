package badger

import (
	"os"

	"golang.org/x/sys/unix"
)

// syncData makes f's written bytes, and the size that reads them back,
// durable: fdatasync skips metadata such as the modification time, which
// a reopen does not need.
func syncData(f *os.File) error {
	for {
		err := unix.Fdatasync(int(f.Fd()))
		if err != unix.EINTR {
			return err
		}
	}
}
