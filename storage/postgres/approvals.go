package postgres

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/decisionledger/ledger/ledger"
)

// Approval previews and approver sessions (version 4,
// migrations/0004_approval_previews_sessions.sql): what ledgerd keeps for
// approvals beside the log, in the database so that every instance, and
// the next sequencer after a failover, has it.
//
// Previews are written and deleted only at the store's epoch, in a
// transaction that first reads tree_head's epoch FOR KEY SHARE (as
// AddCheckpoint does): a takeover's FOR UPDATE and these writes are
// ordered, and a write after a takeover is refused with ErrFenced, nothing
// changed. Sessions are not fenced: any instance that serves the
// approver's page may open or end one.

// ID is the SHA-256 of something: an approval's id, a session token's
// hash, an approver's credential.
type ID = [sha256.Size]byte

// fenced runs f in a transaction that holds tree_head's epoch, as the
// store's, against takeovers; a store whose epoch moved gets ErrFenced,
// and f is not run.
func (s *Store) fenced(ctx context.Context, what string, f func(tx pgx.Tx) error) error {
	if err := s.check(); err != nil {
		return err
	}
	epoch := s.epoch.Load()
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var current int64
		if err := tx.QueryRow(ctx, "SELECT epoch FROM tree_head FOR KEY SHARE", simple).Scan(&current); err != nil {
			return err
		}
		if current != epoch {
			return fmt.Errorf("%w (the log is at epoch %d, this store writes at %d)", ErrFenced, current, epoch)
		}
		s.at(what)
		return f(tx)
	})
	if err != nil {
		return fmt.Errorf("postgres: %s: %w", what, err)
	}
	return nil
}

// PutPreview stores doc as the preview of the approval id, unless it has
// one already: the first stays (an approver may have seen it), and stored
// is false. The write is fenced (ErrFenced once another store took the
// lease) and durable when PutPreview returns nil.
func (s *Store) PutPreview(ctx context.Context, id ID, doc []byte) (stored bool, err error) {
	err = s.fenced(ctx, "preview", func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, "INSERT INTO approval_previews (approval_id, doc) VALUES ($1, $2) ON CONFLICT (approval_id) DO NOTHING", simple, id[:], doc)
		stored = tag.RowsAffected() == 1
		return err
	})
	return stored, err
}

// Preview returns the preview of the approval id; an error wrapping
// ledger.ErrNotFound when it has none.
func (s *Store) Preview(ctx context.Context, id ID) ([]byte, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	var doc []byte
	err := s.pool.QueryRow(ctx, "SELECT doc FROM approval_previews WHERE approval_id = $1", id[:]).Scan(&doc)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("postgres: preview of approval %x: %w", id, ledger.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: reading the preview of approval %x: %w", id, err)
	}
	return doc, nil
}

// DeletePreview deletes the preview of the approval id, if any. Fenced as
// PutPreview is: a deposed sequencer, judging by a state that may be
// stale, deletes nothing.
func (s *Store) DeletePreview(ctx context.Context, id ID) error {
	return s.fenced(ctx, "preview deletion", func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "DELETE FROM approval_previews WHERE approval_id = $1", simple, id[:])
		return err
	})
}

// PreviewIDs returns the ids of the approvals that have a preview.
func (s *Store) PreviewIDs(ctx context.Context) ([]ID, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, "SELECT approval_id FROM approval_previews ORDER BY approval_id")
	if err != nil {
		return nil, fmt.Errorf("postgres: listing previews: %w", err)
	}
	ids, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ID, error) {
		var b []byte
		var id ID
		if err := row.Scan(&b); err != nil {
			return id, err
		}
		if len(b) != len(id) {
			return id, fmt.Errorf("%w: an approval id of %d bytes", ledger.ErrCorrupt, len(b))
		}
		copy(id[:], b)
		return id, nil
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: listing previews: %w", err)
	}
	return ids, nil
}

// Session is an approver's session as the database holds it, under the
// SHA-256 of its token.
type Session struct {
	Approver, CSRF string
	// Credential is the SHA-256 of the approver's password hash at
	// sign-in.
	Credential     ID
	SignIn, UsedAt time.Time
}

