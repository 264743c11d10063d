//go:build unix

package main

import (
	"os"
	"syscall"
	"testing"
)

// Run by root on a config that belongs to another user (ledgerd's),
// ledgerd token keeps the file theirs: otherwise ledgerd could no longer
// read it.
func TestTokenKeepsOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to give a file to another user")
	}
	dir := t.TempDir()
	path, _, err := initDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	const nobody = 65534
	if err := os.Chown(path, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	tokenCommand(t, "add", "billing", "--data", dir)
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if s := st.Sys().(*syscall.Stat_t); s.Uid != nobody || s.Gid != nobody || st.Mode().Perm() != 0o600 {
		t.Errorf("the new config belongs to %d:%d, mode %v", s.Uid, s.Gid, st.Mode())
	}
}
