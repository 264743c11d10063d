// The approvals' state of ledgerd (docs/approvals.md "Where previews and
// sessions live"): with a badger store, previews in store_dir/previews
// and sessions in the process's memory; with PostgreSQL, both in the
// database, so that every instance, and the next sequencer after a
// failover, has them: the previews through package server's
// ApprovalsDB, the sessions through pgSessions.

package daemon

import (
	"context"
	"crypto/sha256"
	"time"

	"github.com/decisionledger/ledger/approval/approver"
	"github.com/decisionledger/ledger/config"
	"github.com/decisionledger/ledger/server/approvals"
	"github.com/decisionledger/ledger/storage/postgres"
)

// Instances on PostgreSQL keep the previews in the database.
var _ approvals.DB = (*postgres.Store)(nil)

// newApprovals makes the approvals' state for cfg, whose Approvals is
// set and checked: with pg nil (badger), its previews in
// store_dir/previews and its sessions in memory; else both in pg, the
// sequencer's store.
func newApprovals(cfg *config.Config, pg *postgres.Store) (*approvals.State, error) {
	if pg == nil {
		return approvals.New(cfg.Approvals, cfg.StoreDir, nil, nil)
	}
	return approvals.New(cfg.Approvals, cfg.StoreDir, pg, pgSessions{pg})
}

// pgSessions is the approver.SessionStore of a PostgreSQL store: the
// table approver_sessions (docs/postgres.md), keyed by the SHA-256 of
// each session's token, which is never stored. Any instance may use it:
// its writes are not fenced.
type pgSessions struct {
	store *postgres.Store
}

var _ approver.SessionStore = pgSessions{}

func (p pgSessions) Add(ctx context.Context, key [sha256.Size]byte, se approver.Session, max int) error {
	return p.store.PutSession(ctx, key, postgres.Session{Approver: se.Name, CSRF: se.CSRF, Credential: se.Credential,
		SignIn: se.SignIn, UsedAt: se.UsedAt}, max)
}

func (p pgSessions) Use(ctx context.Context, key [sha256.Size]byte, now time.Time, idle, lifetime time.Duration) (approver.Session, bool, error) {
	se, ok, err := p.store.UseSession(ctx, key, now, idle, lifetime)
	if err != nil || !ok {
		return approver.Session{}, false, err
	}
	return approver.Session{Name: se.Approver, CSRF: se.CSRF, Credential: se.Credential, SignIn: se.SignIn, UsedAt: se.UsedAt}, true, nil
}

func (p pgSessions) Remove(ctx context.Context, key [sha256.Size]byte) error {
	return p.store.DeleteSession(ctx, key)
}

func (p pgSessions) RemoveApprover(ctx context.Context, name string) (int, error) {
	n, err := p.store.DeleteSessionsOf(ctx, name)
	return int(n), err
}

func (p pgSessions) Len(ctx context.Context) (int, error) { return p.store.CountSessions(ctx) }
