package server

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/decisionledger/ledger/approval/approver"
	"github.com/decisionledger/ledger/config"
	"github.com/decisionledger/ledger/internal/apitest"
)

// withMediators is cfg with other mediators (a copy: the config in force
// is never changed in place).
func withMediators(cfg *config.Config, ms ...config.Mediator) *config.Config {
	c := *cfg
	c.Mediators = ms
	return &c
}

// TestCredentialSwap: a token replaced by apply is refused by the next
// request and its successor accepted, back and forth, while 6 clients
// append with both tokens; every answer is 201 or 401, never anything
// else (run with -race: the swap races with the requests).
func TestCredentialSwap(t *testing.T) {
	s := startServer(t)
	lc := s.srv.creds
	const tokenB = "reload-token-b-example"
	cfgA := s.cfg
	cfgB := withMediators(cfgA, config.Mediator{Name: "local", TokenSHA256: apitest.TokenHash(tokenB)})
	quit := make(chan struct{})
	var wg sync.WaitGroup
	var odd sync.Map
	var answered atomic.Int64
	stop := sync.OnceFunc(func() { close(quit); wg.Wait() })
	defer stop()
	for g := range 6 {
		wg.Go(func() {
			tok := s.token
			if g%2 == 1 {
				tok = tokenB
			}
			for i := 0; ; i++ {
				select {
				case <-quit:
					return
				default:
				}
				req, _ := http.NewRequest("POST", s.url+"/v1/entries", strings.NewReader(apitest.AppendBody(1000*g+i)))
				req.Header.Set("Authorization", "Bearer "+tok)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					odd.Store(err.Error(), true)
					continue
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusUnauthorized {
					odd.Store(resp.StatusCode, true)
				}
				answered.Add(1)
			}
		})
	}
	check := func(what, token string, want int) bool {
		if code := apitest.AppendWith(t, s.url, token, 1); code != want {
			t.Errorf("%s: %d, want %d", what, code, want)
			return false
		}
		return true
	}
	for range 20 {
		lc.Apply(cfgB)
		if !check("the replaced token after the swap", s.token, http.StatusUnauthorized) || !check("the new token after the swap", tokenB, http.StatusCreated) {
			break
		}
		lc.Apply(cfgA)
		if !check("token B after swapping back", tokenB, http.StatusUnauthorized) || !check("token A after swapping back", s.token, http.StatusCreated) {
			break
		}
	}
	if !t.Failed() {
		apitest.WaitFor(t, "the clients to be answered", func() bool { return answered.Load() >= 60 })
	}
	stop()
	odd.Range(func(k, _ any) bool {
		t.Errorf("an append during the swaps was answered %v", k)
		return true
	})
}

// TestReaderTokensReload: protecting reads, and revoking a reader's
// token, take effect at the swap.
func TestReaderTokensReload(t *testing.T) {
	s := startServer(t)
	const reader = "reload-reader-example"
	read := func(token string) int { return checkpointStatus(t, s.url, token) }
	apitest.AppendWith(t, s.url, s.token, 1) // a checkpoint to read
	apitest.WaitFor(t, "a checkpoint", func() bool { return read("") == 200 })
	protected := *s.cfg
	protected.ReaderTokensSHA256 = []string{apitest.TokenHash(reader)}
	s.srv.creds.Apply(&protected)
	if read("") != 401 || read(reader) != 200 || read(s.token) != 200 {
		t.Errorf("protected reads: none %d, reader %d, mediator %d; want 401, 200, 200", read(""), read(reader), read(s.token))
	}
	revoked := protected
	revoked.ReaderTokensSHA256 = []string{apitest.TokenHash("another-reader-example")}
	s.srv.creds.Apply(&revoked)
	if read(reader) != 401 {
		t.Errorf("the revoked reader's token: %d, want 401", read(reader))
	}
}

