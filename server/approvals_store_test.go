package server

import (
	"encoding/json"
	"net/http"
	"strings"

	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/internal/apitest"

	"github.com/decisionledger/ledger/approval/preview"
	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/storage/postgres"
)

// storedPreview is the preview srv's store keeps for approval id, and its
// digest; ok false when it keeps none or cannot tell.
func storedPreview(srv *Server, id commit.Digest) (doc []byte, digest commit.Digest, ok bool) {
	rec, ok, err := srv.appr.previews.get(context.Background(), id)
	if err != nil || !ok {
		return nil, commit.Digest{}, false
	}
	kept, err := decodeKept(rec)
	if err != nil {
		return nil, commit.Digest{}, false
	}
	return kept.JSON, preview.Digest(kept.JSON), true
}

// TestPreviewStores runs the preview store's contract on both kinds.
func TestPreviewStores(t *testing.T) {
	t.Run("disk", func(t *testing.T) {
		p, err := openDiskPreviews(t.TempDir())
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
func testPreviewStore(t *testing.T, p previewStore) {
	ctx := t.Context()
	id1, id2, id3 := commit.Digest(sha256.Sum256([]byte("1"))), commit.Digest(sha256.Sum256([]byte("2"))), commit.Digest(sha256.Sum256([]byte("3")))
	doc1, doc2 := []byte(`{"amount":"12.00 EUR","payee":"billing@example.com"}`), []byte(`{"subject":"Q3"}`)
	stage := func(doc []byte) *stagedPreview {
		t.Helper()
		st, err := p.stage(ctx, doc)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	if _, ok, err := p.get(ctx, id1); ok || err != nil {
		t.Fatalf("get before any commit: %v, %v", ok, err)
	}
	staged := stage(doc1)
	if ids, err := p.ids(ctx); err != nil || len(ids) != 0 {
		t.Fatalf("ids with a preview staged only: %v, %v", ids, err)
	}
	if err := p.commit(ctx, staged, id1); err != nil {
		t.Fatal(err)
	}
	if doc, ok, err := p.get(ctx, id1); !ok || err != nil || !bytes.Equal(doc, doc1) {
		t.Fatalf("get = %q, %v, %v; want the committed preview", doc, ok, err)
	}
	if err := p.commit(ctx, stage(doc2), id1); err != nil {
		t.Fatalf("a second commit for the approval: %v", err)
	}
	if doc, _, _ := p.get(ctx, id1); !bytes.Equal(doc, doc1) {
		t.Fatalf("after a second commit the preview is %q, want the first kept", doc)
	}
	p.abandon(stage(doc2))
	if err := p.commit(ctx, stage(doc2), id2); err != nil {
		t.Fatal(err)
	}
	ids, err := p.ids(ctx)
	slices.SortFunc(ids, func(a, b commit.Digest) int { return bytes.Compare(a[:], b[:]) })
	want := []commit.Digest{id1, id2}
	slices.SortFunc(want, func(a, b commit.Digest) int { return bytes.Compare(a[:], b[:]) })
	if err != nil || !slices.Equal(ids, want) {
		t.Fatalf("ids = %v, %v; want %v", ids, err, want)
	}
	if err := p.remove(ctx, id1); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := p.get(ctx, id1); ok || err != nil {
		t.Fatalf("get after remove: %v, %v", ok, err)
	}
	if err := p.remove(ctx, id3); err != nil {
		t.Fatalf("removing a preview that never was: %v", err)
	}
	if ids, _ := p.ids(ctx); !slices.Equal(ids, []commit.Digest{id2}) {
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
	staged, err := p.stage(ctx, []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	id := commit.Digest(sha256.Sum256([]byte("1")))
	if err := p.commit(ctx, staged, id); !errors.Is(err, postgres.ErrFenced) {
		t.Fatalf("a deposed sequencer's commit: %v, want ErrFenced", err)
	}
	if ids, err := thief.PreviewIDs(ctx); err != nil || len(ids) != 0 {
		t.Fatalf("previews after the fenced commit: %v, %v", ids, err)
	}
}

// TestPreviewSweepPostgres: on PostgreSQL, as on disk (TestPreviewSweep),
// a consumption deletes its approval's preview row at once, and the
// sweep deletes those of denied and expired approvals and of ids the
// ledger does not know, keeping those awaiting a verdict or a
// consumption.
func TestPreviewSweepPostgres(t *testing.T) {
	store, _ := apitest.PGStore(t)
	s := startMedServerOn(t, nil, store)
	ctx := t.Context()
	q := apitest.PayRequest(250000)
	doc := `{"to":"alice@example.com"}`
	s.clock.set(medT0.Add(time.Second))
	pending, approved, denied, consumed := s.open(t, q, doc), s.open(t, q, doc), s.open(t, q, doc), s.open(t, q, doc)
	rows := func() []commit.Digest {
		t.Helper()
		ids, err := store.PreviewIDs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]commit.Digest, len(ids))
		for i, id := range ids {
			out[i] = id
		}
		return out
	}
	if n := len(rows()); n != 4 {
		t.Fatalf("%d preview rows for 4 approvals opened with previews", n)
	}
	verdictAt := medT0.Add(time.Minute)
	s.clock.set(verdictAt)
	s.verdict(t, approved, entry.Approve)
	s.verdict(t, consumed, entry.Approve)
	// Appended directly, not through the page (whose deny deletes the
	// row at once, TestClusterApprovalFailover): the sweep deletes it.
	s.verdict(t, denied, entry.Reject)
	if a := s.consume(t, s.token, consumed, q.ConsumeBody()); a.status != http.StatusCreated {
		t.Fatalf("consume: %d %s", a.status, a.body)
	}
	want := func(what string, keep ...commit.Digest) {
		t.Helper()
		got := rows()
		slices.SortFunc(got, func(a, b commit.Digest) int { return bytes.Compare(a[:], b[:]) })
		slices.SortFunc(keep, func(a, b commit.Digest) int { return bytes.Compare(a[:], b[:]) })
		if !slices.Equal(got, keep) {
			t.Errorf("%s: preview rows %v, want %v", what, got, keep)
		}
	}
	want("after the consumption", pending, approved, denied)
	ghost := commit.Digest(sha256.Sum256([]byte("ghost")))
	if _, err := store.PutPreview(ctx, ghost, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	sweep := func(at time.Time) {
		t.Helper()
		if _, err := s.srv.sweepPreviews(ctx, at); err != nil {
			t.Fatal(err)
		}
	}
	sweep(verdictAt)
	want("after a sweep", pending, approved)
	sweep(verdictAt.Add(medExecutionTTL))
	want("at the execution deadline", pending)
	sweep(medT0.Add(time.Second + medPendingTTL))
	want("at the pending deadline")
}

// failingCommits is a preview store whose commits fail.
type failingCommits struct{ previewStore }

func (f failingCommits) commit(ctx context.Context, staged *stagedPreview, id commit.Digest) error {
	f.previewStore.abandon(staged)
	return errors.New("the preview store is unreachable")
}

// TestPreviewCommitFails: when the preview cannot be kept after the
// append, the needs_approval answer is not given (503, naming the index
// and the approval, never the preview); a retry with the same
// Idempotency-Key, the store working again, keeps the preview and
// announces its digest.
func TestPreviewCommitFails(t *testing.T) {
	for _, kind := range []string{"disk", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			var s *medServer
			if kind == "postgres" {
				store, _ := apitest.PGStore(t)
				s = startMedServerOn(t, nil, store)
			} else {
				s = startMedServer(t, nil)
			}
			working := s.srv.appr.previews
			s.srv.appr.previews = failingCommits{working}
			q := apitest.PayRequest(4711)
			doc := `{"to":"alice@example.com","memo":"secret-ish 4711"}`
			a := s.do(t, s.token, "POST", "/v1/entries", q.AppendBody("needs_approval", doc), "Idempotency-Key", "k1")
			if a.status != http.StatusServiceUnavailable || a.errorCode() != "unavailable" || !strings.Contains(a.errorMessage(), "the same Idempotency-Key") {
				t.Fatalf("answer with the preview store failing: %d %s", a.status, a.body)
			}
			if strings.Contains(string(a.body), "secret-ish") {
				t.Errorf("the refusal shows the preview: %s", a.body)
			}
			s.srv.appr.previews = working
			a = s.do(t, s.token, "POST", "/v1/entries", q.AppendBody("needs_approval", doc), "Idempotency-Key", "k1")
			if a.status != http.StatusOK {
				t.Fatalf("the retry: %d %s", a.status, a.body)
			}
			id := checkOpened(t, a.body, medPendingTTL)
			var op apitest.Opened
			json.Unmarshal(a.body, &op)
			want, _ := preview.Render([]byte(doc))
			if _, digest, ok := storedPreview(s.srv, id); !ok || digest != want.Digest || op.Approval.PreviewDigest != want.Digest.String() {
				t.Errorf("after the retry: stored %v (digest %s), announced %s; want %s", ok, digest, op.Approval.PreviewDigest, want.Digest)
			}
		})
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
		rec := encodeKept(&c.p)
		if string(rec) != c.want+string(doc) {
			t.Errorf("record %q, want %q", rec, c.want+string(doc))
		}
		k, err := decodeKept(rec)
		if err != nil || !bytes.Equal(k.JSON, doc) || !k.Recorded || k.Truncated != c.p.Truncated || k.Pass != c.p.Pass {
			t.Errorf("decodeKept(%q) = %+v, %v", rec, k, err)
		}
	}
	if k, err := decodeKept(doc); err != nil || !bytes.Equal(k.JSON, doc) || k.Recorded || k.Truncated {
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
		if k, err := decodeKept([]byte(bad)); !errors.Is(err, errKeptPreview) {
			t.Errorf("decodeKept(%q) = %+v, %v; want errKeptPreview", bad, k, err)
		}
	}
}
