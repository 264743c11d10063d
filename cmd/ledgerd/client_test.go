package main

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/decisionledger/ledger/client"
	"github.com/decisionledger/ledger/ledger"
)

func testDecision(t *testing.T, i int) client.Decision {
	t.Helper()
	r := mustRecord(t, appendBody(i))
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
	h := (&server{cfg: s.cfg, l: s.l, log: slog.New(slog.DiscardHandler)}).routes()
	var calls atomic.Int32
	flaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch calls.Add(1) {
		case 1:
			w.Header().Set("Retry-After", "0")
			writeError(w, http.StatusTooManyRequests, "busy", "retry")
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
