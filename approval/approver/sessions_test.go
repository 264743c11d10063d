package approver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

const alicePassword = "correct horse battery staple"

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// directory returns approvers alice and bob, hashed with testParams.
func directory(t testing.TB) func(string) (*Approver, bool) {
	t.Helper()
	var as []Approver
	for _, name := range []string{"alice", "bob"} {
		h, err := HashPassword(name + " password 123")
		if err != nil {
			t.Fatal(err)
		}
		as = append(as, Approver{Name: name, PasswordHash: h, Actions: []string{"*"}})
	}
	h, err := HashPassword(alicePassword)
	if err != nil {
		t.Fatal(err)
	}
	as[0].PasswordHash = h
	find, err := ByName(as)
	if err != nil {
		t.Fatal(err)
	}
	return find
}

func TestLogin(t *testing.T) {
	find := directory(t)
	s := NewSessions(Options{})
	tok, csrf, err := s.Login(find, "alice", alicePassword, t0)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range []string{tok, csrf} {
		b, err := base64.RawURLEncoding.Strict().DecodeString(x)
		if err != nil || len(b) != 32 || len(x) != 43 {
			t.Fatalf("token %q is not 32 bytes in unpadded base64url", x)
		}
	}
	if tok == csrf {
		t.Fatal("session and CSRF tokens are equal")
	}
	name, gotCSRF, ok := s.Lookup(tok, t0.Add(time.Minute))
	if !ok || name != "alice" || gotCSRF != csrf {
		t.Fatalf("Lookup = %q, %q, %v; want alice, the CSRF token, true", name, gotCSRF, ok)
	}
	tok2, csrf2, err := s.Login(find, "alice", alicePassword, t0)
	if err != nil || tok2 == tok || csrf2 == csrf {
		t.Fatalf("a second sign-in: %v, or the same tokens", err)
	}
	for _, bad := range []string{"", tok[:42], tok + "A", strings.ToUpper(tok), csrf} {
		if _, _, ok := s.Lookup(bad, t0); ok {
			t.Fatalf("Lookup(%q) found a session", bad)
		}
	}
	s.Logout(tok)
	if _, _, ok := s.Lookup(tok, t0.Add(2*time.Minute)); ok {
		t.Fatal("a session outlived its Logout")
	}
	if _, _, ok := s.Lookup(tok2, t0.Add(2*time.Minute)); !ok {
		t.Fatal("Logout ended another session")
	}
}

// TestLoginUniform checks that an unknown name and a wrong password give
// the same error after the same computation.
func TestLoginUniform(t *testing.T) {
	find := directory(t)
	k := countKeys(t)
	s := NewSessions(Options{})
	var errs []error
	for _, c := range []struct{ name, pw string }{
		{"alice", "wrong password 123"},
		{"mallory", "wrong password 123"},
		{"mallory", alicePassword},
		{strings.Repeat("m", 200), alicePassword}, // never a name
		{"", alicePassword},
	} {
		k.reset()
		tok, csrf, err := s.Login(find, c.name, c.pw, t0)
		if err != ErrCredentials || tok != "" || csrf != "" {
			t.Fatalf("Login(%.20q, %q) = %q, %q, %v; want ErrCredentials", c.name, c.pw, tok, csrf, err)
		}
		if k.n() != 1 || k.calls[0] != hashParams {
			t.Fatalf("Login(%.20q, %q): argon2 computations %v, want one with %v", c.name, c.pw, k.calls, hashParams)
		}
		errs = append(errs, err)
	}
	// Out of bounds: no computation, for a name or not.
	for _, name := range []string{"alice", "mallory"} {
		for _, pw := range []string{"short", strings.Repeat("p", 1025), "twelve chars\xff"} {
			k.reset()
			if _, _, err := s.Login(find, name, pw, t0); err != ErrCredentials || k.n() != 0 {
				t.Fatalf("Login(%q, %.20q) = %v after %d computations; want ErrCredentials, none", name, pw, err, k.n())
			}
		}
	}
	for _, err := range errs {
		if strings.Contains(err.Error(), "alice") || strings.Contains(err.Error(), "wrong password 123") {
			t.Fatalf("error %q repeats the name or password", err)
		}
	}
	// A nil find knows no one, and still computes.
	k.reset()
	if _, _, err := s.Login(nil, "bob", "bob password 123", t0); err != ErrCredentials || k.n() != 1 {
		t.Fatalf("Login with no directory = %v after %d computations", err, k.n())
	}
}

func throttled(t *testing.T, err error, global bool, until time.Time) {
	t.Helper()
	var te *ThrottledError
	if !errors.As(err, &te) || !errors.Is(err, ErrThrottled) || te.Global != global || !te.Until.Equal(until) {
		t.Fatalf("error %v, want a ThrottledError{Global: %v, Until: %v}", err, global, until)
	}
}

