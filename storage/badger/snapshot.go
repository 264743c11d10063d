package badger

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/decisionledger/ledger/ledger"
)

// The approval snapshot (ledger.SnapshotStore) is the file "approvals" in
// the store's directory: u64 tree size (big-endian), then the snapshot's
// bytes, which carry their own checksum (ledger/snapshot.go). It is
// replaced whole: written to "approvals.tmp", synced, and renamed over
// the old one, so that a crash leaves the old file or the new one. The
// directory is not synced: a snapshot lost in a power cut costs the next
// open a longer scan of the log, nothing more. It is a file, not a badger
// value, because it can be megabytes, which badger would put in its value
// log, and because it is not part of the index: a store whose index is
// rebuilt keeps it.
const (
	snapshotFile    = "approvals"
	snapshotTmpFile = "approvals.tmp"
)

var _ ledger.SnapshotStore = (*Store)(nil)

// snapshotMu serializes PutSnapshot calls (they share the temporary file)
// across every Store of the process: a Store has one writer, and a
// package-level lock keeps the Store struct as it is.
var snapshotMu sync.Mutex

// PutSnapshot implements ledger.SnapshotStore.
func (s *Store) PutSnapshot(ctx context.Context, size uint64, snap []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if n := s.ov.durableSize(); size > n {
		return fmt.Errorf("ledger: approval snapshot for size %d, the tree has %d entries: %w", size, n, ledger.ErrConflict)
	}
	snapshotMu.Lock()
	defer snapshotMu.Unlock()
	tmp := filepath.Join(s.dir, snapshotTmpFile)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("ledger: writing the approval snapshot: %w", err)
	}
	_, err = f.Write(binary.BigEndian.AppendUint64(nil, size))
	if err == nil {
		_, err = f.Write(snap)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(s.dir, snapshotFile))
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("ledger: writing the approval snapshot: %w", err)
	}
	return nil
}

// Snapshot implements ledger.SnapshotStore.
func (s *Store) Snapshot(ctx context.Context) (uint64, []byte, error) {
	if err := ctx.Err(); err != nil {
		return 0, nil, err
	}
	b, err := os.ReadFile(filepath.Join(s.dir, snapshotFile))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil, fmt.Errorf("ledger: approval snapshot: %w", ledger.ErrNotFound)
	}
	if err != nil {
		return 0, nil, fmt.Errorf("ledger: reading the approval snapshot: %w", err)
	}
	if len(b) < 8 {
		return 0, nil, fmt.Errorf("%w: the approval snapshot file is %d bytes", ledger.ErrCorrupt, len(b))
	}
	return binary.BigEndian.Uint64(b), b[8:], nil
}
