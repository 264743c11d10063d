package postgres_test

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"testing"
	"time"

	"github.com/decisionledger/ledger/internal/pgtest"
	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/storage/postgres"
)

// TestPreviews: a preview is stored under its approval's id, the first
// stays on a second put, ids lists it, and a deletion removes the row.
func TestPreviews(t *testing.T) {
	ctx := t.Context()
	url := pgtest.Shared(t).NewDatabase(t)
	s := open(t, url)
	acquire(t, s, "a")
	id := sha256.Sum256([]byte("approval 1"))
	if _, err := s.Preview(ctx, id); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("Preview before any put: %v, want ErrNotFound", err)
	}
	if stored, err := s.PutPreview(ctx, id, []byte(`{"first":1}`)); err != nil || !stored {
		t.Fatalf("PutPreview = %v, %v; want stored", stored, err)
	}
	if stored, err := s.PutPreview(ctx, id, []byte(`{"second":2}`)); err != nil || stored {
		t.Fatalf("the second PutPreview = %v, %v; want the first kept", stored, err)
	}
	// Another store (another instance) reads it.
	other := open(t, url)
	if doc, err := other.Preview(ctx, id); err != nil || string(doc) != `{"first":1}` {
		t.Fatalf("Preview from another store = %q, %v", doc, err)
	}
	if ids, err := other.PreviewIDs(ctx); err != nil || len(ids) != 1 || ids[0] != id {
		t.Fatalf("PreviewIDs = %x, %v", ids, err)
	}
	if err := s.DeletePreview(ctx, id); err != nil {
		t.Fatal(err)
	}
	if n := query[int64](t, url, "SELECT count(*) FROM approval_previews"); n != 0 {
		t.Fatalf("%d preview rows after the deletion", n)
	}
	if err := s.DeletePreview(ctx, id); err != nil {
		t.Fatalf("deleting a preview that is gone: %v", err)
	}
}

// TestPreviewsFenced: once another store took the lease, a deposed
// store's preview writes and deletions are refused with ErrFenced and
// change nothing; the holder's succeed.
func TestPreviewsFenced(t *testing.T) {
	ctx := t.Context()
	url := pgtest.Shared(t).NewDatabase(t)
	a, b := open(t, url), open(t, url)
	acquire(t, a, "a")
	kept, other := sha256.Sum256([]byte("kept")), sha256.Sum256([]byte("other"))
	if _, err := a.PutPreview(ctx, kept, []byte(`{"a":1}`)); err != nil {
		t.Fatal(err)
	}
	expireLease(t, url)
	acquire(t, b, "b")
	_, err := a.PutPreview(ctx, other, []byte(`{"a":2}`))
	wantFenced(t, "PutPreview of a deposed store", err)
	wantFenced(t, "DeletePreview of a deposed store", a.DeletePreview(ctx, kept))
	if n := query[int64](t, url, "SELECT count(*) FROM approval_previews"); n != 1 {
		t.Errorf("%d preview rows after the fenced writes, want 1", n)
	}
	if doc, err := b.Preview(ctx, kept); err != nil || string(doc) != `{"a":1}` {
		t.Errorf("the kept preview = %q, %v", doc, err)
	}
	if _, err := b.PutPreview(ctx, other, []byte(`{"b":1}`)); err != nil {
		t.Errorf("the holder's PutPreview: %v", err)
	}
	if err := b.DeletePreview(ctx, kept); err != nil {
		t.Errorf("the holder's DeletePreview: %v", err)
	}
}

// TestPreviewWriteDuringTakeover: a preview write that reads the epoch
// while a takeover holds tree_head's lock waits for it, then is refused.
func TestPreviewWriteDuringTakeover(t *testing.T) {
	ctx := t.Context()
	url := pgtest.Shared(t).NewDatabase(t)
	a, b := open(t, url), open(t, url)
	acquire(t, a, "a")
	expireLease(t, url)
	entered, release := hold(t, b, "acquire")
	acquired := result(func() error { _, err := b.AcquireLease(ctx, "b", "http://b.example.org", hour); return err })
	<-entered
	put := result(func() error { _, err := a.PutPreview(ctx, sha256.Sum256([]byte("x")), []byte(`{}`)); return err })
	waitForLockWait(t, url, "%tree_head FOR KEY SHARE%")
	notYet(t, "PutPreview while a takeover holds tree_head", put)
	release()
	if err := <-acquired; err != nil {
		t.Fatal(err)
	}
	wantFenced(t, "PutPreview ordered after the takeover", <-put)
}

