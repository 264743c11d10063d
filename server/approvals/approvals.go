// Package approvals is the state ledgerd keeps beside the log for
// approvals (docs/approvals.md) — the approvers, their sessions, the
// previews — shared by the mediators' endpoints (package server's
// approvals_mediator.go) and the approver's page (package approverpage),
// and the approval's state as both show it (StatusView). The lifecycle
// itself is the ledger's (package ledger enforces it as entries are
// chained).
package approvals

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/decisionledger/ledger/approval/approver"
	"github.com/decisionledger/ledger/approval/preview"
	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/config"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/ledger"
)

// State is what ledgerd holds for approvals when the config has an
// approvals member.
type State struct {
	// PendingTTL and ExecutionTTL are the deadlines the config sets
	// (approvals pending_ttl and execution_ttl), which PublishConfig
	// publishes.
	PendingTTL, ExecutionTTL time.Duration
	// approvers finds an approver by name among the approvers in force
	// (SetApprovers).
	approvers func(name string) (*approver.Approver, bool)
	// Sessions are the approvers' sessions.
	Sessions *approver.Sessions
	// Previews keep the previews of open approvals.
	Previews PreviewStore
	// db is the database that keeps the previews and the sessions,
	// whose ended sessions the sweep deletes; nil with badger.
	db DB
	// Trusted are the origins besides ledgerd's own from which the page
	// takes a POST (approver.CheckOrigin).
	Trusted []string
	// Now is the time at which states are judged (GET /v1/approvals/{id},
	// the page, the preview sweep): time.Now, or a test's clock.
	Now func() time.Time
}

// DB is the database of a PostgreSQL store (*postgres.Store),
// for the approvals' state of its instances: the previews in its table
// approval_previews (docs/postgres.md), and the deletion of the
// approvers' sessions that ended.
type DB interface {
	// PutPreview stores doc as the preview of approval id unless it has
	// one (the first stays), durably once it returns nil; it is fenced,
	// refused once another instance took the lease.
	PutPreview(ctx context.Context, id [sha256.Size]byte, doc []byte) (stored bool, err error)
	// Preview returns approval id's preview, an error wrapping
	// ledger.ErrNotFound if there is none.
	Preview(ctx context.Context, id [sha256.Size]byte) ([]byte, error)
	// DeletePreview deletes approval id's preview, if any (fenced).
	DeletePreview(ctx context.Context, id [sha256.Size]byte) error
	// PreviewIDs lists the approvals that have a preview.
	PreviewIDs(ctx context.Context) ([][sha256.Size]byte, error)
	// DeleteEndedSessions deletes the sessions unused for idle, or older
	// than lifetime, at now, and says how many.
	DeleteEndedSessions(ctx context.Context, now time.Time, idle, lifetime time.Duration) (int64, error)
}

// New makes the approvals' state of cfg (the config's approvals
// member, checked). With db nil (a badger store), the previews are kept
// in storeDir's previews directory (config store_dir) and the sessions in
// the process's memory; else the previews in db, and the sessions in
// sessions (nil: in memory), so that every instance, and the next
// sequencer after a failover, has them.
func New(cfg *config.ApprovalsConfig, storeDir string, db DB, sessions approver.SessionStore) (*State, error) {
	pending, execution, err := cfg.TTLs()
	if err != nil {
		return nil, err
	}
	if _, err := approver.ByName(cfg.Approvers); err != nil {
		return nil, fmt.Errorf("approvals.approvers: %w", err)
	}
	st := &State{
		PendingTTL: pending, ExecutionTTL: execution,
		Trusted: cfg.TrustedOrigins, Now: time.Now, db: db,
		approvers: func(string) (*approver.Approver, bool) { return nil, false },
	}
	if db != nil {
		st.Previews = dbPreviews{db}
		st.Sessions = approver.NewSessions(approver.Options{Store: sessions})
		return st, nil
	}
	if st.Previews, err = OpenDiskPreviews(filepath.Join(storeDir, PreviewDirName)); err != nil {
		return nil, err
	}
	st.Sessions = approver.NewSessions(approver.Options{})
	return st, nil
}

// SetApprovers names where Find looks approvers up: the credentials in
// force (package server's), which a reload replaces.
func (a *State) SetApprovers(find func(name string) (*approver.Approver, bool)) {
	a.approvers = find
}

// Find looks an approver up by name among the approvers in force (a
// reload changes them): for Sessions.SignIn and Resume, and at every
// request of the page, which so judges an approver by their actions and
// principals now.
func (a *State) Find(name string) (*approver.Approver, bool) {
	return a.approvers(name)
}

// Shown is the preview an approver is shown for an approval.
type Shown struct {
	Kept
	Digest commit.Digest // preview.Digest(JSON)
	// Sent says it is the mediator's; otherwise it is the default
	// preview (DefaultPreview).
	Sent bool
}

