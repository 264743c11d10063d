package approver

import (
	"container/list"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
	"time"
)

// The defaults of Options.
const (
	DefaultIdleTimeout = 30 * time.Minute
	DefaultLifetime    = 12 * time.Hour
	DefaultMaxSessions = 1024
)

// The throttling of failed sign-ins (package doc, "Throttling").
const (
	// MaxFailures failed sign-ins of one name within FailureWindow
	// refuse that name's sign-ins for Lockout.
	MaxFailures   = 5
	FailureWindow = 15 * time.Minute
	Lockout       = 15 * time.Minute
	// MaxGlobalFailures failed sign-ins of any names within
	// FailureWindow refuse every sign-in for Lockout.
	MaxGlobalFailures = 100
)

// tokenLen is the length of a session or CSRF token: 32 bytes in
// unpadded base64url.
var tokenLen = base64.RawURLEncoding.EncodedLen(32)

// ErrCredentials is Login's one error for an unknown name and for a wrong
// password, so that an answer never tells whether a name is an
// approver's.
var ErrCredentials = errors.New("unknown approver or wrong password")

// ErrThrottled classifies a *ThrottledError.
var ErrThrottled = errors.New("too many failed sign-ins")

// ThrottledError is a sign-in refused unchecked, after too many failures
// (package doc, "Throttling"); Until is when to try again. Unknown names
// are throttled as known ones are, so it says nothing of whether a name is
// an approver's.
type ThrottledError struct {
	Until  time.Time
	Global bool // every name's sign-ins, not only this one's
}

func (e *ThrottledError) Error() string {
	who := "for this name"
	if e.Global {
		who = "for every name"
	}
	return fmt.Sprintf("%v: sign-ins refused %s until %s", ErrThrottled, who, e.Until.UTC().Format(time.RFC3339))
}

func (e *ThrottledError) Is(target error) bool { return target == ErrThrottled }

// Options configures Sessions; a zero field means its default.
type Options struct {
	// IdleTimeout ends a session this long after its last use
	// (Lookup). Default 30 minutes.
	IdleTimeout time.Duration
	// Lifetime ends a session this long after its sign-in, however
	// much it is used. Default 12 hours.
	Lifetime time.Duration
	// MaxSessions bounds the sessions held: a sign-in beyond it ends
	// the oldest. Default 1,024.
	MaxSessions int
}

// Sessions holds approvers' sessions, in memory only: a restart ends them
// all, and approvers sign in again. It is safe for concurrent use.
type Sessions struct {
	idle, lifetime time.Duration
	max            int

	mu       sync.Mutex
	sessions map[[sha256.Size]byte]*list.Element // of *session, by the token's SHA-256
	order    *list.List                          // of *session, oldest sign-in first
	names    map[string]*throttle
	global   throttle
}

// session is a signed-in approver. Its token is not kept: only its
// SHA-256, the map's key.
type session struct {
	key            [sha256.Size]byte
	name, csrf     string
	signIn, usedAt time.Time
}

// NewSessions returns an empty store.
func NewSessions(o Options) *Sessions {
	s := &Sessions{
		idle: o.IdleTimeout, lifetime: o.Lifetime, max: o.MaxSessions,
		sessions: make(map[[sha256.Size]byte]*list.Element),
		order:    list.New(),
		names:    make(map[string]*throttle),
	}
	if s.idle <= 0 {
		s.idle = DefaultIdleTimeout
	}
	if s.lifetime <= 0 {
		s.lifetime = DefaultLifetime
	}
	if s.max <= 0 {
		s.max = DefaultMaxSessions
	}
	return s
}

// Login signs approver name in with password at time now, and returns a
// new session's token (for the cookie, SessionCookie) and its CSRF token
// (for the page's forms). find looks approvers up (ByName).
//
// An unknown name and a wrong password both give ErrCredentials after the
// same work: for an unknown name, an argon2id computation with the
// documented parameters is made and thrown away. A name or its every
// name throttled gives a *ThrottledError without any computation; a full
// argon2 gate ErrBusy, which is no failure.
func (s *Sessions) Login(find func(name string) (*Approver, bool), name, password string, now time.Time) (token, csrf string, err error) {
	// A name that cannot be an approver's is throttled with every name
	// only: its record would cost memory for nothing.
	var t *throttle
	s.mu.Lock()
	if len(name) <= MaxNameLen {
		if t = s.names[name]; t == nil {
			t = new(throttle)
			s.names[name] = t
		}
	}
	if err := s.admit(t, now); err != nil {
		s.forget(name, t, now)
		s.mu.Unlock()
		return "", "", err
	}
	s.mu.Unlock()

	ok, err := verify(find, t != nil, name, password)

	s.mu.Lock()
	defer s.mu.Unlock()
	s.global.pending--
	if t != nil {
		t.pending--
	}
	switch {
	case err != nil:
		s.forget(name, t, now)
		return "", "", err
	case !ok:
		s.global.fail(now, MaxGlobalFailures)
		if t != nil {
			t.fail(now, MaxFailures)
		}
		s.sweep(now)
		return "", "", ErrCredentials
	}
	if t != nil && t.pending == 0 {
		delete(s.names, name) // a success forgets the name's failures
	}
	token, csrf = newToken(), newToken()
	for len(s.sessions) >= s.max {
		s.remove(s.order.Front())
	}
	se := &session{key: sha256.Sum256([]byte(token)), name: name, csrf: csrf, signIn: now, usedAt: now}
	s.sessions[se.key] = s.order.PushBack(se)
	return token, csrf, nil
}

