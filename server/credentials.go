// The credentials in force (docs/config.md "Reload"): mediators' tokens
// and rates, readers' tokens, approvers. The command reads the config
// file again on SIGHUP and puts its credentials in force with Apply, so
// that a leaked token or a departed approver is refused at once.

package server

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/decisionledger/ledger/approval/approver"
	"github.com/decisionledger/ledger/config"
)

// credentials are the credentials in force: a snapshot that no one
// changes, replaced whole by a reload, so that a request judged with one
// sees all of its parts from one config.
type credentials struct {
	// cfg holds the config they come from; only its mediators,
	// reader_tokens_sha256 and approvals.approvers are read.
	cfg *config.Config
	// limiter bounds each mediator's rate.
	limiter *limiter
	// approvers finds an approver by name; it finds none when the config
	// has no approvals member.
	approvers func(name string) (*approver.Approver, bool)
	// tokens are the mediators' token hashes, current and previous.
	tokens config.MediatorTokens
	// now is the clock a previous token's expiry is judged by:
	// time.Now, or a test's.
	now func() time.Time
}

// authenticate returns the mediator whose token this is now, and whether
// it is the mediator's previous token (valid until its expiry).
func (c *credentials) authenticate(token string) (mediator string, previous, ok bool) {
	mediator, previous = c.tokens.Authenticate(token, c.now())
	return mediator, previous, mediator != ""
}

// mayRead reports whether a request with this bearer token may use the
// read endpoints: always when reads are public; otherwise with a reader's
// or a mediator's token (a previous one until its expiry), each compared
// in constant time.
func (c *credentials) mayRead(token string) bool {
	if !c.readsProtected() {
		return true
	}
	reader := c.cfg.IsReader(token)
	_, _, mediator := c.authenticate(token)
	return reader || mediator
}

func (c *credentials) readsProtected() bool { return len(c.cfg.ReaderTokensSHA256) > 0 }

// Credentials are the credentials in force, shared by every part of the
// process that checks one (a cluster's follower and its terms alike).
type Credentials struct {
	cur atomic.Pointer[credentials]
	// mu makes reloads one at a time, and guards sessions.
	mu sync.Mutex
	// sessions are the approvers' sessions of the approvals state in
	// use (the term's, in a cluster), whose owners a reload may sign out.
	sessions *approver.Sessions
}

// NewCredentials puts cfg's credentials in force: its mediators,
// reader_tokens_sha256 and approvals.approvers; cfg has been checked
// (config.Load).
func NewCredentials(cfg *config.Config) *Credentials {
	lc := new(Credentials)
	lc.cur.Store(newCredentials(cfg, nil))
	return lc
}

// newCredentials makes cfg's credentials. A mediator whose rate and
// burst are prev's keeps its bucket's level: a reload gives no burst.
func newCredentials(cfg *config.Config, prev *credentials) *credentials {
	c := &credentials{cfg: cfg, limiter: newLimiter(cfg), tokens: cfg.MediatorTokens(), now: time.Now}
	if prev != nil {
		c.now = prev.now
	}
	if prev != nil {
		c.limiter.keepLevels(prev.limiter)
	}
	var list []approver.Approver
	if cfg.Approvals != nil {
		list = cfg.Approvals.Approvers
	}
	find, err := approver.ByName(list)
	if err != nil { // the config was checked: never
		find = func(string) (*approver.Approver, bool) { return nil, false }
	}
	c.approvers = find
	return c
}

func (lc *Credentials) load() *credentials { return lc.cur.Load() }

// approver finds an approver by name among the approvers in force.
func (lc *Credentials) approver(name string) (*approver.Approver, bool) {
	return lc.load().approvers(name)
}

// Now is the time by which a previous token's expiry is judged: the
// clock's of the credentials in force.
func (lc *Credentials) Now() time.Time { return lc.load().now() }

// setSessions names the sessions a reload ends the approvers' of.
func (lc *Credentials) setSessions(s *approver.Sessions) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	lc.sessions = s
}

// Apply puts next's credentials in force, then ends the sessions of the
// approvers that next removes or whose password it changes, and says
// what changed. Requests judged before the swap may finish with the old
// credentials.
func (lc *Credentials) Apply(next *config.Config) config.CredentialChanges {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	prev := lc.cur.Load()
	ch := config.DiffCredentials(prev.cfg, next)
	lc.cur.Store(newCredentials(next, prev))
	if lc.sessions != nil {
		for _, name := range slices.Concat(ch.ApproversRemoved, ch.ApproversChanged) {
			ch.SessionsEnded += lc.sessions.EndApprover(name)
		}
	}
	return ch
}
