// Package atomicfile writes a file so that a crash leaves the old file or
// the new one, never part of one: the data goes to a temporary file in the
// same directory, which is synced, then renamed over the path (or linked
// to it, when the path must not exist yet), and the directory is synced so
// that the new name is durable too.
//
// The temporary file is ".NAME.*.tmp" beside the path, with the mode
// asked for from its creation on; a write that fails removes it.
package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
)

// Options are a write's choices; the zero value replaces the file, mode
// 0600.
type Options struct {
	// Mode is the file's permission bits; 0 means 0600.
	Mode os.FileMode
	// Exclusive fails the write (with an error satisfying
	// errors.Is(err, fs.ErrExist)) when the path exists, instead of
	// replacing it.
	Exclusive bool
	// BeforeRename, if set, is called with the temporary file's path once
	// it is written and synced; an error from it stops the write, and the
	// path is left as it was. (ledgerd uses it to give a config file its
	// owner before it takes the config's place.)
	BeforeRename func(tmp string) error
}

// Write writes data to path as Options say.
func Write(path string, data []byte, o Options) (err error) {
	mode := o.Mode
	if mode == 0 {
		mode = 0o600
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		// After a rename there is nothing left to remove; after a link the
		// temporary name goes, the file stays under path.
		if err != nil || o.Exclusive {
			os.Remove(tmp)
		}
	}()
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if o.BeforeRename != nil {
		if err := o.BeforeRename(tmp); err != nil {
			return err
		}
	}
	if o.Exclusive {
		err = os.Link(tmp, path)
	} else {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		return err
	}
	return SyncDir(dir)
}

// SyncDir makes a directory's entries durable. Where a directory cannot be
// synced (Windows, and file systems that say so), it does nothing.
func SyncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, errors.ErrUnsupported) {
		return err
	}
	return nil
}
