// The config's reload on SIGHUP (docs/config.md "Reload"): the
// credentials — mediators' tokens and rates, readers' tokens, approvers,
// the TLS certificate — change without a restart, so that a leaked token
// or a departed approver is refused at once. Everything else the config
// sets is read at start only; a reload names the fields that changed and
// need a restart.

package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"slices"
	"strings"
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

// liveCredentials are the credentials in force, shared by every part of
// the process that checks one (a cluster's follower and its terms alike).
type liveCredentials struct {
	cur atomic.Pointer[credentials]
	// mu makes reloads one at a time, and guards sessions.
	mu sync.Mutex
	// sessions are the approvers' sessions of the approvals state in
	// use (the term's, in a cluster), whose owners a reload may sign out.
	sessions *approver.Sessions
}

// newLiveCredentials puts cfg's credentials in force; cfg has been
// checked (ByName cannot fail then).
func newLiveCredentials(cfg *config.Config) *liveCredentials {
	lc := new(liveCredentials)
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

func (lc *liveCredentials) load() *credentials { return lc.cur.Load() }

// setSessions names the sessions a reload ends the approvers' of.
func (lc *liveCredentials) setSessions(s *approver.Sessions) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	lc.sessions = s
}

// apply puts next's credentials in force, then ends the sessions of the
// approvers that next removes or whose password it changes. Requests
// judged before the swap may finish with the old credentials.
func (lc *liveCredentials) apply(next *config.Config) config.CredentialChanges {
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

// reloadHint is what the commands that change credentials (ledgerd token,
// ledgerd approver) print: how a running ledgerd takes the change.
const reloadHint = "ledgerd: a running ledgerd takes the change on SIGHUP: systemctl reload ledgerd, or kill -HUP <its pid>; " +
	"with several instances, signal each one, as each reads its own config file\n"

// configReloader re-reads the config file on SIGHUP and puts its
// credentials in force.
type configReloader struct {
	path  string
	start *config.Config // the file's config at start, before --listen
	creds *liveCredentials
	cert  *serverCert // nil without TLS
	log   *slog.Logger
	m     *metrics
}

// reload reads and checks the config file as a start does. A config that
// does not load changes nothing: it is logged (the check's message, which
// names the field and never a secret) and counted as failed. Otherwise
// its credentials are put in force, and the members that need a restart
// are named in a warning.
func (r *configReloader) reload(ctx context.Context) {
	next, err := config.Load(r.path)
	if err != nil {
		r.log.ErrorContext(ctx, "config reload refused; the credentials in force stay", "error", err)
		r.m.configReload(false)
		return
	}
	// Counted last, once everything is logged: a count seen on /metrics
	// means the reload and its log lines are done.
	defer r.m.configReload(true)
	ch := r.creds.apply(next)
	r.log.InfoContext(ctx, "config reloaded: credentials in force", "config", r.path, "changes", ch,
		"mediators", len(next.Mediators), "approvers", approverCount(next))
	if n, expiries := config.PreviousTokens(next, r.creds.load().now()); n > 0 {
		r.log.InfoContext(ctx, "config reload: previous mediator tokens in force until their expiry", "count", n, "expires", expiries)
	}
	if r.cert != nil && next.TLS != nil {
		// The check loaded the pair already; a file rewritten since
		// then is read again here, or refused.
		if changed, err := r.cert.reload(next.TLS.CertFile, next.TLS.KeyFile); err != nil {
			r.log.ErrorContext(ctx, "config reload: the TLS certificate did not load; the one in force stays", "error", err)
		} else if changed {
			attrs := []any{"cert_file", next.TLS.CertFile}
			if leaf := r.cert.current().Leaf; leaf != nil {
				attrs = append(attrs, "subject", leaf.Subject.String(), "not_after", leaf.NotAfter)
			}
			r.log.InfoContext(ctx, "config reload: TLS certificate in force", attrs...)
		}
	}
	if names := config.RestartFields(r.start, next); len(names) > 0 {
		r.log.WarnContext(ctx, "config reload: these members changed and take effect only at a restart", "fields", strings.Join(names, ","))
	}
}

func approverCount(c *config.Config) int {
	if c.Approvals == nil {
		return 0
	}
	return len(c.Approvals.Approvers)
}

// keepLevels gives each mediator of l whose rate and burst are the same
// in prev prev's bucket, level and all: the credentials in force before
// and after a reload then draw on one bucket. Called before l is in
// force.
func (l *limiter) keepLevels(prev *limiter) {
	for name, b := range l.buckets {
		if p := prev.buckets[name]; p != nil && p.Limit() == b.Limit() && p.Burst() == b.Burst() {
			l.buckets[name] = p
		}
	}
}

// serverCert is the server's TLS certificate in force, which new
// connections get: read at start, and again at each reload, so that a
// renewed certificate serves without a restart. Connections open keep
// theirs.
type serverCert struct {
	cur atomic.Pointer[tls.Certificate]
}

func (c *serverCert) current() *tls.Certificate { return c.cur.Load() }

// reload reads the pair and puts it in force; changed says whether it
// differs from the one in force.
func (c *serverCert) reload(certFile, keyFile string) (changed bool, err error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return false, fmt.Errorf("tls: %w", err)
	}
	old := c.cur.Load()
	changed = old == nil || !slices.EqualFunc(old.Certificate, cert.Certificate, slices.Equal)
	c.cur.Store(&cert)
	return changed, nil
}

// serverTLS is t.ServerConfig with its certificate taken, at each
// handshake, from the returned serverCert.
func serverTLS(t *config.TLSConfig) (*tls.Config, *serverCert, error) {
	c, err := t.ServerConfig()
	if err != nil {
		return nil, nil, err
	}
	sc := new(serverCert)
	sc.cur.Store(&c.Certificates[0])
	c.Certificates = nil
	c.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return sc.current(), nil }
	return c, sc, nil
}
