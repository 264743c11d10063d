package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/jackc/pgx/v5"

	"github.com/decisionledger/ledger/ledger"
)

var _ ledger.SnapshotStore = (*Store)(nil)

// PutSnapshot implements ledger.SnapshotStore: one transaction that reads
// tree_head FOR KEY SHARE, as AddCheckpoint does, and writes the
// approval_snapshot row only if tree_head is at the store's epoch and
// holds at least size entries. The lock orders the write wholly before or
// wholly after any takeover (whose FOR UPDATE waits for it, and it for
// the takeover): a fenced store (another took the lease) writes nothing
// and gets ErrFenced, as its commits do, so that it never replaces the
// new holder's snapshot with its older one. The ledger does not depend on
// this for correctness: a snapshot names the tree's root at its size, and
// is used only for a tree with that root (ledger/snapshot.go).
func (s *Store) PutSnapshot(ctx context.Context, size uint64, snap []byte) error {
	if err := s.check(); err != nil {
		return err
	}
	if size > math.MaxInt64 {
		return fmt.Errorf("postgres: approval snapshot for size %d: %w", size, ledger.ErrConflict)
	}
	epoch := s.epoch.Load()
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var stored, current int64
		if err := tx.QueryRow(ctx, "SELECT size, epoch FROM tree_head FOR KEY SHARE", simple).Scan(&stored, &current); err != nil {
			return fmt.Errorf("reading the tree size: %w", err)
		}
		if current != epoch {
			return fmt.Errorf("%w (the log is at epoch %d, this store writes at %d)", ErrFenced, current, epoch)
		}
		if uint64(stored) < size {
			return fmt.Errorf("the tree has %d entries: %w", stored, ledger.ErrConflict)
		}
		s.at("snapshot")
		_, err := tx.Exec(ctx, `INSERT INTO approval_snapshot (size, data) VALUES ($1, $2)
			ON CONFLICT (singleton) DO UPDATE SET size = EXCLUDED.size, data = EXCLUDED.data`, simple, int64(size), snap)
		return err
	})
	if err != nil {
		return fmt.Errorf("postgres: approval snapshot for size %d: %w", size, err)
	}
	return nil
}

// Snapshot implements ledger.SnapshotStore.
func (s *Store) Snapshot(ctx context.Context) (uint64, []byte, error) {
	if err := s.check(); err != nil {
		return 0, nil, err
	}
	var size int64
	var data []byte
	err := s.pool.QueryRow(ctx, "SELECT size, data FROM approval_snapshot").Scan(&size, &data)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil, fmt.Errorf("postgres: approval snapshot: %w", ledger.ErrNotFound)
	}
	if err != nil {
		return 0, nil, fmt.Errorf("postgres: reading the approval snapshot: %w", err)
	}
	if size < 0 {
		return 0, nil, fmt.Errorf("%w: the approval snapshot's size is %d", ledger.ErrCorrupt, size)
	}
	return uint64(size), data, nil
}
