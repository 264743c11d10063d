package approvals

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/decisionledger/ledger/internal/apitest"

	"github.com/decisionledger/ledger/approval/preview"
	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/storage/postgres"
)

// TestPreviewStores runs the preview store's contract on both kinds.
func TestPreviewStores(t *testing.T) {
	t.Run("disk", func(t *testing.T) {
		p, err := OpenDiskPreviews(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		testPreviewStore(t, p)
	})
	t.Run("postgres", func(t *testing.T) {
		s, _ := apitest.PGStore(t)
		testPreviewStore(t, dbPreviews{s})
	})
}

// testPreviewStore: a committed preview is read back byte for byte and
// listed; a second commit for the same approval keeps the first; staged
// and abandoned previews are neither read nor listed; remove removes,
// and removing what is gone is no error.
func testPreviewStore(t *testing.T, p PreviewStore) {
	ctx := t.Context()
	id1, id2, id3 := commit.Digest(sha256.Sum256([]byte("1"))), commit.Digest(sha256.Sum256([]byte("2"))), commit.Digest(sha256.Sum256([]byte("3")))
	doc1, doc2 := []byte(`{"amount":"12.00 EUR","payee":"billing@example.com"}`), []byte(`{"subject":"Q3"}`)
	stage := func(doc []byte) *Staged {
		t.Helper()
		st, err := p.Stage(ctx, doc)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	if _, ok, err := p.Get(ctx, id1); ok || err != nil {
		t.Fatalf("get before any commit: %v, %v", ok, err)
	}
	staged := stage(doc1)
	if ids, err := p.IDs(ctx); err != nil || len(ids) != 0 {
		t.Fatalf("ids with a preview staged only: %v, %v", ids, err)
	}
	if err := p.Commit(ctx, staged, id1); err != nil {
		t.Fatal(err)
	}
	if doc, ok, err := p.Get(ctx, id1); !ok || err != nil || !bytes.Equal(doc, doc1) {
		t.Fatalf("get = %q, %v, %v; want the committed preview", doc, ok, err)
	}
	if err := p.Commit(ctx, stage(doc2), id1); err != nil {
		t.Fatalf("a second commit for the approval: %v", err)
	}
	if doc, _, _ := p.Get(ctx, id1); !bytes.Equal(doc, doc1) {
		t.Fatalf("after a second commit the preview is %q, want the first kept", doc)
	}
	p.Abandon(stage(doc2))
	if err := p.Commit(ctx, stage(doc2), id2); err != nil {
		t.Fatal(err)
	}
	ids, err := p.IDs(ctx)
	slices.SortFunc(ids, func(a, b commit.Digest) int { return bytes.Compare(a[:], b[:]) })
	want := []commit.Digest{id1, id2}
	slices.SortFunc(want, func(a, b commit.Digest) int { return bytes.Compare(a[:], b[:]) })
	if err != nil || !slices.Equal(ids, want) {
		t.Fatalf("ids = %v, %v; want %v", ids, err, want)
	}
	if err := p.Remove(ctx, id1); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := p.Get(ctx, id1); ok || err != nil {
		t.Fatalf("get after remove: %v, %v", ok, err)
	}
	if err := p.Remove(ctx, id3); err != nil {
		t.Fatalf("removing a preview that never was: %v", err)
	}
	if ids, _ := p.IDs(ctx); !slices.Equal(ids, []commit.Digest{id2}) {
		t.Fatalf("ids after remove = %v", ids)
	}
}

// TestPreviewCommitFenced: the preview store of a sequencer whose lease
// another took writes nothing: its commit is refused as fenced.
func TestPreviewCommitFenced(t *testing.T) {
	ctx := t.Context()
	s, url := apitest.PGStore(t)
	thief, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer thief.Close()
	if err := s.ReleaseLease(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := thief.AcquireLease(ctx, "thief", "", time.Hour); err != nil {
		t.Fatal(err)
	}
	p := dbPreviews{s}
	staged, err := p.Stage(ctx, []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	id := commit.Digest(sha256.Sum256([]byte("1")))
	if err := p.Commit(ctx, staged, id); !errors.Is(err, postgres.ErrFenced) {
		t.Fatalf("a deposed sequencer's commit: %v, want ErrFenced", err)
	}
	if ids, err := thief.PreviewIDs(ctx); err != nil || len(ids) != 0 {
		t.Fatalf("previews after the fenced commit: %v, %v", ids, err)
	}
}

// A kept preview's record: the line ledgerd writes, then the preview's
// bytes; a record without the line is an earlier ledgerd's, the preview
// alone; a malformed line is refused, never read as a preview.
func TestKeptPreview(t *testing.T) {
	doc := []byte(`{"recipients":["dana@example.org","[+450 items]"]}`)
	for _, c := range []struct {
		p    preview.Preview
		want string
	}{
		{preview.Preview{JSON: doc, Pass: 1}, "ledger-preview v1 truncated=0 pass=1\n"},
		{preview.Preview{JSON: doc, Truncated: true, Pass: 3}, "ledger-preview v1 truncated=1 pass=3\n"},
		{preview.Preview{JSON: doc, Truncated: true, Pass: preview.FallbackPass}, "ledger-preview v1 truncated=1 pass=5\n"},
	} {
		rec := EncodeKept(&c.p)
		if string(rec) != c.want+string(doc) {
			t.Errorf("record %q, want %q", rec, c.want+string(doc))
		}
		k, err := DecodeKept(rec)
		if err != nil || !bytes.Equal(k.JSON, doc) || !k.Recorded || k.Truncated != c.p.Truncated || k.Pass != c.p.Pass {
			t.Errorf("DecodeKept(%q) = %+v, %v", rec, k, err)
		}
	}
	if k, err := DecodeKept(doc); err != nil || !bytes.Equal(k.JSON, doc) || k.Recorded || k.Truncated {
		t.Errorf("an earlier ledgerd's record: %+v, %v", k, err)
	}
	for _, bad := range []string{
		"ledger-preview v1 truncated=1 pass=3",                // no newline
		"ledger-preview v1 truncated=2 pass=3\n{}",            // not 0 or 1
		"ledger-preview v1 truncated=1 pass=0\n{}",            // no pass 0
		"ledger-preview v1 truncated=1 pass=6\n{}",            // nor 6
		"ledger-preview v1 truncated=1 pass=03\n{}",           // leading zero
		"ledger-preview v1 truncated=1  pass=3\n{}",           // two spaces
		"ledger-preview v1 pass=3 truncated=1\n{}",            // order
		"ledger-preview v1 truncated=1 pass=3 redacted=2\n{}", // unknown member
		"ledger-preview v1 truncated=1 pass=3\r\n{}",          // CR
	} {
		if k, err := DecodeKept([]byte(bad)); !errors.Is(err, ErrKeptPreview) {
			t.Errorf("DecodeKept(%q) = %+v, %v; want ErrKeptPreview", bad, k, err)
		}
	}
}
