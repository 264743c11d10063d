package mcpgate

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/internal/atomicfile"
)

// disclosureStore is the directory of the calls' disclosures
// (Config.Disclosures): one file per call committed with the hiding
// commitment, named by its digest's hex, holding the canonical disclosure
// (commit.Disclosure.MarshalJSON): every field's value and opening. A
// file is as secret as the arguments it holds; deleting it erases them
// from what the log can be made to say (docs/commitment.md §7.6).
type disclosureStore struct {
	dir string
}

// openDisclosureStore makes dir (mode 0700) if it is absent, and refuses
// one that is not a directory or that others may read or enter.
func openDisclosureStore(dir string) (*disclosureStore, error) {
	err := os.Mkdir(dir, 0o700)
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("disclosures: %w", err)
	}
	fi, err := os.Stat(dir)
	switch {
	case err != nil:
		return nil, fmt.Errorf("disclosures: %w", err)
	case !fi.IsDir():
		return nil, fmt.Errorf("disclosures: %s is not a directory", dir)
	case fi.Mode().Perm()&0o077 != 0:
		return nil, fmt.Errorf("disclosures: %s is open to others (mode %04o); chmod 700 it", dir, fi.Mode().Perm())
	}
	return &disclosureStore{dir: dir}, nil
}

// DisclosureFile is the name of the disclosure file of a call committed
// to as c, in the disclosures directory: the digest's 64 hex digits and
// ".json", so that an operator finds it from an entry's params_digest.
func DisclosureFile(c commit.Commitment) string {
	return hex.EncodeToString(c.Digest[:]) + ".json"
}

// write stores x durably under its commitment's name: a temporary file,
// synced, linked to its name (never over an existing file), and the
// directory synced. When write returns nil, the file is on disk.
func (s *disclosureStore) write(x *commit.Disclosure) error {
	b, err := x.MarshalJSON()
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(s.dir, DisclosureFile(x.Commitment)), b, atomicfile.Options{Mode: 0o600, Exclusive: true})
}

// remove deletes the disclosure of a call the ledger refused (nothing
// of it was appended), durably.
func (s *disclosureStore) remove(c commit.Commitment) error {
	if err := os.Remove(filepath.Join(s.dir, DisclosureFile(c))); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return atomicfile.SyncDir(s.dir)
}
