package approver

import (
	"container/list"
	"context"
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

// ErrSessionStore classifies a sign-in whose password was right but whose
// session the session store could not keep (a database that is down, say):
// retrying later may succeed.
var ErrSessionStore = errors.New("the session could not be stored")

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
	// (Resume). Default 30 minutes.
	IdleTimeout time.Duration
	// Lifetime ends a session this long after its sign-in, however
	// much it is used. Default 12 hours.
	Lifetime time.Duration
	// MaxSessions bounds the sessions held: a sign-in beyond it ends
	// the oldest. Default 1,024.
	MaxSessions int
	// Store keeps the sessions. Default: in this process's memory
	// (NewMemoryStore), so that a restart ends them all.
	Store SessionStore
}

// Session is a signed-in approver as a SessionStore keeps it, under the
// SHA-256 of its token: the token itself is never kept.
type Session struct {
	Name, CSRF string
	// Credential is the SHA-256 of the approver's PasswordHash at
	// sign-in: the session ends once it is not the approver's any more
	// (Resume), so a new password, or the approver's removal, ends it.
	Credential     [sha256.Size]byte
	SignIn, UsedAt time.Time
}

// SessionStore keeps sessions under the SHA-256 of their tokens, for
// Sessions: in memory (NewMemoryStore), or in a database that several
// processes share. It is safe for concurrent use.
type SessionStore interface {
	// Add keeps se under key, then ends the oldest sessions (by
	// sign-in) beyond max.
	Add(ctx context.Context, key [sha256.Size]byte, se Session, max int) error
	// Use returns the session under key and marks it used at now,
	// unless it has ended: unused for idle, or signed in lifetime ago
	// (at equality too). An ended session is removed, and ok is false.
	Use(ctx context.Context, key [sha256.Size]byte, now time.Time, idle, lifetime time.Duration) (se Session, ok bool, err error)
	// Remove ends the session under key, if any.
	Remove(ctx context.Context, key [sha256.Size]byte) error
	// RemoveApprover ends every session of approver name, and returns
	// how many it ended.
	RemoveApprover(ctx context.Context, name string) (int, error)
	// Len returns the number of sessions kept, ended ones not yet
	// removed included.
	Len(ctx context.Context) (int, error)
}

// Sessions holds approvers' sessions, in its SessionStore, and throttles
// sign-ins, in memory: throttling is per process. It is safe for
// concurrent use.
type Sessions struct {
	idle, lifetime time.Duration
	max            int
	store          SessionStore

	mu     sync.Mutex
	names  map[string]*throttle
	global throttle
}

