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
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/decisionledger/ledger/approval/approver"
)

// credentials are the credentials in force: a snapshot that no one
// changes, replaced whole by a reload, so that a request judged with one
// sees all of its parts from one config.
type credentials struct {
	// cfg holds the config they come from; only its mediators,
	// reader_tokens_sha256 and approvals.approvers are read.
	cfg *Config
	// limiter bounds each mediator's rate.
	limiter *limiter
	// approvers finds an approver by name; it finds none when the config
	// has no approvals member.
	approvers func(name string) (*approver.Approver, bool)
	// tokens are the mediators' token hashes, current and previous.
	tokens mediatorTokens
	// now is the clock a previous token's expiry is judged by:
	// time.Now, or a test's.
	now func() time.Time
}

// authenticate returns the mediator whose token this is now, and whether
// it is the mediator's previous token (valid until its expiry).
func (c *credentials) authenticate(token string) (mediator string, previous, ok bool) {
	mediator, previous = c.tokens.authenticate(token, c.now())
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
	reader := c.cfg.isReader(token)
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
func newLiveCredentials(cfg *Config) *liveCredentials {
	lc := new(liveCredentials)
	lc.cur.Store(newCredentials(cfg, nil))
	return lc
}

// newCredentials makes cfg's credentials. A mediator whose rate and
// burst are prev's keeps its bucket's level: a reload gives no burst.
func newCredentials(cfg *Config, prev *credentials) *credentials {
	c := &credentials{cfg: cfg, limiter: newLimiter(cfg), tokens: cfg.mediatorTokens(), now: time.Now}
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

// credentialChanges is what a reload changed, by name: never a token's
// hash nor a password's.
type credentialChanges struct {
	mediatorsAdded, mediatorsRemoved, tokensRotated, ratesChanged []string
	readersChanged                                                bool
	approversAdded, approversRemoved, approversChanged            []string
	sessionsEnded                                                 int
}

// LogValue lists the names; empty lists are left out.
func (ch credentialChanges) LogValue() slog.Value {
	var attrs []slog.Attr
	add := func(key string, names []string) {
		if len(names) > 0 {
			attrs = append(attrs, slog.String(key, strings.Join(names, ",")))
		}
	}
	add("mediators_added", ch.mediatorsAdded)
	add("mediators_removed", ch.mediatorsRemoved)
	add("tokens_rotated", ch.tokensRotated)
	add("rates_changed", ch.ratesChanged)
	if ch.readersChanged {
		attrs = append(attrs, slog.Bool("reader_tokens_changed", true))
	}
	add("approvers_added", ch.approversAdded)
	add("approvers_removed", ch.approversRemoved)
	add("approvers_changed", ch.approversChanged)
	if ch.sessionsEnded > 0 {
		attrs = append(attrs, slog.Int("approver_sessions_ended", ch.sessionsEnded))
	}
	return slog.GroupValue(attrs...)
}

// apply puts next's credentials in force, then ends the sessions of the
// approvers that next removes or whose password it changes. Requests
// judged before the swap may finish with the old credentials.
func (lc *liveCredentials) apply(next *Config) credentialChanges {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	prev := lc.cur.Load()
	ch := diffCredentials(prev.cfg, next)
	lc.cur.Store(newCredentials(next, prev))
	if lc.sessions != nil {
		for _, name := range slices.Concat(ch.approversRemoved, ch.approversChanged) {
			ch.sessionsEnded += lc.sessions.EndApprover(name)
		}
	}
	return ch
}

// diffCredentials names what changes from old's credentials to new's.
// approversChanged are those whose password changed (their sessions
// end); an approver whose actions or principals changed keeps their
// sessions, judged by the new ones.
func diffCredentials(old, next *Config) credentialChanges {
	var ch credentialChanges
	olds := map[string]Mediator{}
	for _, m := range old.Mediators {
		olds[m.Name] = m
	}
	for _, m := range next.Mediators {
		o, ok := olds[m.Name]
		switch {
		case !ok:
			ch.mediatorsAdded = append(ch.mediatorsAdded, m.Name)
		case o.TokenSHA256 != m.TokenSHA256:
			ch.tokensRotated = append(ch.tokensRotated, m.Name)
		}
		if ok && (o.RatePerSecond != m.RatePerSecond || o.Burst != m.Burst) {
			ch.ratesChanged = append(ch.ratesChanged, m.Name)
		}
		delete(olds, m.Name)
	}
	ch.mediatorsRemoved = slices.Sorted(maps.Keys(olds))
	ch.readersChanged = !slices.Equal(old.ReaderTokensSHA256, next.ReaderTokensSHA256)
	approvers := func(c *Config) map[string]approver.Approver {
		m := map[string]approver.Approver{}
		if c.Approvals != nil {
			for _, a := range c.Approvals.Approvers {
				m[a.Name] = a
			}
		}
		return m
	}
	oldA, newA := approvers(old), approvers(next)
	for _, name := range slices.Sorted(maps.Keys(newA)) {
		o, ok := oldA[name]
		switch {
		case !ok:
			ch.approversAdded = append(ch.approversAdded, name)
		case o.PasswordHash != newA[name].PasswordHash:
			ch.approversChanged = append(ch.approversChanged, name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(oldA)) {
		if _, ok := newA[name]; !ok {
			ch.approversRemoved = append(ch.approversRemoved, name)
		}
	}
	return ch
}

// reloadHint is what the commands that change credentials (ledgerd token,
// ledgerd approver) print: how a running ledgerd takes the change.
const reloadHint = "ledgerd: a running ledgerd takes the change on SIGHUP: systemctl reload ledgerd, or kill -HUP <its pid>; " +
	"with several instances, signal each one, as each reads its own config file\n"

// reloadable are the config's members a reload puts in force, by JSON
// name; approvals and tls are compared member by member (restartFields).
var reloadable = map[string]bool{"mediators": true, "reader_tokens_sha256": true, "approvals": true, "tls": true}

// restartFields names the members of the config that differ between
// start (the file's config at start) and next and that only a restart
// puts in force: every member but the credentials, of approvals every
// member but approvers, and of tls client_ca_file. approvals and tls
// themselves are named when they appear or go away: the approval
// endpoints and HTTPS are on or off from the start (approvers still
// change: none when approvals went away).
func restartFields(start, next *Config) []string {
	var names []string
	sv, nv := reflect.ValueOf(start).Elem(), reflect.ValueOf(next).Elem()
	for i := range sv.NumField() {
		name, _, _ := strings.Cut(sv.Type().Field(i).Tag.Get("json"), ",")
		if reloadable[name] {
			continue
		}
		if !reflect.DeepEqual(sv.Field(i).Interface(), nv.Field(i).Interface()) {
			names = append(names, name)
		}
	}
	switch a, b := start.TLS, next.TLS; {
	case (a == nil) != (b == nil):
		names = append(names, "tls")
	case a != nil && a.ClientCAFile != b.ClientCAFile:
		names = append(names, "tls.client_ca_file")
	}
	switch a, b := start.Approvals, next.Approvals; {
	case (a == nil) != (b == nil):
		names = append(names, "approvals")
	case a != nil:
		if a.PendingTTL != b.PendingTTL {
			names = append(names, "approvals.pending_ttl")
		}
		if a.ExecutionTTL != b.ExecutionTTL {
			names = append(names, "approvals.execution_ttl")
		}
		if !slices.Equal(a.TrustedOrigins, b.TrustedOrigins) {
			names = append(names, "approvals.trusted_origins")
		}
	}
	return names
}

// configReloader re-reads the config file on SIGHUP and puts its
// credentials in force.
type configReloader struct {
	path  string
	start *Config // the file's config at start, before --listen
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
	next, err := loadConfig(r.path)
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
	if n, expiries := previousTokens(next, r.creds.load().now()); n > 0 {
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
	if names := restartFields(r.start, next); len(names) > 0 {
		r.log.WarnContext(ctx, "config reload: these members changed and take effect only at a restart", "fields", strings.Join(names, ","))
	}
}

// previousTokens counts the mediators' previous tokens valid at now and
// names their expiries, "mediator=time" joined by commas; never a hash.
func previousTokens(c *Config, now time.Time) (int, string) {
	var list []string
	for _, m := range c.Mediators {
		if m.PreviousTokenSHA256 == "" {
			continue
		}
		if t, err := parsePreviousExpires(m.PreviousTokenExpires); err == nil && now.Before(t) {
			list = append(list, m.Name+"="+m.PreviousTokenExpires)
		}
	}
	return len(list), strings.Join(list, ",")
}

func approverCount(c *Config) int {
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

// serverTLS is tlsConfig with its certificate taken, at each handshake,
// from the returned serverCert.
func (t *TLSConfig) serverTLS() (*tls.Config, *serverCert, error) {
	c, err := t.tlsConfig()
	if err != nil {
		return nil, nil, err
	}
	sc := new(serverCert)
	sc.cur.Store(&c.Certificates[0])
	c.Certificates = nil
	c.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return sc.current(), nil }
	return c, sc, nil
}