// TestSessions: a session put by one store is used through another,
// marked used, ends at the idle timeout and at the lifetime (at
// equality), is deleted then, and the oldest beyond max go.
func TestSessions(t *testing.T) {
	ctx := t.Context()
	url := pgtest.Shared(t).NewDatabase(t)
	a, b := open(t, url), open(t, url)
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	idle, life := 30*time.Minute, 12*time.Hour
	key := sha256.Sum256([]byte("token 1"))
	se := postgres.Session{Approver: "alice", CSRF: "csrf-1", Credential: sha256.Sum256([]byte("hash")), SignIn: t0, UsedAt: t0}
	if err := a.PutSession(ctx, key, se, 10); err != nil {
		t.Fatal(err)
	}
	got, ok, err := b.UseSession(ctx, key, t0.Add(idle-time.Microsecond), idle, life)
	if err != nil || !ok || got.Approver != "alice" || got.CSRF != "csrf-1" || got.Credential != se.Credential ||
		!got.SignIn.Equal(t0) || !got.UsedAt.Equal(t0.Add(idle-time.Microsecond)) {
		t.Fatalf("UseSession = %+v, %v, %v", got, ok, err)
	}
	// Used at t0+idle-1µs: alive until t0+2·idle-1µs, exclusive.
	if _, ok, _ := a.UseSession(ctx, key, t0.Add(2*idle-time.Microsecond), idle, life); ok {
		t.Fatal("the session outlived its idle timeout (at equality)")
	}
	if n, _ := a.CountSessions(ctx); n != 0 {
		t.Fatalf("%d sessions after the idle end, want it deleted", n)
	}
	// The lifetime, however much it is used.
	if err := a.PutSession(ctx, key, se, 10); err != nil {
		t.Fatal(err)
	}
	for at := t0; at.Before(t0.Add(life)); at = at.Add(idle / 2) {
		if _, ok, err := a.UseSession(ctx, key, at, idle, life); !ok || err != nil {
			t.Fatalf("the session ended at %v: %v", at.Sub(t0), err)
		}
	}
	if _, ok, _ := a.UseSession(ctx, key, t0.Add(life), idle, life); ok {
		t.Fatal("the session outlived its lifetime (at equality)")
	}
	// max: the oldest sign-ins go.
	for i := range 4 {
		k := sha256.Sum256([]byte{byte(i)})
		se := se
		se.SignIn, se.UsedAt = t0.Add(time.Duration(i)*time.Second), t0.Add(time.Duration(i)*time.Second)
		if err := a.PutSession(ctx, k, se, 3); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 4 {
		_, ok, err := b.UseSession(ctx, sha256.Sum256([]byte{byte(i)}), t0.Add(time.Minute), idle, life)
		if err != nil || ok != (i >= 1) {
			t.Errorf("session %d of 4 with max 3: ok %v, %v", i, ok, err)
		}
	}
	if err := b.DeleteSession(ctx, sha256.Sum256([]byte{3})); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := a.UseSession(ctx, sha256.Sum256([]byte{3}), t0.Add(time.Minute), idle, life); ok {
		t.Error("a deleted session is used")
	}
	if n, err := a.DeleteEndedSessions(ctx, t0.Add(time.Minute+idle), idle, life); err != nil || n != 2 {
		t.Errorf("DeleteEndedSessions = %d, %v; want the 2 left", n, err)
	}
	// Only the token's hash is stored.
	if n := query[int64](t, url, "SELECT count(*) FROM approver_sessions"); n != 0 {
		t.Errorf("%d sessions left", n)
	}
	if err := a.PutSession(ctx, key, se, 10); err != nil {
		t.Fatal(err)
	}
	raw := query[[]byte](t, url, "SELECT token_sha256 FROM approver_sessions")
	if !bytes.Equal(raw, key[:]) {
		t.Errorf("the stored key is %x, want the token's SHA-256", raw)
	}
}
