package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := Write(path, []byte("one"), Options{}); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, []byte("two"), Options{}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "two" {
		t.Fatalf("after a replace the file holds %q", b)
	}
	if info, _ := os.Stat(path); info.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600 by default", info.Mode().Perm())
	}
	if err := Write(path, []byte("three"), Options{Exclusive: true}); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("an exclusive write over a file: %v, want fs.ErrExist", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "two" {
		t.Fatalf("a refused exclusive write changed the file to %q", b)
	}
	other := filepath.Join(dir, "g")
	if err := Write(other, []byte("x"), Options{Exclusive: true, Mode: 0o640}); err != nil {
		t.Fatal(err)
	}
	if info, _ := os.Stat(other); info.Mode().Perm() != 0o640 {
		t.Fatalf("mode %v, want 0640", info.Mode().Perm())
	}
	stop := errors.New("stop")
	var seen string
	err := Write(path, []byte("four"), Options{BeforeRename: func(tmp string) error {
		b, _ := os.ReadFile(tmp)
		seen = string(b)
		return stop
	}})
	if !errors.Is(err, stop) || seen != "four" {
		t.Fatalf("BeforeRename saw %q and the write returned %v", seen, err)
	}
	if b, _ := os.ReadFile(path); string(b) != "two" {
		t.Fatalf("a write stopped before its rename changed the file to %q", b)
	}
	// Nothing but the two files: every temporary file is gone.
	names, _ := os.ReadDir(dir)
	if len(names) != 2 {
		var got []string
		for _, n := range names {
			got = append(got, n.Name())
		}
		t.Fatalf("the directory holds %q, want only f and g", got)
	}
}
