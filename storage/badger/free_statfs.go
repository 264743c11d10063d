//go:build linux || darwin

package badger

import "golang.org/x/sys/unix"

// freeBytes returns the bytes of the file system holding path that an
// unprivileged writer can still use.
func freeBytes(path string) (uint64, error) {
	var st unix.Statfs_t
	for {
		err := unix.Statfs(path, &st)
		if err == nil {
			return uint64(st.Bavail) * uint64(st.Bsize), nil
		}
		if err != unix.EINTR {
			return 0, err
		}
	}
}
