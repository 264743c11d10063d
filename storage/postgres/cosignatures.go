package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/jackc/pgx/v5"

	"github.com/decisionledger/ledger/ledger"
)

// CosignatureSizesKept is how many of the latest cosigned checkpoint
// sizes PutCosignature keeps the cosignatures of. Each witness's latest
// cosignature is kept beyond them.
const CosignatureSizesKept = 1024

// The bounds of what PutCosignature takes: a key ID is a name of at most
// a few hundred bytes and 8 hex digits; a cosignature line about 130
// bytes.
const (
	maxWitnessID       = 512
	maxCosignatureLine = 4096
)

// errCosignature classifies a cosignature PutCosignature refuses as
// malformed.
var errCosignature = errors.New("postgres: malformed cosignature")

// PutCosignature keeps line, the cosignature by the witness whose key ID
// is witness ("<name>+<key hash>", as verify.WitnessKey.ID gives it) of
// the checkpoint the log signed for size, replacing the witness's line for
// size if any. It is one transaction: the insert, conditional on
// tree_head's epoch being the store's (read FOR KEY SHARE, as
// AddCheckpoint does, so a takeover orders it) and on a checkpoint of
// size being stored; then the pruning of the rows of sizes older than the
// CosignatureSizesKept latest, but for each witness's latest. A fenced
// store writes nothing and gets ErrFenced; a size without a checkpoint is
// ErrNotFound. The line is stored as given: readers verify it with the
// witness's key before using it.
func (s *Store) PutCosignature(ctx context.Context, size uint64, witness string, line []byte) error {
	if err := s.check(); err != nil {
		return err
	}
	switch {
	case size > math.MaxInt64:
		return fmt.Errorf("%w: size %d is beyond the largest", errCosignature, size)
	case witness == "" || len(witness) > maxWitnessID:
		return fmt.Errorf("%w: for size %d: the witness's key ID is empty or longer than %d bytes", errCosignature, size, maxWitnessID)
	case len(line) == 0 || len(line) > maxCosignatureLine:
		return fmt.Errorf("%w: by %s for size %d: the line is empty or longer than %d bytes", errCosignature, witness, size, maxCosignatureLine)
	}
	epoch := s.epoch.Load()
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var current int64
		var signed bool
		err := tx.QueryRow(ctx, `SELECT t.epoch, EXISTS (SELECT 1 FROM checkpoints WHERE size = $1)
			FROM tree_head t FOR KEY SHARE OF t`, simple, int64(size)).Scan(&current, &signed)
		if err != nil {
			return err
		}
		if current != epoch {
			return fmt.Errorf("%w (the log is at epoch %d, this store writes at %d)", ErrFenced, current, epoch)
		}
		if !signed {
			return fmt.Errorf("no checkpoint is stored for this size: %w", ledger.ErrNotFound)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO cosignatures (size, witness, line) VALUES ($1, $2, $3)
			ON CONFLICT (size, witness) DO UPDATE SET line = EXCLUDED.line`, simple, int64(size), witness, line); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM cosignatures c
			WHERE c.size < (SELECT min(k.size) FROM (SELECT DISTINCT size FROM cosignatures ORDER BY size DESC LIMIT $1) k)
			AND EXISTS (SELECT 1 FROM cosignatures n WHERE n.witness = c.witness AND n.size > c.size)`, simple, s.cosignaturesKept)
		return err
	})
	if err != nil {
		return fmt.Errorf("postgres: cosignature by %s for size %d: %w", witness, size, err)
	}
	return nil
}

// Cosignatures returns the cosignature lines kept for the checkpoint of
// size, by witness key ID; an empty map when none is. They are not
// verified: verify each with its witness's key before serving it.
func (s *Store) Cosignatures(ctx context.Context, size uint64) (map[string][]byte, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	lines := map[string][]byte{}
	if size > math.MaxInt64 {
		return lines, nil
	}
	rows, err := s.pool.Query(ctx, "SELECT witness, line FROM cosignatures WHERE size = $1", int64(size))
	if err != nil {
		return nil, fmt.Errorf("postgres: cosignatures for size %d: %w", size, err)
	}
	defer rows.Close()
	for rows.Next() {
		var witness string
		var line []byte
		if err := rows.Scan(&witness, &line); err != nil {
			return nil, fmt.Errorf("postgres: cosignatures for size %d: %w", size, err)
		}
		lines[witness] = line
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: cosignatures for size %d: %w", size, err)
	}
	return lines, nil
}

// LatestCosignatures returns, for each witness key ID with a cosignature
// kept, the largest checkpoint size it is kept for.
func (s *Store) LatestCosignatures(ctx context.Context) (map[string]uint64, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, "SELECT witness, max(size) FROM cosignatures GROUP BY witness")
	if err != nil {
		return nil, fmt.Errorf("postgres: the latest cosignatures: %w", err)
	}
	defer rows.Close()
	latest := map[string]uint64{}
	for rows.Next() {
		var witness string
		var size int64
		if err := rows.Scan(&witness, &size); err != nil {
			return nil, fmt.Errorf("postgres: the latest cosignatures: %w", err)
		}
		latest[witness] = uint64(size)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: the latest cosignatures: %w", err)
	}
	return latest, nil
}
