// Approvals (docs/approvals.md): the state ledgerd keeps beside the log
// for them — the approvers, their sessions, the previews — shared by the
// mediators' endpoints (approvals_mediator.go) and the approver's page
// (approvals_page.go). The lifecycle itself is the ledger's (package
// ledger enforces it as entries are chained).

package server

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	"github.com/decisionledger/ledger/approval/approver"
	"github.com/decisionledger/ledger/approval/preview"
	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/config"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/ledger"
)

// Approvals are what ledgerd holds for approvals when the config has an
// approvals member; Options.Approvals is nil otherwise.
type Approvals struct {
	pendingTTL, executionTTL time.Duration
	// creds are the credentials in force, whose approvers find looks
	// up; New sets them.
	creds    *Credentials
	sessions *approver.Sessions
	previews previewStore
	// db is the database that keeps the previews and the sessions,
	// whose ended sessions the sweep deletes; nil with badger.
	db ApprovalsDB
	// trusted are the origins besides ledgerd's own from which the page
	// takes a POST (approver.CheckOrigin).
	trusted []string
	// now is the time at which states are judged (GET /v1/approvals/{id},
	// the preview sweep): time.Now, or a test's clock.
	now func() time.Time
}

// ApprovalsDB is the database of a PostgreSQL store (*postgres.Store),
// for the approvals' state of its instances: the previews in its table
// approval_previews (docs/postgres.md), and the deletion of the
// approvers' sessions that ended.
type ApprovalsDB interface {
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

// NewApprovals makes the approvals' state of cfg (the config's approvals
// member, checked). With db nil (a badger store), the previews are kept
// in storeDir's previews directory (config store_dir) and the sessions in
// the process's memory; else the previews in db, and the sessions in
// sessions (nil: in memory), so that every instance, and the next
// sequencer after a failover, has them.
func NewApprovals(cfg *config.ApprovalsConfig, storeDir string, db ApprovalsDB, sessions approver.SessionStore) (*Approvals, error) {
	pending, execution, err := cfg.TTLs()
	if err != nil {
		return nil, err
	}
	if _, err := approver.ByName(cfg.Approvers); err != nil {
		return nil, fmt.Errorf("approvals.approvers: %w", err)
	}
	st := &Approvals{
		pendingTTL: pending, executionTTL: execution,
		trusted: cfg.TrustedOrigins, now: time.Now, db: db,
	}
	if db != nil {
		st.previews = dbPreviews{db}
		st.sessions = approver.NewSessions(approver.Options{Store: sessions})
		return st, nil
	}
	if st.previews, err = openDiskPreviews(filepath.Join(storeDir, previewDirName)); err != nil {
		return nil, err
	}
	st.sessions = approver.NewSessions(approver.Options{})
	return st, nil
}

// find looks an approver up by name among the approvers in force (a
// reload changes them): for Sessions.SignIn and Resume, and at every
// request of the page, which so judges an approver by their actions and
// principals now.
func (a *Approvals) find(name string) (*approver.Approver, bool) {
	return a.creds.load().approvers(name)
}

// approverPreview is the preview an approver is shown for an approval.
type approverPreview struct {
	keptPreview
	Digest commit.Digest // preview.Digest(JSON)
	// Sent says it is the mediator's; otherwise it is the default
	// preview (defaultPreview).
	Sent bool
}

// previewOf returns the preview an approver is shown for the approval st:
// the one its mediator sent with the request, or, when none was sent (or
// a crash lost it between the append and the rename), the default
// preview, made from the request's entry alone (defaultPreview), which
// gives the same bytes and digest every time. A preview store that
// cannot tell is an error, never the default preview: its digest may not
// be the one the approval's answer announced.
func (s *Server) previewOf(ctx context.Context, st ledger.ApprovalStatus) (approverPreview, error) {
	rec, ok, err := s.appr.previews.get(ctx, st.ID)
	if err != nil {
		return approverPreview{}, fmt.Errorf("the preview of approval %s: %w", st.ID, err)
	}
	if ok {
		kept, err := decodeKept(rec)
		if err != nil {
			return approverPreview{}, fmt.Errorf("the preview of approval %s: %w", st.ID, err)
		}
		return approverPreview{keptPreview: kept, Digest: preview.Digest(kept.JSON), Sent: true}, nil
	}
	raw, err := s.l.Entry(ctx, st.Request)
	if err != nil {
		return approverPreview{}, fmt.Errorf("the request at index %d: %w", st.Request, err)
	}
	e, err := entry.Parse(raw)
	if err != nil {
		return approverPreview{}, fmt.Errorf("the request at index %d: %w", st.Request, err)
	}
	p, err := defaultPreview(e)
	if err != nil {
		return approverPreview{}, err
	}
	return approverPreview{keptPreview: keptPreview{JSON: p.JSON, Recorded: true, Truncated: p.Truncated, Pass: p.Pass}, Digest: p.Digest}, nil
}

// defaultPreview is the preview of a request whose mediator sent none:
// the terms its entry records (the minimized attributes, never raw
// parameters), redacted and bounded as any preview is.
func defaultPreview(e *entry.Entry) (preview.Preview, error) {
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
		ParamsDigest: e.Params.Digest.String(), ParamsSize: e.Params.Size, Policies: nonNilIDs(e.Policies),
	})
	if err != nil {
		return preview.Preview{}, err
	}
	return preview.Render(doc)
}