func TestThrottle(t *testing.T) {
	find := directory(t)
	k := countKeys(t)
	for _, name := range []string{"alice", "mallory"} {
		t.Run(name, func(t *testing.T) {
			s := NewSessions(Options{})
			now := t0
			for i := range MaxFailures {
				if _, _, err := s.Login(find, name, "wrong password 123", now); err != ErrCredentials {
					t.Fatalf("failure %d: %v", i+1, err)
				}
				now = now.Add(time.Minute)
			}
			last := now.Add(-time.Minute)
			k.reset()
			// Locked: even the right password is refused, unchecked.
			_, _, err := s.Login(find, name, alicePassword, now)
			throttled(t, err, false, last.Add(Lockout))
			_, _, err = s.Login(find, name, alicePassword, last.Add(Lockout-time.Nanosecond))
			throttled(t, err, false, last.Add(Lockout))
			if k.n() != 0 {
				t.Fatalf("%d computations while locked", k.n())
			}
			// Other names are not locked.
			if _, _, err := s.Login(find, "bob", "bob password 123", now); err != nil {
				t.Fatalf("bob, while %s is locked: %v", name, err)
			}
			// The lockout ends at its instant.
			_, _, err = s.Login(find, name, alicePassword, last.Add(Lockout))
			if name == "alice" && err != nil || name != "alice" && err != ErrCredentials {
				t.Fatalf("after the lockout: %v", err)
			}
		})
	}
}

func TestThrottleWindow(t *testing.T) {
	find := directory(t)
	s := NewSessions(Options{})
	now := t0
	fail := func() {
		t.Helper()
		if _, _, err := s.Login(find, "alice", "wrong password 123", now); err != ErrCredentials {
			t.Fatalf("at %v: %v", now.Sub(t0), err)
		}
	}
	// Four failures, then the first leaves the window: a fifth and a
	// sixth within it are still allowed.
	for range 4 {
		fail()
		now = now.Add(time.Minute)
	}
	now = t0.Add(FailureWindow)
	fail()
	if _, _, err := s.Login(find, "alice", alicePassword, now); err != nil {
		t.Fatalf("four failures within the window: %v", err)
	}
	// The success forgot them: four more are allowed.
	for range 4 {
		fail()
	}
	if _, _, err := s.Login(find, "alice", alicePassword, now); err != nil {
		t.Fatalf("four failures after a success: %v", err)
	}
	if len(s.names) != 0 {
		t.Fatalf("%d throttle records after a success", len(s.names))
	}
}

func TestGlobalThrottle(t *testing.T) {
	find := directory(t)
	s := NewSessions(Options{})
	for i := range MaxGlobalFailures {
		if _, _, err := s.Login(find, fmt.Sprintf("user%d", i), "wrong password 123", t0); err != ErrCredentials {
			t.Fatalf("failure %d: %v", i+1, err)
		}
	}
	_, _, err := s.Login(find, "bob", "bob password 123", t0.Add(time.Minute))
	throttled(t, err, true, t0.Add(Lockout))
	if _, _, err := s.Login(find, "bob", "bob password 123", t0.Add(Lockout)); err != nil {
		t.Fatalf("after the global lockout: %v", err)
	}
	// The records of the names tried stay bounded.
	for i := range 4 * MaxGlobalFailures {
		s.Login(find, fmt.Sprintf("other%d", i), "wrong password 123", t0.Add(time.Duration(i)*FailureWindow))
	}
	if len(s.names) > 4*MaxGlobalFailures+1 {
		t.Fatalf("%d throttle records", len(s.names))
	}
}

// TestThrottleConcurrent: of 20 simultaneous wrong sign-ins of one name,
// exactly 5 are checked.
func TestThrottleConcurrent(t *testing.T) {
	find := directory(t)
	s := NewSessions(Options{})
	release := holdKeys(t, nil)
	errs := make(chan error, 20)
	for range 20 {
		go func() {
			_, _, err := s.Login(find, "alice", "wrong password 123", t0)
			errs <- err
		}()
	}
	for range 20 - MaxFailures {
		throttled(t, recv(t, errs), false, t0.Add(time.Second))
	}
	release()
	for range MaxFailures {
		if err := recv(t, errs); err != ErrCredentials {
			t.Fatalf("a checked try: %v", err)
		}
	}
	_, _, err := s.Login(find, "alice", alicePassword, t0)
	throttled(t, err, false, t0.Add(Lockout))
}

