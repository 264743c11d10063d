// Where ledgerd keeps approvals' previews (docs/approvals.md "Where
// previews and sessions live"): with a badger store, in
// store_dir/previews (diskPreviews); with PostgreSQL, in the database
// (dbPreviews), so that every instance, and the next sequencer after a
// failover, has them. The approvers' sessions are kept by
// approver.Sessions: in memory, or in the database through the
// command's adapter.

package server

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

// previewStore keeps the previews of open approvals, outside the log,
// each under its approval's id. A preview arrives before its approval's
// id is known (the id is the hash of the entry the append makes): it is
// staged before the append, and committed under the id once the append
// is durable, before the answer that announces its digest. Previews are
// removed when their approval closes (remove) or expires (the sweep).
type previewStore interface {
	// stage takes a preview's record (encodeKept) before the append of
	// the request that carries it.
	stage(ctx context.Context, doc []byte) (*stagedPreview, error)
	// commit keeps the staged preview under the approval id, durably
	// once it returns nil. If the approval has a preview already (an
	// idempotent retry of its request), the first one stays: the
	// approver may have seen it. The staged preview is spent either
	// way.
	commit(ctx context.Context, staged *stagedPreview, id commit.Digest) error
	// abandon drops a staged preview that is not committed.
	abandon(staged *stagedPreview)
	// get returns the preview record of approval id (decodeKept reads
	// it), and ok false if there is none (never sent, or removed).
	get(ctx context.Context, id commit.Digest) (doc []byte, ok bool, err error)
	// remove removes the preview of approval id, if any.
	remove(ctx context.Context, id commit.Digest) error
	// ids returns the ids of the approvals that have a preview.
	ids(ctx context.Context) ([]commit.Digest, error)
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

// keptPreview is a kept preview, decoded.
type keptPreview struct {
	JSON []byte
	// Recorded says Truncated and Pass are ledgerd's record; false for a
	// preview an earlier ledgerd kept.
	Recorded  bool
	Truncated bool // preview.Preview.Truncated
	Pass      int  // preview.Preview.Pass
}

// encodeKept is the record the preview store keeps for p.
func encodeKept(p *preview.Preview) []byte {
	t := 0
	if p.Truncated {
		t = 1
	}
	b := fmt.Appendf(nil, "%struncated=%d pass=%d\n", keptPreviewPrefix, t, p.Pass)
	return append(b, p.JSON...)
}

// errKeptPreview is a kept preview whose first line is not encodeKept's.
var errKeptPreview = errors.New("previews: a kept preview's first line is malformed")

// decodeKept decodes a record of the preview store.
func decodeKept(b []byte) (keptPreview, error) {
	rest, ok := bytes.CutPrefix(b, []byte(keptPreviewPrefix))
	if !ok {
		return keptPreview{JSON: b}, nil // canonical JSON never starts so
	}
	line, doc, ok := bytes.Cut(rest, []byte("\n"))
	if !ok {
		return keptPreview{}, errKeptPreview
	}
	for t := range 2 {
		for pass := 1; pass <= preview.FallbackPass; pass++ {
			if string(line) == fmt.Sprintf("truncated=%d pass=%d", t, pass) {
				return keptPreview{JSON: doc, Recorded: true, Truncated: t == 1, Pass: pass}, nil
			}
		}
	}
	return keptPreview{}, errKeptPreview
}

// stagedPreview is a preview between stage and commit: a temporary file
// (diskPreviews) or the document itself (pgPreviews).
type stagedPreview struct {
	path string
	doc  []byte
}

// previewDirName is the directory of store_dir that holds previews.
const previewDirName = "previews"

// diskPreviews is the previewStore of a badger store: one file per
// approval, <dir>/<hex of the approval id>.json, holding the preview's
// record (encodeKept), mode 0600. stage writes a
// temporary file, synced, before the append; commit renames it once the
// append is durable; a crash between the two leaves a temporary file,
// which openDiskPreviews removes.
type diskPreviews struct {
	dir string
}

// previewSuffix and previewTempPrefix name the store's files.
const (
	previewSuffix     = ".json"
	previewTempPrefix = ".tmp-"
)

// openDiskPreviews opens (making it if needed, mode 0700) the preview
// directory dir, removing the temporary files a crash left.
func openDiskPreviews(dir string) (*diskPreviews, error) {
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
	return &diskPreviews{dir: dir}, nil
}

func (p *diskPreviews) path(id commit.Digest) string {
	return filepath.Join(p.dir, hex.EncodeToString(id[:])+previewSuffix)
}

func (p *diskPreviews) stage(_ context.Context, doc []byte) (_ *stagedPreview, err error) {
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
	return &stagedPreview{path: f.Name()}, f.Close()
}

func (p *diskPreviews) commit(_ context.Context, staged *stagedPreview, id commit.Digest) error {
	dst := p.path(id)
	if _, err := os.Lstat(dst); err == nil {
		return os.Remove(staged.path)
	}
	if err := os.Rename(staged.path, dst); err != nil {
		os.Remove(staged.path)
		return fmt.Errorf("previews: %w", err)
	}
	return nil
}

func (p *diskPreviews) abandon(staged *stagedPreview) { os.Remove(staged.path) }

func (p *diskPreviews) get(_ context.Context, id commit.Digest) ([]byte, bool, error) {
	b, err := os.ReadFile(p.path(id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("previews: %w", err)
	}
	return b, true, nil
}

func (p *diskPreviews) remove(_ context.Context, id commit.Digest) error {
	if err := os.Remove(p.path(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("previews: %w", err)
	}
	return nil
}

func (p *diskPreviews) ids(context.Context) ([]commit.Digest, error) {
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

// dbPreviews is the previewStore of a PostgreSQL store: the table
// approval_previews (docs/postgres.md), written through the sequencer's
// store, so that its writes and deletions are fenced by its lease epoch.
// stage keeps the document in memory; commit writes it, once the append
// is durable and before the answer: the row is durable before the answer
// announces the preview's digest, and a commit that fails fails the
// answer (a retry with the same Idempotency-Key writes it).
type dbPreviews struct {
	store ApprovalsDB
}

func (p dbPreviews) stage(_ context.Context, doc []byte) (*stagedPreview, error) {
	return &stagedPreview{doc: doc}, nil
}

func (p dbPreviews) commit(ctx context.Context, staged *stagedPreview, id commit.Digest) error {
	_, err := p.store.PutPreview(ctx, id, staged.doc)
	staged.doc = nil
	return err
}

func (p dbPreviews) abandon(staged *stagedPreview) { staged.doc = nil }

func (p dbPreviews) get(ctx context.Context, id commit.Digest) ([]byte, bool, error) {
	doc, err := p.store.Preview(ctx, id)
	if errors.Is(err, ledger.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return doc, true, nil
}

func (p dbPreviews) remove(ctx context.Context, id commit.Digest) error {
	return p.store.DeletePreview(ctx, id)
}

func (p dbPreviews) ids(ctx context.Context) ([]commit.Digest, error) {
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
