package ptytest

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// open opens /dev/ptmx, unlocks its terminal end (TIOCSPTLCK) and opens
// that by its number (TIOCGPTN), as posix_openpt, unlockpt and ptsname do.
func open() (master, term *os.File, err error) {
	fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, &os.PathError{Op: "open", Path: "/dev/ptmx", Err: err}
	}
	master = os.NewFile(uintptr(fd), "/dev/ptmx")
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		master.Close()
		return nil, nil, os.NewSyscallError("ioctl TIOCSPTLCK", err)
	}
	n, err := unix.IoctlGetUint32(fd, unix.TIOCGPTN)
	if err != nil {
		master.Close()
		return nil, nil, os.NewSyscallError("ioctl TIOCGPTN", err)
	}
	name := "/dev/pts/" + strconv.FormatUint(uint64(n), 10)
	term, err = os.OpenFile(name, os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		master.Close()
		return nil, nil, err
	}
	return master, term, nil
}