func TestSessionExpiry(t *testing.T) {
	find := directory(t)
	s := NewSessions(Options{})
	tok, _, err := s.Login(find, "alice", alicePassword, t0)
	if err != nil {
		t.Fatal(err)
	}
	// Idle: each use renews it; 30 minutes unused ends it, at equality.
	now := t0.Add(DefaultIdleTimeout - time.Nanosecond)
	if _, _, ok := s.Lookup(tok, now); !ok {
		t.Fatal("ended before the idle timeout")
	}
	if _, _, ok := s.Lookup(tok, now.Add(DefaultIdleTimeout)); ok {
		t.Fatal("outlived the idle timeout")
	}
	if s.Len() != 0 {
		t.Fatal("an ended session was kept")
	}
	if _, _, ok := s.Lookup(tok, now.Add(time.Minute)); ok {
		t.Fatal("an ended session came back")
	}

	// Lifetime: used every 20 minutes, it still ends 12 h after sign-in.
	tok, _, err = s.Login(find, "alice", alicePassword, t0)
	if err != nil {
		t.Fatal(err)
	}
	for now = t0; now.Before(t0.Add(DefaultLifetime)); now = now.Add(20 * time.Minute) {
		if _, _, ok := s.Lookup(tok, now); !ok {
			t.Fatalf("ended %v after sign-in, before its lifetime", now.Sub(t0))
		}
	}
	if _, _, ok := s.Lookup(tok, t0.Add(DefaultLifetime)); ok {
		t.Fatal("outlived its lifetime")
	}

	// Options change both.
	s = NewSessions(Options{IdleTimeout: time.Minute, Lifetime: 3 * time.Minute})
	tok, _, _ = s.Login(find, "alice", alicePassword, t0)
	if _, _, ok := s.Lookup(tok, t0.Add(time.Minute)); ok {
		t.Fatal("outlived a 1-minute idle timeout")
	}
	tok, _, _ = s.Login(find, "alice", alicePassword, t0)
	for _, m := range []time.Duration{50, 100, 150} {
		if _, _, ok := s.Lookup(tok, t0.Add(m*time.Second)); !ok {
			t.Fatalf("ended at %ds", m)
		}
	}
	if _, _, ok := s.Lookup(tok, t0.Add(3*time.Minute)); ok {
		t.Fatal("outlived a 3-minute lifetime")
	}
	// A clock that steps back does not make a session younger.
	tok, _, _ = s.Login(find, "alice", alicePassword, t0)
	s.Lookup(tok, t0.Add(50*time.Second))
	s.Lookup(tok, t0)
	if _, _, ok := s.Lookup(tok, t0.Add(110*time.Second)); ok {
		t.Fatal("a lookup back in time renewed the session")
	}
}

func TestEviction(t *testing.T) {
	find := directory(t)
	s := NewSessions(Options{MaxSessions: 3})
	var toks []string
	for i := range 5 {
		tok, _, err := s.Login(find, "alice", alicePassword, t0.Add(time.Duration(i)*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		toks = append(toks, tok)
	}
	if s.Len() != 3 {
		t.Fatalf("%d sessions, want 3", s.Len())
	}
	for i, tok := range toks {
		if _, _, ok := s.Lookup(tok, t0.Add(time.Minute)); ok != (i >= 2) {
			t.Fatalf("session %d: found %v", i, ok)
		}
	}
}

// TestTokensStoredHashed inspects the store: the session token is found
// nowhere in it, only its SHA-256.
func TestTokensStoredHashed(t *testing.T) {
	find := directory(t)
	s := NewSessions(Options{})
	tok, csrf, err := s.Login(find, "alice", alicePassword, t0)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := base64.RawURLEncoding.DecodeString(tok)
	m := s.store.(*memoryStore)
	if len(m.sessions) != 1 {
		t.Fatalf("%d sessions", len(m.sessions))
	}
	for key, e := range m.sessions {
		if key != sha256.Sum256([]byte(tok)) {
			t.Fatal("the key is not the token's SHA-256")
		}
		se := e.Value.(*memorySession)
		dump := fmt.Sprintf("%#v %#v", key, *se)
		if bytes.Contains(key[:], raw) || strings.Contains(dump, tok) || se.CSRF != csrf || se.Name != "alice" {
			t.Fatalf("the store holds the token: %s", dump)
		}
	}
	// The stored key is no token.
	for key := range m.sessions {
		if _, _, ok := s.Lookup(base64.RawURLEncoding.EncodeToString(key[:32]), t0); ok {
			t.Fatal("the stored key opens the session")
		}
	}
}

// TestConcurrentSessions runs sign-ins, lookups and sign-outs at once
// (go test -race).
func TestConcurrentSessions(t *testing.T) {
	find := directory(t)
	s := NewSessions(Options{MaxSessions: 8})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 20 {
				now := t0.Add(time.Duration(i) * time.Second)
				name, pw := "alice", alicePassword
				if (g+i)%3 == 0 {
					name, pw = "bob", "wrong password 123" // locks bob out
				}
				tok, csrf, err := s.Login(find, name, pw, now)
				if err != nil {
					continue
				}
				if _, c, ok := s.Lookup(tok, now); ok && c != csrf {
					t.Errorf("Lookup gave another session's CSRF token")
				}
				if i%2 == 0 {
					s.Logout(tok)
				}
			}
		})
	}
	wg.Wait()
	if s.Len() > 8 {
		t.Fatalf("%d sessions, over the bound of 8", s.Len())
	}
}

