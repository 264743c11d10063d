package daemon

import (
	"crypto/sha256"
	"errors"
	"testing"
	"time"

	"github.com/decisionledger/ledger/approval/approver"
	"github.com/decisionledger/ledger/internal/apitest"
	"github.com/decisionledger/ledger/storage/postgres"
)

// TestSessionStores runs the session store's contract on both kinds.
func TestSessionStores(t *testing.T) {
	t.Run("memory", func(t *testing.T) { testSessionStore(t, approver.NewMemoryStore()) })
	t.Run("postgres", func(t *testing.T) {
		s, _ := apitest.PGStore(t)
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

// TestSessionsOnPostgres: sessions kept in PostgreSQL hold through
// another Sessions (another instance, or the next term) on the same
// database; one whose approver is gone, or has another password hash,
// ends at its next use and its row is deleted; sign-out deletes the row.
func TestSessionsOnPostgres(t *testing.T) {
	ctx := t.Context()
	s, url := apitest.PGStore(t)
	find, err := approver.ByName(apitest.TestApprovers())
	if err != nil {
		t.Fatal(err)
	}
	a, b := approver.NewSessions(approver.Options{Store: pgSessions{s}}), approver.NewSessions(approver.Options{Store: pgSessions{s}})
	now := time.Now()
	signIn := func(name string) string {
		t.Helper()
		tok, _, err := a.SignIn(ctx, find, name, apitest.TestPassword, now)
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
	if _, _, err := down.SignIn(ctx, find, "alice", apitest.TestPassword, now); !errors.Is(err, approver.ErrSessionStore) {
		t.Fatalf("a sign-in with the database closed: %v, want ErrSessionStore", err)
	}
}
