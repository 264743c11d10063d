// Approvals (docs/approvals.md): the state ledgerd keeps beside the log
// for them — the approvers, their sessions, the previews — shared by the
// mediators' endpoints (approvals_mediator.go) and the approver's page
// (approvals_page.go). The lifecycle itself is the ledger's (package
// ledger enforces it as entries are chained).

package main

import (
	"context"
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
	"github.com/decisionledger/ledger/storage/postgres"
)

// approvalsState is what ledgerd holds for approvals when the config has
// an approvals member; server.appr is nil otherwise.
type approvalsState struct {
	pendingTTL, executionTTL time.Duration
	// creds are the credentials in force, whose approvers find looks
	// up; routes sets them (reload.go).
	creds    *liveCredentials
	sessions *approver.Sessions
	previews previewStore
	// pg is the PostgreSQL store that keeps the sessions, whose ended
	// ones the sweep deletes; nil with badger.
	pg *postgres.Store
	// trusted are the origins besides ledgerd's own from which the page
	// takes a POST (approver.CheckOrigin).
	trusted []string
	// now is the time at which states are judged (GET /v1/approvals/{id},
	// the preview sweep): time.Now, or a test's clock.
	now func() time.Time
}

// newApprovalsState makes the state for cfg, whose Approvals is set and
// checked: with pg nil (badger), its previews in store_dir/previews and
// its sessions in memory; else both in pg, the sequencer's store
// (approvals_store.go).
func newApprovalsState(cfg *config.Config, pg *postgres.Store) (*approvalsState, error) {
	a := cfg.Approvals
	pending, execution, err := a.TTLs()
	if err != nil {
		return nil, err
	}
	if _, err := approver.ByName(a.Approvers); err != nil {
		return nil, fmt.Errorf("approvals.approvers: %w", err)
	}
	st := &approvalsState{
		pendingTTL: pending, executionTTL: execution,
		trusted: a.TrustedOrigins, now: time.Now, pg: pg,
	}
	if pg != nil {
		st.previews = pgPreviews{pg}
		st.sessions = approver.NewSessions(approver.Options{Store: pgSessions{pg}})
		return st, nil
	}
	if st.previews, err = openDiskPreviews(filepath.Join(cfg.StoreDir, previewDirName)); err != nil {
		return nil, err
	}
	st.sessions = approver.NewSessions(approver.Options{})
	return st, nil
}

// find looks an approver up by name among the approvers in force (a
// reload changes them): for Sessions.SignIn and Resume, and at every
// request of the page, which so judges an approver by their actions and
// principals now.
func (a *approvalsState) find(name string) (*approver.Approver, bool) {
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
func (s *server) previewOf(ctx context.Context, st ledger.ApprovalStatus) (approverPreview, error) {
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
