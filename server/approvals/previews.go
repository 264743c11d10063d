// Where ledgerd keeps approvals' previews (docs/approvals.md "Where
// previews and sessions live"): with a badger store, in
// store_dir/previews (DiskPreviews); with PostgreSQL, in the database
// (dbPreviews), so that every instance, and the next sequencer after a
// failover, has them. The approvers' sessions are kept by
// approver.Sessions: in memory, or in the database through the
// command's adapter.

package approvals

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/decisionledger/ledger/approval/preview"
	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/ledger"
)

// PreviewStore keeps the previews of open approvals, outside the log,
// each under its approval's id. A preview arrives before its approval's
// id is known (the id is the hash of the entry the append makes): it is
// staged before the append, and committed under the id once the append
// is durable, before the answer that announces its digest. Previews are
// removed when their approval closes (Remove) or expires (the sweep).
type PreviewStore interface {
	// Stage takes a preview's record (EncodeKept) before the append of
	// the request that carries it.
	Stage(ctx context.Context, doc []byte) (*Staged, error)
	// Commit keeps the staged preview under the approval id, durably
	// once it returns nil. If the approval has a preview already (an
	// idempotent retry of its request), the first one stays: the
	// approver may have seen it. The staged preview is spent either
	// way.
	Commit(ctx context.Context, staged *Staged, id commit.Digest) error
	// Abandon drops a staged preview that is not committed.
	Abandon(staged *Staged)
	// Get returns the preview record of approval id (DecodeKept reads
	// it), and ok false if there is none (never sent, or removed).
	Get(ctx context.Context, id commit.Digest) (doc []byte, ok bool, err error)
	// Remove removes the preview of approval id, if any.
	Remove(ctx context.Context, id commit.Digest) error
	// IDs returns the ids of the approvals that have a preview.
	IDs(ctx context.Context) ([]commit.Digest, error)
}

// A kept preview is what the preview store holds for an approval: the
// line
//
//	ledger-preview v1 truncated=T pass=P
//
// (T 0 or 1, P 1 to preview.FallbackPass), a newline, then the rendered
// preview's canonical JSON (preview.Preview.JSON), whose digest the
// approval's answer announced. The line keeps what ledgerd knew as it
// rendered the preview and the bytes cannot tell: whether bounding left
// anything out (a marker such as "[+450 items]" may as well be the
// workload's own text). A record without the line (kept by an earlier
// ledgerd) is the preview alone, its truncation not recorded.
const keptPreviewPrefix = "ledger-preview v1 "

// Kept is a kept preview, decoded.
type Kept struct {
	JSON []byte
	// Recorded says Truncated and Pass are ledgerd's record; false for a
	// preview an earlier ledgerd kept.
	Recorded  bool
	Truncated bool // preview.Preview.Truncated
	Pass      int  // preview.Preview.Pass
}

// EncodeKept is the record the preview store keeps for p.
func EncodeKept(p *preview.Preview) []byte {
	t := 0
	if p.Truncated {
		t = 1
	}
	b := fmt.Appendf(nil, "%struncated=%d pass=%d\n", keptPreviewPrefix, t, p.Pass)
	return append(b, p.JSON...)
}

// ErrKeptPreview is a kept preview whose first line is not EncodeKept's.
var ErrKeptPreview = errors.New("previews: a kept preview's first line is malformed")

// DecodeKept decodes a record of the preview store.
func DecodeKept(b []byte) (Kept, error) {
	rest, ok := bytes.CutPrefix(b, []byte(keptPreviewPrefix))
	if !ok {
		return Kept{JSON: b}, nil // canonical JSON never starts so
	}
	line, doc, ok := bytes.Cut(rest, []byte("\n"))
	if !ok {
		return Kept{}, ErrKeptPreview
	}
	for t := range 2 {
		for pass := 1; pass <= preview.FallbackPass; pass++ {
			if string(line) == fmt.Sprintf("truncated=%d pass=%d", t, pass) {
				return Kept{JSON: doc, Recorded: true, Truncated: t == 1, Pass: pass}, nil
			}
		}
	}
	return Kept{}, ErrKeptPreview
}

// Staged is a preview between Stage and Commit: a temporary file
// (DiskPreviews) or the document itself (dbPreviews).
type Staged struct {
	path string
	doc  []byte
}

