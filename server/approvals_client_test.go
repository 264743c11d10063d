package server

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/decisionledger/ledger/approval/preview"
	"github.com/decisionledger/ledger/client"
	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/config"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/internal/apitest"
	"github.com/decisionledger/ledger/internal/referencecalls"
	"github.com/decisionledger/ledger/ledger"
)

// The client's approval calls (package client, approvals.go) against a
// real ledgerd with approvals on; the verdicts are appended to its ledger
// directly, as the approver's page does.

// approvalsServer is a ledgerd with the reference catalog and policies
// and approvals on (pending 1h, execution 10m), its approval_config
// published.
func approvalsServer(t *testing.T) *testServer {
	t.Helper()
	return approvalsServerWith(t, nil)
}

// approvalsServerWith is approvalsServer with its approvals config
// changed by change, if set.
func approvalsServerWith(t *testing.T, change func(*config.ApprovalsConfig)) *testServer {
	t.Helper()
	s := startServerWith(t, func(c *config.Config) {
		c.CatalogDir, c.PolicyDir = apitest.CorpusDir, apitest.ReferencePolicies
		c.Approvals = &config.ApprovalsConfig{PendingTTL: "1h", ExecutionTTL: "10m"}
		if change != nil {
			change(c.Approvals)
		}
	})
	if s.srv.appr == nil {
		t.Fatal("the test server has no approvals state")
	}
	if err := s.srv.appr.PublishConfig(t.Context(), s.l, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	return s
}

// needsApprovalCall is a reference call the reference policies decide
// needs_approval.
func needsApprovalCall(t *testing.T) referencecalls.Call {
	t.Helper()
	for _, c := range referencecalls.Table() {
		if c.Decision == entry.NeedsApproval {
			return c
		}
	}
	t.Fatal("no needs_approval call in the reference table")
	return referencecalls.Call{}
}

// appendVerdict records a person's verdict on id in the ledger, as the
// approver's page does after showing the preview whose digest is shown.
func appendVerdict(t *testing.T, s *testServer, id, shown commit.Digest, v entry.Verdict) uint64 {
	t.Helper()
	r, err := s.l.Append(context.Background(), ledger.Record{Kind: entry.KindApproval, ApprovalID: id,
		Approver: "alice", Verdict: v, PreviewDigest: shown})
	if err != nil {
		t.Fatalf("verdict %s: %v", v, err)
	}
	return r.Index
}

func wantAPIError(t *testing.T, what string, err error, status int, code, term string) {
	t.Helper()
	var apiErr *client.Error
	if !errors.As(err, &apiErr) || apiErr.Status != status || apiErr.Code != code || apiErr.Term != term {
		t.Errorf("%s: %v, want %d %s (term %q)", what, err, status, code, term)
	}
}

// A needs_approval decision with a preview opens an approval the client
// verifies; the client waits for the verdict (appended while it polls),
// consumes with the request's terms (refused before the verdict, with
// other terms, and twice; an idempotent retry answers the first
// consumption), and reports the outcome; the server's account follows
// each step.
func TestClientApprovalLifecycle(t *testing.T) {
	s := approvalsServer(t)
	ctx := context.Background()
	c, err := client.New(s.url, s.token, s.key.VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	call := needsApprovalCall(t)
	req := decideRequest(t, call)
	doc := `{"to":"carol@example.org","subject":"Q3 figures","authorization":"Bearer abcdefghijklmnopqrstuvwxyz012345"}`
	req.Preview = json.RawMessage(doc)
	rendered, err := preview.Render([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}

	d, err := c.DecideIdempotent(ctx, "mail-1", req)
	if err != nil {
		t.Fatal(err)
	}
	if d.Decision != entry.NeedsApproval || d.Approval == nil || d.Replayed {
		t.Fatalf("%s: %+v, want needs_approval with an approval", call.Name, d)
	}
	// A retry answers the same approval.
	if again, err := c.DecideIdempotent(ctx, "mail-1", req); err != nil || !again.Replayed || again.Approval == nil || *again.Approval != *d.Approval {
		t.Errorf("a retry: %+v %v, want the first approval, replayed", again, err)
	}
	id := d.Approval.ID
	if h, _ := d.Entry.Hash(); id != h || d.Approval.PreviewDigest != rendered.Digest ||
		!d.Approval.PendingDeadline.Equal(d.Entry.Time.Add(time.Hour)) {
		t.Errorf("approval %+v: want id %s, preview %s, deadline %s", d.Approval, h, rendered.Digest, d.Entry.Time.Add(time.Hour))
	}
	if st, err := c.Approval(ctx, id); err != nil || st.State != client.StatePending || st.Request != d.Index ||
		!st.RequestTime.Equal(d.Entry.Time) || !st.PendingDeadline.Equal(d.Approval.PendingDeadline) ||
		st.Mediator != d.Entry.Mediator || st.Action != call.Action || st.Principal != call.Principal ||
		!st.Params.Equal(req.Params) || st.Verdict != "" || st.Approver != "" {
		t.Errorf("pending: %+v %v", st, err)
	}

	terms := client.Terms{Action: req.Action, Principal: req.Principal, Params: req.Params}
	_, err = c.Consume(ctx, id, terms)
	wantAPIError(t, "consume before a verdict", err, 409, "approval_pending", "")

	// The verdict comes while the client waits: once it has polled twice.
	polls := make(chan struct{}, 64)
	c.HTTP = &http.Client{Transport: pollCounter{http.DefaultTransport, "/v1/approvals/" + id.String(), polls}}
	verdict := make(chan error, 1)
	go func() {
		for range 2 {
			select {
			case <-polls:
			case <-time.After(10 * time.Second):
				verdict <- errors.New("the client did not poll")
				return
			}
		}
		_, err := s.l.Append(ctx, ledger.Record{Kind: entry.KindApproval, ApprovalID: id,
			Approver: "alice", Verdict: entry.Approve, PreviewDigest: d.Approval.PreviewDigest})
		verdict <- err
	}()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, err := c.WaitApproval(wctx, id, 10*time.Millisecond)
	if err := <-verdict; err != nil {
		t.Fatalf("verdict: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if st.State != client.StateApproved || st.VerdictEntry == nil || st.VerdictEntry.Approver != "alice" ||
		st.Approver != "alice" || st.Verdict != entry.Approve || st.VerdictIndex != st.VerdictEntry.Index ||
		st.VerdictEntry.PreviewDigest != rendered.Digest ||
		!st.ExecutionDeadline.Equal(st.VerdictEntry.Time.Add(10*time.Minute)) {
		t.Fatalf("approved: %+v", st)
	}

	other := terms
	other.Principal = "agent:example-9"
	_, err = c.Consume(ctx, id, other)
	wantAPIError(t, "another principal", err, 409, "approval_mismatch", "principal")
	other = terms
	other.Params.Size++
	_, err = c.Consume(ctx, id, other)
	wantAPIError(t, "another size", err, 409, "approval_digest_mismatch", "params_size")

	consumed, err := c.ConsumeIdempotent(ctx, "consume-mail-1", id, terms)
	if err != nil {
		t.Fatal(err)
	}
	if consumed.Replayed || consumed.Request != d.Index || consumed.Entry.ApprovalID != id || consumed.Entry.Mediator != d.Entry.Mediator {
		t.Errorf("consumed: %+v", consumed)
	}
	again, err := c.ConsumeIdempotent(ctx, "consume-mail-1", id, terms)
	if err != nil || !again.Replayed || again.Index != consumed.Index {
		t.Errorf("an idempotent retry: %+v %v, want the first consumption, replayed", again, err)
	}
	_, err = c.Consume(ctx, id, terms)
	wantAPIError(t, "a second consumption", err, 409, "approval_consumed", "")

	out, err := c.Outcome(ctx, id, consumed.Index, entry.Succeeded, "op-7d3a")
	if err != nil {
		t.Fatal(err)
	}
	if out.Entry.Kind != entry.KindOutcome || out.Entry.Consumption != consumed.Index || out.Entry.OperationID != "op-7d3a" {
		t.Errorf("outcome: %+v", out.Entry)
	}
	_, err = c.Outcome(ctx, id, consumed.Index, entry.Failed, "")
	wantAPIError(t, "an outcome after a final one", err, 409, "outcome_final", "")
	_, err = c.Outcome(ctx, id, d.Index, entry.Succeeded, "")
	wantAPIError(t, "an outcome of no consumption", err, 404, "consumption_not_found", "")

	st, err = c.WaitApproval(ctx, id, time.Millisecond)
	if err != nil || st.State != client.StateConsumed || st.Consumption != consumed.Index ||
		st.Outcome != entry.Succeeded || st.OutcomeIndex != out.Index || st.VerdictEntry == nil {
		t.Errorf("consumed: %+v %v", st, err)
	}
}

// A denied approval: WaitApproval gets the signed deny, Consume is
// refused. An append (a mediator's own needs_approval decision) with a
// preview opens an approval too; an allow with one is refused.
func TestClientApprovalDenied(t *testing.T) {
	s := approvalsServer(t)
	ctx := context.Background()
	c, _ := client.New(s.url, s.token, s.key.VerifierKey())
	req := decideRequest(t, needsApprovalCall(t))
	r, err := c.Append(ctx, client.Decision{Principal: req.Principal, Action: req.Action, Decision: entry.NeedsApproval,
		Policies: []string{"example.review"}, Params: req.Params, Tiers: req.Tiers, Attributes: req.Attributes,
		Preview: json.RawMessage(`["a list","is a preview too"]`)})
	if err != nil {
		t.Fatal(err)
	}
	if r.Approval == nil {
		t.Fatal("an appended needs_approval decision with a preview opened no approval")
	}
	id := r.Approval.ID
	at := appendVerdict(t, s, id, r.Approval.PreviewDigest, entry.Reject)
	st, err := c.WaitApproval(ctx, id, time.Millisecond)
	if err != nil || st.State != client.StateDenied || st.VerdictEntry == nil || st.VerdictEntry.Index != at || st.VerdictEntry.Verdict != entry.Reject {
		t.Errorf("denied: %+v %v", st, err)
	}
	_, err = c.Consume(ctx, id, client.Terms{Action: req.Action, Principal: req.Principal, Params: req.Params})
	wantAPIError(t, "consume a denied approval", err, 409, "approval_denied", "")

	_, err = c.Append(ctx, client.Decision{Principal: req.Principal, Action: req.Action, Decision: entry.Allow,
		Policies: []string{"example.allow"}, Params: req.Params, Tiers: req.Tiers, Attributes: req.Attributes,
		Preview: json.RawMessage(`{}`)})
	wantAPIError(t, "an allow with a preview", err, 400, "invalid_request", "")

	_, err = c.Approval(ctx, commit.Digest{1})
	wantAPIError(t, "an unknown approval", err, 404, "approval_not_found", "")
}

// Without approvals: the approval endpoints answer approvals_off, a
// preview is refused, and a needs_approval decision without one opens
// nothing (no Approval, no error).
func TestClientApprovalsOff(t *testing.T) {
	s := policyServer(t, apitest.ReferencePolicies)
	ctx := context.Background()
	c, _ := client.New(s.url, s.token, s.key.VerifierKey())
	req := decideRequest(t, needsApprovalCall(t))
	d, err := c.Decide(ctx, req)
	if err != nil || d.Decision != entry.NeedsApproval || d.Approval != nil {
		t.Errorf("needs_approval without approvals: %+v %v", d, err)
	}
	h, _ := d.Entry.Hash()
	_, err = c.Approval(ctx, h)
	wantAPIError(t, "GET an approval", err, 404, "approvals_off", "")
	_, err = c.WaitApproval(ctx, h, time.Millisecond)
	wantAPIError(t, "wait for an approval", err, 404, "approvals_off", "")
	req.Preview = json.RawMessage(`{"to":"carol@example.org"}`)
	_, err = c.Decide(ctx, req)
	wantAPIError(t, "a preview", err, 422, "approvals_off", "")
}

// pollCounter sends on polls for each request to path, without blocking.
type pollCounter struct {
	next  http.RoundTripper
	path  string
	polls chan<- struct{}
}

func (p pollCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Path == p.path {
		select {
		case p.polls <- struct{}{}:
		default:
		}
	}
	return p.next.RoundTrip(r)
}
