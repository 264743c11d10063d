package main

import (
	"encoding/json"
	"net/http"
	"strings"

	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"github.com/decisionledger/ledger/entry"
	"slices"
	"testing"
	"time"

	"github.com/decisionledger/ledger/approval/approver"
	"github.com/decisionledger/ledger/approval/preview"
	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/internal/pgtest"
	"github.com/decisionledger/ledger/storage/postgres"
)

// storedPreview is the preview srv's store keeps for approval id, and its
// digest; ok false when it keeps none or cannot tell.
func storedPreview(srv *server, id commit.Digest) (doc []byte, digest commit.Digest, ok bool) {
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

// pgTestStore opens a store on a new database of the shared test server,
// holding the lease.
func pgTestStore(t *testing.T) (*postgres.Store, string) {
	t.Helper()
	url := pgtest.Shared(t).NewDatabase(t)
	s, err := postgres.Open(t.Context(), url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.AcquireLease(t.Context(), "test", "", time.Hour); err != nil {
		t.Fatal(err)
	}
	return s, url
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
		s, _ := pgTestStore(t)
		testPreviewStore(t, pgPreviews{s})
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

// TestSessionStores runs the session store's contract on both kinds.
func TestSessionStores(t *testing.T) {
	t.Run("memory", func(t *testing.T) { testSessionStore(t, approver.NewMemoryStore()) })
	t.Run("postgres", func(t *testing.T) {
		s, _ := pgTestStore(t)
		testSessionStore(t, pgSessions{s})
	})
}

// testSessionStore: a session added is used under its key, marked used;
// it ends unused for the idle timeout and at its lifetime, at equality,
// and is then removed; Remove ends it; beyond max the oldest sign-ins go;
// RemoveApprover ends all of one approver's and no other's.
func testSessionStore(t *testing.T, s approver.SessionStore) {
	ctx := t.Context()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	idle, life := 30*time.Minute, 2*time.Hour
	key := sha256.Sum256([]byte("token"))
	se := approver.Session{Name: "alice", CSRF: "csrf", Credential: sha256.Sum256([]byte("hash")), SignIn: t0, UsedAt: t0}
	use := func(key [sha256.Size]byte, at time.Time) (approver.Session, bool) {
		t.Helper()
		got, ok, err := s.Use(ctx, key, at, idle, life)
		if err != nil {
			t.Fatal(err)
		}
		return got, ok
	}
	if _, ok := use(key, t0); ok {
		t.Fatal("a session before Add")
	}
	if err := s.Add(ctx, key, se, 10); err != nil {
		t.Fatal(err)
	}
	got, ok := use(key, t0.Add(idle-time.Microsecond))
	if !ok || got.Name != "alice" || got.CSRF != "csrf" || got.Credential != se.Credential || !got.SignIn.Equal(t0) {
		t.Fatalf("Use = %+v, %v", got, ok)
	}
	if _, ok := use(key, t0.Add(2*idle-2*time.Microsecond)); !ok {
		t.Fatal("the session ended although used within the idle timeout")
	}
	if _, ok := use(key, t0.Add(3*idle-2*time.Microsecond)); ok {
		t.Fatal("the session outlived the idle timeout (at equality)")
	}
	if n, err := s.Len(ctx); n != 0 || err != nil {
		t.Fatalf("Len after the idle end = %d, %v; want the session removed", n, err)
	}
	if err := s.Add(ctx, key, se, 10); err != nil {
		t.Fatal(err)
	}
	for at := t0; at.Before(t0.Add(life)); at = at.Add(idle / 2) {
		if _, ok := use(key, at); !ok {
			t.Fatalf("the session ended at %v, before its lifetime", at.Sub(t0))
		}
	}
	if _, ok := use(key, t0.Add(life)); ok {
		t.Fatal("the session outlived its lifetime (at equality)")
	}
	if err := s.Add(ctx, key, se, 10); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(ctx, key); err != nil {
		t.Fatal(err)
	}
	if _, ok := use(key, t0); ok {
		t.Fatal("a removed session is used")
	}
	if err := s.Remove(ctx, key); err != nil {
		t.Fatalf("removing a session that is gone: %v", err)
	}
	for i := range 4 {
		se := se
		se.SignIn, se.UsedAt = t0.Add(time.Duration(i)*time.Second), t0.Add(time.Duration(i)*time.Second)
		if err := s.Add(ctx, sha256.Sum256([]byte{byte(i)}), se, 3); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 4 {
		if _, ok := use(sha256.Sum256([]byte{byte(i)}), t0.Add(time.Minute)); ok != (i >= 1) {
			t.Errorf("session %d of 4 with max 3: ok %v; want only the oldest ended", i, ok)
		}
	}
	if n, err := s.Len(ctx); n != 3 || err != nil {
		t.Errorf("Len = %d, %v; want 3", n, err)
	}
	bob := se
	bob.Name = "bob"
	if err := s.Add(ctx, key, bob, 10); err != nil {
		t.Fatal(err)
	}
	if n, err := s.RemoveApprover(ctx, "alice"); n != 3 || err != nil {
		t.Errorf("RemoveApprover(alice) = %d, %v; want 3", n, err)
	}
	if got, ok := use(key, t0.Add(time.Minute)); !ok || got.Name != "bob" {
		t.Errorf("RemoveApprover(alice) ended bob's session")
	}
	if n, err := s.Len(ctx); n != 1 || err != nil {
		t.Errorf("Len after RemoveApprover = %d, %v; want 1", n, err)
	}
}

// TestPreviewCommitFenced: the preview store of a sequencer whose lease
// another took writes nothing: its commit is refused as fenced.
func TestPreviewCommitFenced(t *testing.T) {
	ctx := t.Context()
	s, url := pgTestStore(t)
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
	p := pgPreviews{s}
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
	store, _ := pgTestStore(t)
	s := startMedServerOn(t, nil, store)
	ctx := t.Context()
	q := payRequest(250000)
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
	if a := s.consume(t, s.token, consumed, q.consumeBody()); a.status != http.StatusCreated {
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
				store, _ := pgTestStore(t)
				s = startMedServerOn(t, nil, store)
			} else {
				s = startMedServer(t, nil)
			}
			working := s.srv.appr.previews
			s.srv.appr.previews = failingCommits{working}
			q := payRequest(4711)
			doc := `{"to":"alice@example.com","memo":"secret-ish 4711"}`
			a := s.do(t, s.token, "POST", "/v1/entries", q.appendBody("needs_approval", doc), "Idempotency-Key", "k1")
			if a.status != http.StatusServiceUnavailable || a.errorCode() != "unavailable" || !strings.Contains(a.errorMessage(), "the same Idempotency-Key") {
				t.Fatalf("answer with the preview store failing: %d %s", a.status, a.body)
			}
			if strings.Contains(string(a.body), "secret-ish") {
				t.Errorf("the refusal shows the preview: %s", a.body)
			}
			s.srv.appr.previews = working
			a = s.do(t, s.token, "POST", "/v1/entries", q.appendBody("needs_approval", doc), "Idempotency-Key", "k1")
			if a.status != http.StatusOK {
				t.Fatalf("the retry: %d %s", a.status, a.body)
			}
			id := checkOpened(t, a.body, medPendingTTL)
			var op opened
			json.Unmarshal(a.body, &op)
			want, _ := preview.Render([]byte(doc))
			if _, digest, ok := storedPreview(s.srv, id); !ok || digest != want.Digest || op.Approval.PreviewDigest != want.Digest.String() {
				t.Errorf("after the retry: stored %v (digest %s), announced %s; want %s", ok, digest, op.Approval.PreviewDigest, want.Digest)
			}
		})
	}
}

// TestSessionsOnPostgres: sessions kept in PostgreSQL hold through
// another Sessions (another instance, or the next term) on the same
// database; one whose approver is gone, or has another password hash,
// ends at its next use and its row is deleted; sign-out deletes the row.
func TestSessionsOnPostgres(t *testing.T) {
	ctx := t.Context()
	s, url := pgTestStore(t)
	find, err := approver.ByName(testApprovers())
	if err != nil {
		t.Fatal(err)
	}
	a, b := approver.NewSessions(approver.Options{Store: pgSessions{s}}), approver.NewSessions(approver.Options{Store: pgSessions{s}})
	now := time.Now()
	signIn := func(name string) string {
		t.Helper()
		tok, _, err := a.SignIn(ctx, find, name, testPassword, now)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	alice, bob := signIn("alice"), signIn("bob")
	if name, _, ok, err := b.Resume(ctx, find, alice, now.Add(time.Second)); !ok || err != nil || name != "alice" {
		t.Fatalf("alice's session through another Sessions: %q, %v, %v", name, ok, err)
	}
	without := func(name string) (*approver.Approver, bool) {
		if name == "alice" {
			return nil, false
		}
		return find(name)
	}
	if _, _, ok, err := b.Resume(ctx, without, alice, now.Add(time.Second)); ok || err != nil {
		t.Fatalf("the session of a removed approver: %v, %v", ok, err)
	}
	rehashed := func(name string) (*approver.Approver, bool) {
		ap, ok := find(name)
		if ok && name == "bob" {
			c := *ap
			c.PasswordHash = "$argon2id$v=19$m=65536,t=3,p=2$b3RoZXJzYWx0b3RoZXJzYWx0$qie54+IvXCT/C6ByRYKGNAZGg0sxeR/8LT3gdIvqGyU"
			return &c, true
		}
		return ap, ok
	}
	if _, _, ok, err := b.Resume(ctx, rehashed, bob, now.Add(time.Second)); ok || err != nil {
		t.Fatalf("the session of an approver with another password: %v, %v", ok, err)
	}
	if n, err := s.CountSessions(ctx); n != 0 || err != nil {
		t.Fatalf("%d session rows left (%v), want both deleted", n, err)
	}
	again := signIn("alice")
	if err := b.End(ctx, again); err != nil {
		t.Fatal(err)
	}
	if _, _, ok, _ := a.Resume(ctx, find, again, now.Add(time.Second)); ok {
		t.Fatal("a session ended through one Sessions holds through another")
	}

	// The database unreachable: a right password is ErrSessionStore,
	// which the page answers 503 unavailable, not 401 credentials.
	closed, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	down := approver.NewSessions(approver.Options{Store: pgSessions{closed}})
	if _, _, err := down.SignIn(ctx, find, "alice", testPassword, now); !errors.Is(err, approver.ErrSessionStore) {
		t.Fatalf("a sign-in with the database closed: %v, want ErrSessionStore", err)
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
