package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/decisionledger/ledger/client"
	"github.com/decisionledger/ledger/config"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/internal/apitest"
	"github.com/decisionledger/ledger/internal/referencecalls"
	"github.com/decisionledger/ledger/ledger"
)

func testDecision(t *testing.T, i int) client.Decision {
	t.Helper()
	r := apitest.Record(t, apitest.AppendBody(i))
	return client.Decision{Principal: r.Principal, Action: r.Action, Decision: r.Decision,
		Policies: r.Policies, Params: r.Params, Tiers: r.Tiers, Attributes: r.Attributes}
}

// The client appends, verifies receipts, checkpoints and proofs against a
// real server.
func TestClient(t *testing.T) {
	s := startServer(t)
	ctx := context.Background()
	c, err := client.New(s.url, s.token, s.key.VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	var receipts []*client.Receipt
	for i := range 5 {
		r, err := c.Append(ctx, testDecision(t, i))
		if err != nil {
			t.Fatal(err)
		}
		receipts = append(receipts, r)
	}
	s.l.Publish(ctx)
	older, _, err := c.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range receipts {
		if err := c.VerifyInclusion(ctx, r, older); err != nil {
			t.Fatalf("inclusion of %d: %v", r.Index, err)
		}
	}
	c.Append(ctx, testDecision(t, 9))
	s.l.Publish(ctx)
	newer, _, err := c.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.VerifyConsistency(ctx, older, newer); err != nil {
		t.Fatalf("consistency: %v", err)
	}
	// A refusal is returned at once, typed.
	bad := testDecision(t, 10)
	bad.Decision = "maybe"
	var apiErr *client.Error
	if _, err := c.Append(ctx, bad); !errors.As(err, &apiErr) || apiErr.Code != "invalid_record" {
		t.Fatalf("bad decision: %v", err)
	}
	// A client trusting another key refuses the server's answers.
	_, otherV, _ := ledger.GenerateKey("ledger.localhost/log")
	other, _ := client.New(s.url, s.token, otherV)
	if _, err := other.Append(ctx, testDecision(t, 11)); !errors.Is(err, client.ErrUnverified) {
		t.Fatalf("receipt under another key: %v", err)
	}
}

// Retries after 429 and lost answers carry one idempotency key: the entry
// is appended once.
func TestClientRetries(t *testing.T) {
	s := startServer(t)
	h := newServer(t, s.cfg, s.l, slog.New(slog.DiscardHandler), nil).Handler()
	var calls atomic.Int32
	flaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch calls.Add(1) {
		case 1:
			w.Header().Set("Retry-After", "0")
			WriteError(w, http.StatusTooManyRequests, "busy", "retry")
		case 2:
			// The append happens, but the answer is lost.
			h.ServeHTTP(httptest.NewRecorder(), r)
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			h.ServeHTTP(w, r)
		}
	}))
	defer flaky.Close()
	c, _ := client.New(flaky.URL, s.token, s.key.VerifierKey())
	c.Backoff = time.Millisecond
	r, err := c.Append(context.Background(), testDecision(t, 1))
	if err != nil {
		t.Fatal(err)
	}
	if !r.Replayed || s.l.Size() != 1 || calls.Load() != 3 {
		t.Fatalf("replayed %v, size %d, calls %d; want true, 1, 3", r.Replayed, s.l.Size(), calls.Load())
	}
}

// decideRequest is the client request of a reference call.
func decideRequest(t *testing.T, c referencecalls.Call) client.Request {
	t.Helper()
	res := apitest.MinimizeCall(t, c)
	return client.Request{Principal: c.Principal, Action: c.Action, Params: res.Params, Tiers: res.Tiers, Attributes: res.Attributes}
}

// The client's Decide gets the reference table's decisions, verified; a
// retry with DecideIdempotent after a reload gets the first decision,
// marked Replayed; an answer whose decision, ids or set is not its
// entry's is refused as unverified; a ledger without policies refuses
// with no_policies.
func TestClientDecide(t *testing.T) {
	dir := apitest.CopyPolicies(t)
	s := policyServer(t, dir)
	ctx := context.Background()
	c, err := client.New(s.url, s.token, s.key.VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	for _, call := range referencecalls.Table()[:12] {
		d, err := c.Decide(ctx, decideRequest(t, call))
		if err != nil {
			t.Fatalf("%s: %v", call.Name, err)
		}
		if d.Decision != call.Decision || !slices.Equal(d.Policies, call.Determining) || d.Replayed ||
			d.PolicySet != s.srv.pol.Current().Digest() || d.Entry.Decision != call.Decision {
			t.Errorf("%s: %+v, want %s %v", call.Name, d, call.Decision, call.Determining)
		}
	}
	pay := decideRequest(t, referencecalls.Table()[0])
	first, err := c.DecideIdempotent(ctx, "pay-1", pay)
	if err != nil || first.Decision != entry.Allow {
		t.Fatalf("first: %+v %v", first, err)
	}
	os.WriteFile(filepath.Join(dir, "freeze.cedar"), []byte(apitest.DenyAllPayments), 0o600)
	if err := s.srv.pol.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	again, err := c.DecideIdempotent(ctx, "pay-1", pay)
	if err != nil || !again.Replayed || again.Decision != entry.Allow || again.PolicySet != first.PolicySet || again.Index != first.Index {
		t.Errorf("retry after a reload: %+v %v, want the first decision, replayed", again, err)
	}
	if d, err := c.Decide(ctx, pay); err != nil || d.Decision != entry.Deny {
		t.Errorf("a new decision after the reload: %+v %v, want deny", d, err)
	}

	// A server that changes the answer, not the signed entry (internal
	// mail: allow by email.allow-internal).
	otherSet := regexp.MustCompile(`"policy_set":"sha256:[0-9a-f]{64}"`)
	for _, lie := range []struct {
		name string
		edit func(answer string) string // the answer's members come first
	}{
		{"another decision", func(a string) string { return strings.Replace(a, `"decision":"allow"`, `"decision":"deny"`, 1) }},
		{"other ids", func(a string) string {
			return strings.Replace(a, `"policies":["email.allow-internal"]`, `"policies":[]`, 1)
		}},
		{"another set", func(a string) string {
			at := otherSet.FindStringIndex(a)
			return a[:at[0]] + `"policy_set":"sha256:` + strings.Repeat("0", 64) + `"` + a[at[1]:]
		}},
	} {
		proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			req, _ := http.NewRequest(r.Method, s.url+r.URL.RequestURI(), r.Body)
			req.Header = r.Header
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			w.WriteHeader(resp.StatusCode)
			io.WriteString(w, lie.edit(string(b)))
		}))
		liar, _ := client.New(proxy.URL, s.token, s.key.VerifierKey())
		liar.MaxAttempts = 1
		if _, err := liar.DecideIdempotent(ctx, "lie-"+strings.ReplaceAll(lie.name, " ", "-"), decideRequest(t, referencecalls.Table()[10])); !errors.Is(err, client.ErrUnverified) {
			t.Errorf("an answer with %s: %v, want ErrUnverified", lie.name, err)
		}
		proxy.Close()
	}

	plain := startServerWith(t, func(c *config.Config) { c.CatalogDir = apitest.CorpusDir })
	pc, _ := client.New(plain.url, plain.token, plain.key.VerifierKey())
	var apiErr *client.Error
	if _, err := pc.Decide(ctx, pay); !errors.As(err, &apiErr) || apiErr.Code != "no_policies" || apiErr.Status != 404 {
		t.Errorf("without policies: %v", err)
	}
}