// verify checks name's password, or makes the same computation for a
// name that has none.
func verify(find func(string) (*Approver, bool), mayExist bool, name, password string) (bool, error) {
	var a *Approver
	if mayExist && find != nil {
		a, _ = find(name)
	}
	if a == nil {
		return false, dummyVerify(password)
	}
	ok, err := VerifyPassword(a.PasswordHash, password)
	if errors.Is(err, ErrPasswordTooLong) {
		return false, nil
	}
	if err != nil {
		// A config that ByName checked never gets here.
		return false, fmt.Errorf("approver %q: %w", name, err)
	}
	return ok, nil
}

// admit refuses a sign-in that throttling forbids, or counts it as
// pending, holding its place among the failures until its result is
// known: so that of simultaneous tries no more are checked than failures
// are allowed. t is nil for a name that cannot be an approver's.
func (s *Sessions) admit(t *throttle, now time.Time) error {
	if until, refused := s.global.refused(now, MaxGlobalFailures); refused {
		return &ThrottledError{Until: until, Global: true}
	}
	if t != nil {
		if until, refused := t.refused(now, MaxFailures); refused {
			return &ThrottledError{Until: until}
		}
		t.pending++
	}
	s.global.pending++
	return nil
}

// forget drops name's throttle record if it holds nothing.
func (s *Sessions) forget(name string, t *throttle, now time.Time) {
	if t != nil && t.empty(now) {
		delete(s.names, name)
	}
}

// sweep drops the throttle records that hold nothing, when they are many:
// failures are bounded by MaxGlobalFailures per FailureWindow, and so are
// the records that hold any.
func (s *Sessions) sweep(now time.Time) {
	if len(s.names) <= 4*MaxGlobalFailures {
		return
	}
	for name, t := range s.names {
		s.forget(name, t, now)
	}
}

// Lookup returns the approver and CSRF token of the session whose token
// is token, and marks the session used at now. A session unused for the
// idle timeout, or older than its lifetime, has ended (at equality too):
// it is removed and ok is false. The token is found by its SHA-256.
func (s *Sessions) Lookup(token string, now time.Time) (name, csrf string, ok bool) {
	if len(token) != tokenLen {
		return "", "", false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.sessions[sha256.Sum256([]byte(token))]
	if e == nil {
		return "", "", false
	}
	se := e.Value.(*session)
	if !now.Before(se.usedAt.Add(s.idle)) || !now.Before(se.signIn.Add(s.lifetime)) {
		s.remove(e)
		return "", "", false
	}
	if now.After(se.usedAt) {
		se.usedAt = now
	}
	return se.name, se.csrf, true
}

// Logout ends the session whose token is token, if any.
func (s *Sessions) Logout(token string) {
	if len(token) != tokenLen {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.sessions[sha256.Sum256([]byte(token))]; e != nil {
		s.remove(e)
	}
}

// EndApprover ends every session of approver name, and returns how many
// it ended: for an approver removed from the config, or whose password
// changed (ledgerd's reload on SIGHUP), whose sessions must not outlive
// the credential that opened them.
func (s *Sessions) EndApprover(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for e := s.order.Front(); e != nil; {
		next := e.Next()
		if e.Value.(*session).name == name {
			s.remove(e)
			n++
		}
		e = next
	}
	return n
}

// Len returns the number of sessions held, ended ones not yet removed
// included.
func (s *Sessions) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions)
}

func (s *Sessions) remove(e *list.Element) {
	delete(s.sessions, s.order.Remove(e).(*session).key)
}

// newToken returns 32 random bytes in unpadded base64url.
func newToken() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// throttle counts the failed sign-ins of one name, or of all.
type throttle struct {
	failures []time.Time // within FailureWindow, oldest first
	pending  int         // admitted, not yet answered
	until    time.Time   // locked out until
}

// prune drops failures that are FailureWindow old or older.
func (t *throttle) prune(now time.Time) {
	i := 0
	for i < len(t.failures) && !now.Before(t.failures[i].Add(FailureWindow)) {
		i++
	}
	t.failures = t.failures[i:]
}

// refused says whether a sign-in at now is refused, and until when.
func (t *throttle) refused(now time.Time, max int) (time.Time, bool) {
	if now.Before(t.until) {
		return t.until, true
	}
	t.prune(now)
	if len(t.failures)+t.pending >= max {
		// Tries in flight hold the last places: one may fail and
		// lock the name, or all succeed and free them within a second.
		return now.Add(time.Second), true
	}
	return time.Time{}, false
}

// fail counts a failure at now; the max-th within the window locks out.
func (t *throttle) fail(now time.Time, max int) {
	t.prune(now)
	t.failures = append(t.failures, now)
	if len(t.failures) >= max {
		t.until = now.Add(Lockout)
		t.failures = nil
	}
}

func (t *throttle) empty(now time.Time) bool {
	t.prune(now)
	return len(t.failures) == 0 && t.pending == 0 && !now.Before(t.until)
}