// TestEndApprover: ending an approver's sessions ends all of theirs and
// no one else's.
func TestEndApprover(t *testing.T) {
	find := directory(t)
	s := NewSessions(Options{})
	var alice []string
	for range 2 {
		tok, _, err := s.Login(find, "alice", alicePassword, t0)
		if err != nil {
			t.Fatal(err)
		}
		alice = append(alice, tok)
	}
	bob, _, err := s.Login(find, "bob", "bob password 123", t0)
	if err != nil {
		t.Fatal(err)
	}
	if n := s.EndApprover("alice"); n != 2 {
		t.Fatalf("EndApprover(alice) = %d, want 2", n)
	}
	for _, tok := range alice {
		if _, _, ok := s.Lookup(tok, t0.Add(time.Minute)); ok {
			t.Fatal("alice's session outlived EndApprover")
		}
	}
	if name, _, ok := s.Lookup(bob, t0.Add(time.Minute)); !ok || name != "bob" {
		t.Fatal("EndApprover(alice) ended bob's session")
	}
	if n := s.EndApprover("carol"); n != 0 || s.Len() != 1 {
		t.Fatalf("EndApprover(carol) = %d with %d sessions left, want 0 and 1", n, s.Len())
	}
}

// TestResumeChecksCredential: with the approvers looked up, a session
// ends (and is removed) once its approver is removed or has a new
// password; it stays while both are as at sign-in.
func TestResumeChecksCredential(t *testing.T) {
	ctx := t.Context()
	find := directory(t)
	alice, _ := find("alice")
	s := NewSessions(Options{})
	for _, c := range []struct {
		name string
		find func(string) (*Approver, bool)
		ok   bool
	}{
		{"the same approvers", find, true},
		{"alice removed", func(name string) (*Approver, bool) {
			if name == "alice" {
				return nil, false
			}
			return find(name)
		}, false},
		{"alice's new password", func(name string) (*Approver, bool) {
			a := *alice
			if name == "alice" {
				a.PasswordHash = bobHash(t, find) // any other hash
			}
			return &a, true
		}, false},
	} {
		tok, csrf, err := s.SignIn(ctx, find, "alice", alicePassword, t0)
		if err != nil {
			t.Fatal(err)
		}
		name, gotCSRF, ok, err := s.Resume(ctx, c.find, tok, t0.Add(time.Minute))
		if err != nil || ok != c.ok || ok && (name != "alice" || gotCSRF != csrf) {
			t.Errorf("%s: Resume = %q, %v, %v; want ok %v", c.name, name, ok, err, c.ok)
		}
		if _, _, ok, _ := s.Resume(ctx, find, tok, t0.Add(2*time.Minute)); ok != c.ok {
			t.Errorf("%s: the session was not removed (resumed again with the approvers as at sign-in: %v)", c.name, ok)
		}
		s.End(ctx, tok)
	}
	if s.Len() != 0 {
		t.Errorf("%d sessions left after End", s.Len())
	}
}

func bobHash(t *testing.T, find func(string) (*Approver, bool)) string {
	t.Helper()
	bob, ok := find("bob")
	if !ok {
		t.Fatal("no bob")
	}
	return bob.PasswordHash
}

// failingStore is a session store whose server is down.
type failingStore struct{ SessionStore }

var errStoreDown = errors.New("the session store's server is down")

func (failingStore) Add(context.Context, [sha256.Size]byte, Session, int) error { return errStoreDown }

// TestSignInStoreFails: a right password whose session cannot be kept is
// ErrSessionStore (retry later), never ErrCredentials (which would tell
// the approver their password is wrong); a wrong password stays
// ErrCredentials.
func TestSignInStoreFails(t *testing.T) {
	find := directory(t)
	s := NewSessions(Options{Store: failingStore{NewMemoryStore()}})
	_, _, err := s.SignIn(t.Context(), find, "alice", alicePassword, t0)
	if !errors.Is(err, ErrSessionStore) || !errors.Is(err, errStoreDown) || errors.Is(err, ErrCredentials) {
		t.Fatalf("SignIn with the store down: %v, want ErrSessionStore wrapping the store's error", err)
	}
	if _, _, err := s.SignIn(t.Context(), find, "alice", "a wrong password here", t0); !errors.Is(err, ErrCredentials) {
		t.Fatalf("a wrong password with the store down: %v, want ErrCredentials", err)
	}
}
