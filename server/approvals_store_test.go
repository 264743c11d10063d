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
	"github.com/decisionledger/ledger/server/approvals"

	"github.com/decisionledger/ledger/approval/preview"
	"github.com/decisionledger/ledger/commit"
)

// storedPreview is the preview srv's store keeps for approval id, and its
// digest; ok false when it keeps none or cannot tell.
func storedPreview(srv *Server, id commit.Digest) (doc []byte, digest commit.Digest, ok bool) {
	rec, ok, err := srv.appr.Previews.Get(context.Background(), id)
	if err != nil || !ok {
		return nil, commit.Digest{}, false
	}
	kept, err := approvals.DecodeKept(rec)
	if err != nil {
		return nil, commit.Digest{}, false
	}
	return kept.JSON, preview.Digest(kept.JSON), true
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
		if _, err := s.srv.appr.Sweep(ctx, s.l, at); err != nil {
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
type failingCommits struct{ approvals.PreviewStore }

func (f failingCommits) Commit(ctx context.Context, staged *approvals.Staged, id commit.Digest) error {
	f.PreviewStore.Abandon(staged)
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
			working := s.srv.appr.Previews
			s.srv.appr.Previews = failingCommits{working}
			q := apitest.PayRequest(4711)
			doc := `{"to":"alice@example.com","memo":"secret-ish 4711"}`
			a := s.do(t, s.token, "POST", "/v1/entries", q.AppendBody("needs_approval", doc), "Idempotency-Key", "k1")
			if a.status != http.StatusServiceUnavailable || a.errorCode() != "unavailable" || !strings.Contains(a.errorMessage(), "the same Idempotency-Key") {
				t.Fatalf("answer with the preview store failing: %d %s", a.status, a.body)
			}
			if strings.Contains(string(a.body), "secret-ish") {
				t.Errorf("the refusal shows the preview: %s", a.body)
			}
			s.srv.appr.Previews = working
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