// Entries reads the log's entries (a *ledger.Ledger).
type Entries interface {
	Entry(ctx context.Context, index uint64) ([]byte, error)
}

// Preview returns the preview an approver is shown for the approval st:
// the one its mediator sent with the request, or, when none was sent (or
// a crash lost it between the append and the rename), the default
// preview, made from the request's entry in l alone (DefaultPreview), which
// gives the same bytes and digest every time. A preview store that
// cannot tell is an error, never the default preview: its digest may not
// be the one the approval's answer announced.
func (a *State) Preview(ctx context.Context, l Entries, st ledger.ApprovalStatus) (Shown, error) {
	rec, ok, err := a.Previews.Get(ctx, st.ID)
	if err != nil {
		return Shown{}, fmt.Errorf("the preview of approval %s: %w", st.ID, err)
	}
	if ok {
		kept, err := DecodeKept(rec)
		if err != nil {
			return Shown{}, fmt.Errorf("the preview of approval %s: %w", st.ID, err)
		}
		return Shown{Kept: kept, Digest: preview.Digest(kept.JSON), Sent: true}, nil
	}
	raw, err := l.Entry(ctx, st.Request)
	if err != nil {
		return Shown{}, fmt.Errorf("the request at index %d: %w", st.Request, err)
	}
	e, err := entry.Parse(raw)
	if err != nil {
		return Shown{}, fmt.Errorf("the request at index %d: %w", st.Request, err)
	}
	p, err := DefaultPreview(e)
	if err != nil {
		return Shown{}, err
	}
	return Shown{Kept: Kept{JSON: p.JSON, Recorded: true, Truncated: p.Truncated, Pass: p.Pass}, Digest: p.Digest}, nil
}

// DefaultPreview is the preview of a request whose mediator sent none:
// the terms its entry records (the minimized attributes, never raw
// parameters), redacted and bounded as any preview is.
func DefaultPreview(e *entry.Entry) (preview.Preview, error) {
	attrs := json.RawMessage(e.Attributes)
	if len(attrs) == 0 {
		attrs = json.RawMessage(`{}`)
	}
	doc, err := json.Marshal(struct {
		Note         string          `json:"note"`
		Action       string          `json:"action"`
		Principal    string          `json:"principal"`
		Mediator     string          `json:"mediator"`
		Attributes   json.RawMessage `json:"attributes"`
		ParamsDigest string          `json:"params_digest"`
		ParamsSize   int             `json:"params_size"`
		Policies     []string        `json:"policies"`
	}{
		Note:   "The mediator sent no preview: these are the terms the ledger recorded for the request.",
		Action: e.Action, Principal: e.Principal, Mediator: e.Mediator, Attributes: attrs,
		ParamsDigest: e.Params.DigestText(), ParamsSize: e.Params.Size, Policies: nonNil(e.Policies),
	})
	if err != nil {
		return preview.Preview{}, err
	}
	return preview.Render(doc)
}

// PreviewSweepInterval is how often the previews no approver needs any
// more are removed (SweepEvery).
const PreviewSweepInterval = time.Minute