// TestApproverReload: at the swap a removed approver's session ends
// (and stays ended when the name is added again), an approver whose
// password changed signs in again, one whose actions changed keeps the
// session and is judged by the new actions.
func TestApproverReload(t *testing.T) {
	s := pageServer(t)
	approvers := apitest.TestApprovers()
	sessions := map[string]*apitest.PageClient{}
	for _, a := range approvers[:2] {
		p := apitest.NewPageClient(t, s.url)
		p.SignIn(a.Name, apitest.TestPassword)
		sessions[a.Name] = p
	}
	alice, bob := approvers[0].Name, approvers[1].Name
	list := func(name string) int {
		resp, _ := sessions[name].Do("GET", "/approvals/", nil)
		return resp.StatusCode
	}
	if list(alice) != 200 || list(bob) != 200 {
		t.Fatalf("signed in: %d %d", list(alice), list(bob))
	}
	withApprovers := func(as ...approver.Approver) *config.Config {
		c := *s.cfg
		ap := *c.Approvals
		ap.Approvers = as
		c.Approvals = &ap
		return &c
	}
	// Without alice.
	ch := s.srv.creds.Apply(withApprovers(approvers[1:]...))
	if !slices.Equal(ch.ApproversRemoved, []string{alice}) || ch.SessionsEnded != 1 {
		t.Errorf("changes %+v, want alice removed and her session ended", ch)
	}
	if list(alice) != 401 || list(bob) != 200 {
		t.Errorf("after removing alice: alice %d, bob %d; want 401, 200", list(alice), list(bob))
	}
	// alice again, same password: her old session stays ended.
	s.srv.creds.Apply(withApprovers(approvers...))
	if list(alice) != 401 {
		t.Errorf("alice's session before her removal, after she was added again: %d, want 401", list(alice))
	}
	// bob's password changes: his session ends.
	bob2 := approvers[1]
	h, err := approver.HashPassword("bob's new password 456")
	if err != nil {
		t.Fatal(err)
	}
	bob2.PasswordHash = h
	changed := slices.Clone(approvers)
	changed[1] = bob2
	ch = s.srv.creds.Apply(withApprovers(changed...))
	if !slices.Equal(ch.ApproversChanged, []string{bob}) || list(bob) != 401 {
		t.Errorf("bob's password changed: %+v, his session %d; want it ended (401)", ch, list(bob))
	}
	sessions[bob].SignIn(bob, "bob's new password 456")
	if list(bob) != 200 {
		t.Errorf("bob signed in with his new password: %d", list(bob))
	}
	// bob's actions change: the session stays, judged by them, his
	// pending approvals too.
	email := openRequest(t, s, "agent:mail", "send_email", "", 1)
	if resp, b := sessions[bob].Do("GET", "/approvals/"+email.String(), nil); resp.StatusCode != 200 {
		t.Fatalf("bob reads an email's approval: %d %s", resp.StatusCode, b)
	}
	bob3 := bob2
	bob3.Actions = []string{"no_such_action"}
	changed[1] = bob3
	if ch = s.srv.creds.Apply(withApprovers(changed...)); len(ch.ApproversChanged) != 0 || ch.SessionsEnded != 0 {
		t.Errorf("bob's actions changed: %+v, want no session ended", ch)
	}
	if a, ok := s.srv.appr.Find(bob); !ok || !slices.Equal(a.Actions, []string{"no_such_action"}) {
		t.Errorf("the page finds bob as %+v, want the new actions", a)
	}
	if list(bob) != 200 {
		t.Errorf("bob's session after his actions changed: %d, want 200", list(bob))
	}
	resp, b := sessions[bob].Do("GET", "/approvals/"+email.String(), nil)
	expect(t, "bob reads the email's approval after send_email left his actions", resp, b, http.StatusForbidden, "not_permitted")
}

// TestSignInDuringReload: a reload that removes an approver while their
// password is being checked leaves no session: the sign-in is refused.
func TestSignInDuringReload(t *testing.T) {
	s := pageServer(t)
	lc := s.srv.creds
	approvers := apitest.TestApprovers()
	without := *s.cfg
	ap := *without.Approvals
	ap.Approvers = approvers[1:]
	without.Approvals = &ap
	// The snapshot in force finds alice, and removes her (a reload)
	// as soon as Login has found her, before it checks her password.
	inForce := lc.load()
	var once sync.Once
	lc.cur.Store(&credentials{cfg: inForce.cfg, limiter: inForce.limiter, approvers: func(name string) (*approver.Approver, bool) {
		a, ok := inForce.approvers(name)
		once.Do(func() { lc.Apply(&without) })
		return a, ok
	}})
	p := apitest.NewPageClient(t, s.url)
	resp, body := p.Do("POST", "/approvals/sign-in", url.Values{"name": {"alice"}, "password": {apitest.TestPassword}})
	expect(t, "a sign-in that a reload removed meanwhile", resp, body, http.StatusUnauthorized, "credentials")
	if n := s.srv.appr.Sessions.Len(); n != 0 {
		t.Errorf("%d sessions left", n)
	}
}

// TestReloadKeepsRateLevels: a reload that leaves a mediator's rate as it
// was leaves its bucket as it was (no fresh burst); a changed rate starts
// a full bucket.
func TestReloadKeepsRateLevels(t *testing.T) {
	cfg := &config.Config{Mediators: []config.Mediator{{Name: "a", RatePerSecond: 0.001}, {Name: "b", RatePerSecond: 0.001}}}
	now := time.Now()
	prev := newCredentials(cfg, nil)
	for _, m := range []string{"a", "b"} {
		if ok, _ := prev.limiter.allow(m, now); !ok {
			t.Fatalf("%s's first append refused", m)
		}
	}
	next := newCredentials(withMediators(cfg, config.Mediator{Name: "a", RatePerSecond: 0.001}, config.Mediator{Name: "b", RatePerSecond: 0.002}), prev)
	if ok, _ := next.limiter.allow("a", now); ok {
		t.Error("a's unchanged rate: its spent bucket was refilled by the reload")
	}
	if ok, _ := next.limiter.allow("b", now); !ok {
		t.Error("b's new rate: refused, want a full bucket")
	}
}
