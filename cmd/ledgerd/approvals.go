// Approvals (docs/approvals.md): the state ledgerd keeps beside the log
// for them — the approvers, their sessions, the previews — shared by the
// mediators' endpoints (approvals_mediator.go) and the approver's page
// (approvals_page.go). The lifecycle itself is the ledger's (package
// ledger enforces it as entries are chained).

package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/decisionledger/ledger/approval/approver"
	"github.com/decisionledger/ledger/approval/preview"
	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/ledger"
)

// approvalsState is what ledgerd holds for approvals when the config has
// an approvals member; server.appr is nil otherwise.
type approvalsState struct {
	pendingTTL, executionTTL time.Duration
	// creds are the credentials in force, whose approvers find looks
	// up; routes sets them (reload.go).
	creds    *liveCredentials
	sessions *approver.Sessions
	previews *previewStore
	// trusted are the origins besides ledgerd's own from which the page
	// takes a POST (approver.CheckOrigin).
	trusted []string
	// now is the time at which states are judged (GET /v1/approvals/{id},
	// the preview sweep): time.Now, or a test's clock.
	now func() time.Time
}

// newApprovalsState makes the state for cfg, whose Approvals is set and
// checked, with its previews in store_dir/previews.
func newApprovalsState(cfg *Config) (*approvalsState, error) {
	a := cfg.Approvals
	pending, execution, err := a.ttls()
	if err != nil {
		return nil, err
	}
	if _, err := approver.ByName(a.Approvers); err != nil {
		return nil, fmt.Errorf("approvals.approvers: %w", err)
	}
	previews, err := openPreviewStore(filepath.Join(cfg.StoreDir, previewDirName))
	if err != nil {
		return nil, err
	}
	return &approvalsState{
		pendingTTL: pending, executionTTL: execution,
		sessions: approver.NewSessions(approver.Options{}),
		previews: previews, trusted: a.TrustedOrigins, now: time.Now,
	}, nil
}

// find looks an approver up by name among the approvers in force (a
// reload changes them): for Sessions.Login, and at every request of the
// page, which so judges an approver by their actions and principals now.
func (a *approvalsState) find(name string) (*approver.Approver, bool) {
	return a.creds.load().approvers(name)
}

// previewDirName is the directory of store_dir that holds previews.
const previewDirName = "previews"

// previewStore keeps the previews of open approvals, outside the log:
// one file per approval, <dir>/<hex of the approval id>.json, holding the
// preview's canonical JSON (preview.Preview.JSON), mode 0600. A preview is
// written before its approval's id is known (put's temporary file) and
// renamed once it is; a crash between the two leaves a temporary file,
// which openPreviewStore removes. Previews are removed when their
// approval closes (remove) or expires (the sweep).
type previewStore struct {
	dir string
}

// previewSuffix and previewTempPrefix name the store's files.
const (
	previewSuffix     = ".json"
	previewTempPrefix = ".tmp-"
)

// openPreviewStore opens (making it if needed, mode 0700) the preview
// directory dir, removing the temporary files a crash left.
func openPreviewStore(dir string) (*previewStore, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("previews: %w", err)
	}
	names, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("previews: %w", err)
	}
	for _, n := range names {
		if strings.HasPrefix(n.Name(), previewTempPrefix) {
			os.Remove(filepath.Join(dir, n.Name()))
		}
	}
	return &previewStore{dir: dir}, nil
}

func (p *previewStore) path(id commit.Digest) string {
	return filepath.Join(p.dir, hex.EncodeToString(id[:])+previewSuffix)
}

// stage writes a preview's JSON to a temporary file, synced, before the
// request that carries it is appended; commit names it by the approval's
// id once the append is durable, and abandon removes it if the append
// fails or opens no approval.
func (p *previewStore) stage(doc []byte) (staged string, err error) {
	f, err := os.CreateTemp(p.dir, previewTempPrefix+"*")
	if err != nil {
		return "", fmt.Errorf("previews: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err = f.Chmod(0o600); err != nil {
		return "", fmt.Errorf("previews: %w", err)
	}
	if _, err = f.Write(doc); err != nil {
		return "", fmt.Errorf("previews: %w", err)
	}
	if err = f.Sync(); err != nil {
		return "", fmt.Errorf("previews: %w", err)
	}
	return f.Name(), f.Close()
}

// commit names the staged preview by the approval's id. If the approval
// has a preview already (an idempotent retry of its request), the first
// one stays and the staged one is removed: the approver may have seen it.
func (p *previewStore) commit(staged string, id commit.Digest) error {
	dst := p.path(id)
	if _, err := os.Lstat(dst); err == nil {
		return os.Remove(staged)
	}
	if err := os.Rename(staged, dst); err != nil {
		os.Remove(staged)
		return fmt.Errorf("previews: %w", err)
	}
	return nil
}

// abandon removes a staged preview.
func (p *previewStore) abandon(staged string) { os.Remove(staged) }

// get returns the preview of approval id (its canonical JSON) and its
// digest, and false if there is none (never sent, or removed).
func (p *previewStore) get(id commit.Digest) (doc []byte, digest commit.Digest, ok bool) {
	b, err := os.ReadFile(p.path(id))
	if err != nil {
		return nil, commit.Digest{}, false
	}
	return b, preview.Digest(b), true
}

// remove removes the preview of approval id, if any.
func (p *previewStore) remove(id commit.Digest) error {
	if err := os.Remove(p.path(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("previews: %w", err)
	}
	return nil
}

// ids returns the ids of the approvals that have a preview.
func (p *previewStore) ids() ([]commit.Digest, error) {
	names, err := os.ReadDir(p.dir)
	if err != nil {
		return nil, fmt.Errorf("previews: %w", err)
	}
	var ids []commit.Digest
	for _, n := range names {
		h, ok := strings.CutSuffix(n.Name(), previewSuffix)
		if !ok || strings.HasPrefix(n.Name(), previewTempPrefix) {
			continue
		}
		var id commit.Digest
		if b, err := hex.DecodeString(h); err == nil && len(b) == len(id) {
			copy(id[:], b)
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// previewOf returns the preview an approver is shown for the approval st:
// the one its mediator sent with the request, or, when none was sent (or
// a crash lost it between the append and the rename), the default
// preview, made from the request's entry alone (defaultPreview), which
// gives the same bytes and digest every time. sent says which.
func (s *server) previewOf(ctx context.Context, st ledger.ApprovalStatus) (doc []byte, digest commit.Digest, sent bool, err error) {
	if doc, digest, ok := s.appr.previews.get(st.ID); ok {
		return doc, digest, true, nil
	}
	raw, err := s.l.Entry(ctx, st.Request)
	if err != nil {
		return nil, commit.Digest{}, false, fmt.Errorf("the request at index %d: %w", st.Request, err)
	}
	e, err := entry.Parse(raw)
	if err != nil {
		return nil, commit.Digest{}, false, fmt.Errorf("the request at index %d: %w", st.Request, err)
	}
	p, err := defaultPreview(e)
	if err != nil {
		return nil, commit.Digest{}, false, err
	}
	return p.JSON, p.Digest, false, nil
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