// PreviewDirName is the directory of store_dir that holds previews.
const PreviewDirName = "previews"

// DiskPreviews is the PreviewStore of a badger store: one file per
// approval, <dir>/<hex of the approval id>.json, holding the preview's
// record (EncodeKept), mode 0600. stage writes a
// temporary file, synced, before the append; Commit renames it once the
// append is durable; a crash between the two leaves a temporary file,
// which OpenDiskPreviews removes.
type DiskPreviews struct {
	dir string
}

// previewSuffix and previewTempPrefix name the store's files.
const (
	previewSuffix     = ".json"
	previewTempPrefix = ".tmp-"
)

// OpenDiskPreviews opens (making it if needed, mode 0700) the preview
// directory dir, removing the temporary files a crash left.
func OpenDiskPreviews(dir string) (*DiskPreviews, error) {
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
	return &DiskPreviews{dir: dir}, nil
}

// Path is the file of approval id's preview.
func (p *DiskPreviews) Path(id commit.Digest) string {
	return filepath.Join(p.dir, hex.EncodeToString(id[:])+previewSuffix)
}

func (p *DiskPreviews) Stage(_ context.Context, doc []byte) (_ *Staged, err error) {
	f, err := os.CreateTemp(p.dir, previewTempPrefix+"*")
	if err != nil {
		return nil, fmt.Errorf("previews: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err = f.Chmod(0o600); err != nil {
		return nil, fmt.Errorf("previews: %w", err)
	}
	if _, err = f.Write(doc); err != nil {
		return nil, fmt.Errorf("previews: %w", err)
	}
	if err = f.Sync(); err != nil {
		return nil, fmt.Errorf("previews: %w", err)
	}
	return &Staged{path: f.Name()}, f.Close()
}

func (p *DiskPreviews) Commit(_ context.Context, staged *Staged, id commit.Digest) error {
	dst := p.Path(id)
	if _, err := os.Lstat(dst); err == nil {
		return os.Remove(staged.path)
	}
	if err := os.Rename(staged.path, dst); err != nil {
		os.Remove(staged.path)
		return fmt.Errorf("previews: %w", err)
	}
	return nil
}

func (p *DiskPreviews) Abandon(staged *Staged) { os.Remove(staged.path) }

func (p *DiskPreviews) Get(_ context.Context, id commit.Digest) ([]byte, bool, error) {
	b, err := os.ReadFile(p.Path(id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("previews: %w", err)
	}
	return b, true, nil
}

func (p *DiskPreviews) Remove(_ context.Context, id commit.Digest) error {
	if err := os.Remove(p.Path(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("previews: %w", err)
	}
	return nil
}

func (p *DiskPreviews) IDs(context.Context) ([]commit.Digest, error) {
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

// dbPreviews is the PreviewStore of a PostgreSQL store: the table
// approval_previews (docs/postgres.md), written through the sequencer's
// store, so that its writes and deletions are fenced by its lease epoch.
// Stage keeps the document in memory; Commit writes it, once the append
// is durable and before the answer: the row is durable before the answer
// announces the preview's digest, and a commit that fails fails the
// answer (a retry with the same Idempotency-Key writes it).
type dbPreviews struct {
	store DB
}

func (p dbPreviews) Stage(_ context.Context, doc []byte) (*Staged, error) {
	return &Staged{doc: doc}, nil
}

func (p dbPreviews) Commit(ctx context.Context, staged *Staged, id commit.Digest) error {
	_, err := p.store.PutPreview(ctx, id, staged.doc)
	staged.doc = nil
	return err
}

func (p dbPreviews) Abandon(staged *Staged) { staged.doc = nil }

func (p dbPreviews) Get(ctx context.Context, id commit.Digest) ([]byte, bool, error) {
	doc, err := p.store.Preview(ctx, id)
	if errors.Is(err, ledger.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return doc, true, nil
}

func (p dbPreviews) Remove(ctx context.Context, id commit.Digest) error {
	return p.store.DeletePreview(ctx, id)
}

func (p dbPreviews) IDs(ctx context.Context) ([]commit.Digest, error) {
	ids, err := p.store.PreviewIDs(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]commit.Digest, len(ids))
	for i, id := range ids {
		out[i] = id
	}
	return out, nil
}

var (
	_ PreviewStore = (*DiskPreviews)(nil)
	_ PreviewStore = dbPreviews{}
)
