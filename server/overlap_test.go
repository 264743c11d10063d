package server

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/decisionledger/ledger/config"
	"github.com/decisionledger/ledger/internal/apitest"
)

// Through the server, with its credentials' clock injected: the previous
// token appends as the same mediator until its expiry, each such request
// counted by mediator in ledgerd_previous_token_requests_total; at the
// expiry it is refused, and the new token still appends. Reads follow
// the same rule when they are protected.
func TestPreviousTokenServer(t *testing.T) {
	s := startServerWith(t, func(c *config.Config) { c.ReaderTokensSHA256 = []string{apitest.TokenHash("reader-token-example")} })
	// Far ahead of the real clock, so that a check by time.Now fails.
	expires := time.Date(2126, 12, 1, 15, 0, 0, 0, time.UTC)
	var now atomic.Pointer[time.Time]
	setNow := func(t time.Time) { now.Store(&t) }
	setNow(expires.Add(-time.Minute))
	s.srv.creds.load().now = func() time.Time { return *now.Load() }
	const newTok = "new-token-example"
	m := s.cfg.Mediators[0]
	m.PreviousTokenSHA256, m.PreviousTokenExpires, m.TokenSHA256 = m.TokenSHA256, expires.Format(time.RFC3339), apitest.TokenHash(newTok)
	s.srv.creds.Apply(withMediators(s.cfg, m))

	metric := func() string {
		_, b := apitest.GetBody(t, s.url+"/metrics")
		return string(b)
	}
	read := func(token string) int { return checkpointStatus(t, s.url, token) }
	for i, tok := range []string{s.token, newTok, s.token} {
		if resp, b := s.post(t, tok, apitest.AppendBody(i)); resp.StatusCode != http.StatusCreated || !bytes.Contains(b, []byte(`"mediator":"local"`)) {
			t.Errorf("append %d before the expiry: %d %s", i, resp.StatusCode, b)
		}
	}
	if got := read(s.token); got != http.StatusOK {
		t.Errorf("read with the previous token before its expiry: %d", got)
	}
	if !strings.Contains(metric(), "ledgerd_previous_token_requests_total{mediator=\"local\"} 2\n") {
		t.Errorf("the metric does not count the previous token's 2 appends:\n%s", metric())
	}
	setNow(expires)
	if resp, b := s.post(t, s.token, apitest.AppendBody(3)); resp.StatusCode != http.StatusUnauthorized || !bytes.Contains(b, []byte("unknown token")) {
		t.Errorf("append with the previous token at its expiry: %d %s", resp.StatusCode, b)
	}
	if got := read(s.token); got != http.StatusUnauthorized {
		t.Errorf("read with the previous token at its expiry: %d", got)
	}
	if resp, b := s.post(t, newTok, apitest.AppendBody(4)); resp.StatusCode != http.StatusCreated {
		t.Errorf("append with the new token after the expiry: %d %s", resp.StatusCode, b)
	}
	if !strings.Contains(metric(), "ledgerd_previous_token_requests_total{mediator=\"local\"} 2\n") {
		t.Errorf("the metric counts refused requests:\n%s", metric())
	}
}

// A follower's guard before forwarding lets the previous token through
// without counting it: the sequencer, which authenticates the request
// again, counts it once.
func TestPreviousTokenForwardNotCounted(t *testing.T) {
	s := startServer(t)
	m := s.cfg.Mediators[0]
	m.PreviousTokenSHA256, m.PreviousTokenExpires, m.TokenSHA256 = m.TokenSHA256, "2126-01-01T00:00:00Z", apitest.TokenHash("new-token-example")
	s.srv.creds.Apply(withMediators(s.cfg, m))
	forwarded := 0
	h := s.srv.forwardGuarded(s.srv.mediatorAuth(nil), func(w http.ResponseWriter, r *http.Request) { forwarded++ })
	req := httptest.NewRequest("POST", "/v1/entries", nil)
	req.Header.Set("Authorization", "Bearer "+s.token)
	h.ServeHTTP(httptest.NewRecorder(), req)
	_, b := apitest.GetBody(t, s.url+"/metrics")
	if forwarded != 1 || strings.Contains(string(b), "ledgerd_previous_token_requests_total{") {
		t.Errorf("forwarded %d times; metrics:\n%s", forwarded, b)
	}
	if resp, _ := s.post(t, s.token, apitest.AppendBody(1)); resp.StatusCode != http.StatusCreated {
		t.Fatalf("append with the previous token: %d", resp.StatusCode)
	}
	if _, b := apitest.GetBody(t, s.url+"/metrics"); !strings.Contains(string(b), "ledgerd_previous_token_requests_total{mediator=\"local\"} 1\n") {
		t.Errorf("the sequencer's count:\n%s", b)
	}
}
