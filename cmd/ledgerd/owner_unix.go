//go:build unix

package main

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// keepOwner gives the file at path the owner and group of was, the file
// it replaces, if they differ from its own. Only root may give a file
// away; anyone else is told to run as the owner.
func keepOwner(path string, was fs.FileInfo) error {
	old, ok := was.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	now, err := os.Stat(path)
	if err != nil {
		return err
	}
	if st, ok := now.Sys().(*syscall.Stat_t); ok && st.Uid == old.Uid && st.Gid == old.Gid {
		return nil
	}
	if err := os.Chown(path, int(old.Uid), int(old.Gid)); err != nil {
		return fmt.Errorf("the config belongs to user %d and group %d: run ledgerd as that user (sudo -u), so that the file stays theirs: %w", old.Uid, old.Gid, err)
	}
	return nil
}