// PublishConfig appends an approval_config entry with a's deadlines,
// unless the deadlines in force in l (the latest approval_config) are
// those already. It runs at start, before serving: only then does a
// needs_approval decision open an approval. An append refused for a full
// queue is retried, as a policy publication is.
func (a *State) PublishConfig(ctx context.Context, l *ledger.Ledger, log *slog.Logger) error {
	pending, execution, ok := l.ApprovalConfig()
	if ok && pending == a.PendingTTL && execution == a.ExecutionTTL {
		log.InfoContext(ctx, "approval deadlines in force, published before", "pending_ttl", a.PendingTTL.String(), "execution_ttl", a.ExecutionTTL.String())
		return nil
	}
	rec := ledger.Record{Kind: entry.KindApprovalConfig, PendingTTL: a.PendingTTL, ExecutionTTL: a.ExecutionTTL}
	var receipt ledger.Receipt
	var err error
	for wait := time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		receipt, err = l.Append(ctx, rec)
		if !errors.Is(err, ledger.ErrQueueFull) {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
	if err != nil {
		return fmt.Errorf("publishing the approval deadlines: %w", err)
	}
	log.InfoContext(ctx, "approval deadlines published", "pending_ttl", a.PendingTTL.String(), "execution_ttl", a.ExecutionTTL.String(), "index", receipt.Index)
	return nil
}

// FormatTime is t as the entries record it (entry.TimeLayout, UTC).
func FormatTime(t time.Time) string { return t.UTC().Format(entry.TimeLayout) }

// StatusView is the answer of GET /v1/approvals/{id}: an
// approval's state judged at the server's time. Members without a value
// are omitted.
type StatusView struct {
	ID                string  `json:"id"`
	Request           uint64  `json:"request"`
	RequestTime       string  `json:"request_time"`
	Mediator          string  `json:"mediator"`
	Principal         string  `json:"principal"`
	Action            string  `json:"action"`
	ParamsDigest      string  `json:"params_digest"`
	ParamsSize        int     `json:"params_size"`
	State             string  `json:"state"`
	PendingDeadline   string  `json:"pending_deadline"`
	Verdict           string  `json:"verdict,omitempty"`
	VerdictIndex      *uint64 `json:"verdict_index,omitempty"`
	Approver          string  `json:"approver,omitempty"`
	ExecutionDeadline string  `json:"execution_deadline,omitempty"`
	Consumption       *uint64 `json:"consumption,omitempty"`
	Outcome           string  `json:"outcome,omitempty"`
	OutcomeIndex      *uint64 `json:"outcome_index,omitempty"`
}

// The states of StateAt.
const (
	StatePending  = "pending"
	StateApproved = "approved"
	StateDenied   = "denied"
	StateExpired  = "expired"
	StateConsumed = "consumed"
)

// StateAt is st's state at now: pending (no verdict, now before
// the pending deadline), approved (not consumed, now before the
// execution deadline), denied, consumed, or expired (no verdict at the
// pending deadline or later, or approved and not consumed at the
// execution deadline or later: a deadline is passed at equality).
func StateAt(st ledger.ApprovalStatus, now time.Time) string {
	switch {
	case st.Consumed:
		return StateConsumed
	case st.Verdict == entry.Reject:
		return StateDenied
	case st.Verdict == entry.Approve && now.Before(st.ExecutionDeadline):
		return StateApproved
	case st.Verdict == "" && now.Before(st.PendingDeadline):
		return StatePending
	}
	return StateExpired
}

// NewStatusView is st as GET /v1/approvals/{id} shows it at now.
func NewStatusView(st ledger.ApprovalStatus, now time.Time) StatusView {
	v := StatusView{
		ID: st.ID.String(), Request: st.Request, RequestTime: FormatTime(st.RequestTime),
		Mediator: st.Mediator, Principal: st.Principal, Action: st.Action,
		ParamsDigest: st.Params.DigestText(), ParamsSize: st.Params.Size,
		State: StateAt(st, now), PendingDeadline: FormatTime(st.PendingDeadline),
	}
	if st.Verdict != "" {
		v.Verdict, v.VerdictIndex, v.Approver = string(st.Verdict), &st.VerdictIndex, st.Approver
	}
	if !st.ExecutionDeadline.IsZero() {
		v.ExecutionDeadline = FormatTime(st.ExecutionDeadline)
	}
	if st.Consumed {
		v.Consumption = &st.Consumption
	}
	if st.Outcome != "" {
		v.Outcome, v.OutcomeIndex = string(st.Outcome), &st.OutcomeIndex
	}
	return v
}

// Approvals reads the approvals' state the ledger keeps (a
// *ledger.Ledger).
type Approvals interface {
	Approval(id commit.Digest) (ledger.ApprovalStatus, bool)
}

// Sweep removes the previews no approver needs any more: those of
// approvals denied, consumed or expired at now, and of ids l does not
// know. It returns how many it removed.
func (a *State) Sweep(ctx context.Context, l Approvals, now time.Time) (int, error) {
	ids, err := a.Previews.IDs(ctx)
	if err != nil {
		return 0, err
	}
	removed := 0
	for _, id := range ids {
		st, known := l.Approval(id)
		if known && (StateAt(st, now) == StatePending || StateAt(st, now) == StateApproved) {
			continue
		}
		if err := a.Previews.Remove(ctx, id); err != nil {
			return removed, err
		}
		removed++
	}
	return removed, nil
}

// SweepEvery sweeps the previews (Sweep) at once, then every interval,
// until ctx ends, logging what it removed to log; on PostgreSQL it also
// deletes the approvers' sessions that have ended.
func (a *State) SweepEvery(ctx context.Context, l Approvals, interval time.Duration, log *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if n, err := a.Sweep(ctx, l, a.Now()); err != nil {
			log.ErrorContext(ctx, "preview sweep failed", "error", err)
		} else if n > 0 {
			log.InfoContext(ctx, "previews of closed or expired approvals removed", "removed", n)
		}
		if db := a.db; db != nil {
			ses := a.Sessions
			if n, err := db.DeleteEndedSessions(ctx, a.Now(), ses.IdleTimeout(), ses.Lifetime()); err != nil {
				log.ErrorContext(ctx, "deleting ended approver sessions failed", "error", err)
			} else if n > 0 {
				log.InfoContext(ctx, "ended approver sessions deleted", "deleted", n)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// nonNil is ids, or an empty list for none: a JSON array, never null.
func nonNil(ids []string) []string {
	if ids == nil {
		return []string{}
	}
	return ids
}