// PutSession stores a new session under key (its token's SHA-256) and
// then, in the same transaction, deletes the oldest sessions (by sign-in)
// beyond max. Times are kept to the microsecond.
func (s *Store) PutSession(ctx context.Context, key ID, se Session, max int) error {
	if err := s.check(); err != nil {
		return err
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO approver_sessions (token_sha256, approver, csrf, credential, sign_in, used_at)
			VALUES ($1, $2, $3, $4, $5, $6)`, simple, key[:], se.Approver, se.CSRF, se.Credential[:], se.SignIn, se.UsedAt); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM approver_sessions WHERE token_sha256 IN (
			SELECT token_sha256 FROM approver_sessions ORDER BY sign_in DESC, token_sha256 OFFSET $1)`, simple, max)
		return err
	})
	if err != nil {
		return fmt.Errorf("postgres: storing a session of %q: %w", se.Approver, err)
	}
	return nil
}

// UseSession returns the session under key and marks it used at now,
// when it has not ended: used within idle before now, signed in within
// lifetime before now (an end at equality has passed). An ended session
// is deleted, and ok is false, as for none.
func (s *Store) UseSession(ctx context.Context, key ID, now time.Time, idle, lifetime time.Duration) (se Session, ok bool, err error) {
	if err := s.check(); err != nil {
		return Session{}, false, err
	}
	var cred []byte
	err = s.pool.QueryRow(ctx, `UPDATE approver_sessions SET used_at = greatest(used_at, $2)
		WHERE token_sha256 = $1 AND used_at > $3 AND sign_in > $4
		RETURNING approver, csrf, credential, sign_in, used_at`, simple, key[:], now, now.Add(-idle), now.Add(-lifetime)).
		Scan(&se.Approver, &se.CSRF, &cred, &se.SignIn, &se.UsedAt)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		if _, err := s.pool.Exec(ctx, "DELETE FROM approver_sessions WHERE token_sha256 = $1", simple, key[:]); err != nil {
			return Session{}, false, fmt.Errorf("postgres: deleting an ended session: %w", err)
		}
		return Session{}, false, nil
	case err != nil:
		return Session{}, false, fmt.Errorf("postgres: reading a session: %w", err)
	case len(cred) != len(se.Credential):
		return Session{}, false, fmt.Errorf("%w: a session credential of %d bytes", ledger.ErrCorrupt, len(cred))
	}
	copy(se.Credential[:], cred)
	return se, true, nil
}

// DeleteSession deletes the session under key, if any.
func (s *Store) DeleteSession(ctx context.Context, key ID) error {
	if err := s.check(); err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, "DELETE FROM approver_sessions WHERE token_sha256 = $1", simple, key[:]); err != nil {
		return fmt.Errorf("postgres: deleting a session: %w", err)
	}
	return nil
}

// DeleteSessionsOf deletes every session of approver name, and returns
// how many.
func (s *Store) DeleteSessionsOf(ctx context.Context, name string) (int64, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	tag, err := s.pool.Exec(ctx, "DELETE FROM approver_sessions WHERE approver = $1", simple, name)
	if err != nil {
		return 0, fmt.Errorf("postgres: deleting the sessions of %q: %w", name, err)
	}
	return tag.RowsAffected(), nil
}

// DeleteEndedSessions deletes the sessions ended at now (as UseSession
// judges), and returns how many.
func (s *Store) DeleteEndedSessions(ctx context.Context, now time.Time, idle, lifetime time.Duration) (int64, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	tag, err := s.pool.Exec(ctx, "DELETE FROM approver_sessions WHERE used_at <= $1 OR sign_in <= $2", simple, now.Add(-idle), now.Add(-lifetime))
	if err != nil {
		return 0, fmt.Errorf("postgres: deleting ended sessions: %w", err)
	}
	return tag.RowsAffected(), nil
}

// CountSessions returns the number of sessions stored, ended ones not yet
// deleted included.
func (s *Store) CountSessions(ctx context.Context) (int, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	var n int
	if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM approver_sessions").Scan(&n); err != nil {
		return 0, fmt.Errorf("postgres: counting sessions: %w", err)
	}
	return n, nil
}