// NewSessions returns Sessions with o's store, or an empty one in memory.
func NewSessions(o Options) *Sessions {
	s := &Sessions{
		idle: o.IdleTimeout, lifetime: o.Lifetime, max: o.MaxSessions, store: o.Store,
		names: make(map[string]*throttle),
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
	if s.store == nil {
		s.store = NewMemoryStore()
	}
	return s
}

// IdleTimeout and Lifetime are the ends of a session in force (Options).
func (s *Sessions) IdleTimeout() time.Duration { return s.idle }
func (s *Sessions) Lifetime() time.Duration    { return s.lifetime }

// Login is SignIn without a context, for a store in memory.
func (s *Sessions) Login(find func(name string) (*Approver, bool), name, password string, now time.Time) (token, csrf string, err error) {
	return s.SignIn(context.Background(), find, name, password, now)
}

// SignIn signs approver name in with password at time now, and returns a
// new session's token (for the cookie, SessionCookie) and its CSRF token
// (for the page's forms). find looks approvers up (ByName).
//
// An unknown name and a wrong password both give ErrCredentials after the
// same work: for an unknown name, an argon2id computation with the
// documented parameters is made and thrown away. A name or its every
// name throttled gives a *ThrottledError without any computation; a full
// argon2 gate ErrBusy, which is no failure. An error of the store is
// returned wrapped, and no session is opened.
func (s *Sessions) SignIn(ctx context.Context, find func(name string) (*Approver, bool), name, password string, now time.Time) (token, csrf string, err error) {
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

	a, err := verify(find, t != nil, name, password)

	s.mu.Lock()
	s.global.pending--
	if t != nil {
		t.pending--
	}
	switch {
	case err != nil:
		s.forget(name, t, now)
		s.mu.Unlock()
		return "", "", err
	case a == nil:
		s.global.fail(now, MaxGlobalFailures)
		if t != nil {
			t.fail(now, MaxFailures)
		}
		s.sweep(now)
		s.mu.Unlock()
		return "", "", ErrCredentials
	}
	if t != nil && t.pending == 0 {
		delete(s.names, name) // a success forgets the name's failures
	}
	s.mu.Unlock()
	token, csrf = newToken(), newToken()
	se := Session{Name: name, CSRF: csrf, Credential: credential(a), SignIn: now, UsedAt: now}
	if err := s.store.Add(ctx, sha256.Sum256([]byte(token)), se, s.max); err != nil {
		return "", "", fmt.Errorf("%w: %w", ErrSessionStore, err)
	}
	return token, csrf, nil
}

// credential is what a session keeps of its approver's password: the
// SHA-256 of the hash.
func credential(a *Approver) [sha256.Size]byte { return sha256.Sum256([]byte(a.PasswordHash)) }

// verify checks name's password, or makes the same computation for a
// name that has none. It returns the approver when the password is
// theirs, else nil.
func verify(find func(string) (*Approver, bool), mayExist bool, name, password string) (*Approver, error) {
	var a *Approver
	if mayExist && find != nil {
		a, _ = find(name)
	}
	if a == nil {
		return nil, dummyVerify(password)
	}
	ok, err := VerifyPassword(a.PasswordHash, password)
	if errors.Is(err, ErrPasswordTooLong) {
		return nil, nil
	}
	if err != nil {
		// A config that ByName checked never gets here.
		return nil, fmt.Errorf("approver %q: %w", name, err)
	}
	if !ok {
		return nil, nil
	}
	return a, nil
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

// Lookup is Resume without a context, nor the check of the approver's
// credential, for a store in memory.
func (s *Sessions) Lookup(token string, now time.Time) (name, csrf string, ok bool) {
	name, csrf, ok, _ = s.Resume(context.Background(), nil, token, now)
	return name, csrf, ok
}

// Resume returns the approver and CSRF token of the session whose token
// is token, and marks the session used at now. A session unused for the
// idle timeout, or older than its lifetime, has ended (at equality too):
// it is removed and ok is false. With find (ByName), a session whose
// approver is gone, or whose password changed since the sign-in, has
// ended too. The token is found by its SHA-256. err is the store's, and
// then ok is false.
func (s *Sessions) Resume(ctx context.Context, find func(name string) (*Approver, bool), token string, now time.Time) (name, csrf string, ok bool, err error) {
	if len(token) != tokenLen {
		return "", "", false, nil
	}
	key := sha256.Sum256([]byte(token))
	se, ok, err := s.store.Use(ctx, key, now, s.idle, s.lifetime)
	if err != nil || !ok {
		return "", "", false, err
	}
	if find != nil {
		if a, found := find(se.Name); !found || credential(a) != se.Credential {
			return "", "", false, s.store.Remove(ctx, key)
		}
	}
	return se.Name, se.CSRF, true, nil
}

// Logout is End without a context, for a store in memory.
func (s *Sessions) Logout(token string) { s.End(context.Background(), token) }

// End ends the session whose token is token, if any.
func (s *Sessions) End(ctx context.Context, token string) error {
	if len(token) != tokenLen {
		return nil
	}
	return s.store.Remove(ctx, sha256.Sum256([]byte(token)))
}

// EndApprover ends every session of approver name, and returns how many
// it ended: for an approver removed from the config, or whose password
// changed (ledgerd's reload on SIGHUP), whose sessions must not outlive
// the credential that opened them. A store that fails ends none here (0);
// Resume, given the approvers in force, still ends each at its next use.
func (s *Sessions) EndApprover(name string) int {
	n, _ := s.store.RemoveApprover(context.Background(), name)
	return n
}

// Len returns the number of sessions held, ended ones not yet removed
// included (0 if the store cannot tell).
func (s *Sessions) Len() int {
	n, _ := s.store.Len(context.Background())
	return n
}

// memoryStore is NewMemoryStore's SessionStore.
type memoryStore struct {
	mu       sync.Mutex
	sessions map[[sha256.Size]byte]*list.Element // of *memorySession, by the token's SHA-256
	order    *list.List                          // of *memorySession, oldest sign-in first
}

type memorySession struct {
	key [sha256.Size]byte
	Session
}

// NewMemoryStore returns an empty SessionStore in this process's memory.
// Its errors are always nil.
func NewMemoryStore() SessionStore {
	return &memoryStore{sessions: make(map[[sha256.Size]byte]*list.Element), order: list.New()}
}

func (m *memoryStore) Add(_ context.Context, key [sha256.Size]byte, se Session, max int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.sessions[key]; e != nil {
		m.remove(e)
	}
	m.sessions[key] = m.order.PushBack(&memorySession{key, se})
	for len(m.sessions) > max {
		m.remove(m.order.Front())
	}
	return nil
}

func (m *memoryStore) Use(_ context.Context, key [sha256.Size]byte, now time.Time, idle, lifetime time.Duration) (Session, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.sessions[key]
	if e == nil {
		return Session{}, false, nil
	}
	se := e.Value.(*memorySession)
	if !now.Before(se.UsedAt.Add(idle)) || !now.Before(se.SignIn.Add(lifetime)) {
		m.remove(e)
		return Session{}, false, nil
	}
	if now.After(se.UsedAt) {
		se.UsedAt = now
	}
	return se.Session, true, nil
}

func (m *memoryStore) Remove(_ context.Context, key [sha256.Size]byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.sessions[key]; e != nil {
		m.remove(e)
	}
	return nil
}

func (m *memoryStore) RemoveApprover(_ context.Context, name string) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for e := m.order.Front(); e != nil; {
		next := e.Next()
		if e.Value.(*memorySession).Name == name {
			m.remove(e)
			n++
		}
		e = next
	}
	return n, nil
}

func (m *memoryStore) Len(context.Context) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.sessions), nil
}

func (m *memoryStore) remove(e *list.Element) {
	delete(m.sessions, m.order.Remove(e).(*memorySession).key)
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
