package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/decisionledger/ledger/approval/preview"
	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
)

// OpenedApproval is the approval a needs_approval decision opened
// (docs/approvals.md), as the answer to the decision names it. Every
// member is checked against the signed entry before a Receipt carries it
// (checkOpened); see there for what the client cannot check.
type OpenedApproval struct {
	// ID is the approval's id: the entry hash of the decision's entry.
	ID commit.Digest
	// PendingDeadline is when the approval expires without a verdict: a
	// verdict must be recorded strictly before it.
	PendingDeadline time.Time
	// PreviewDigest is the digest of the preview approvers are shown; the
	// verdict entry records the digest of the one its approver saw.
	PreviewDigest commit.Digest
}

// renderPreview renders a preview document as ledgerd will
// (preview.Render: redacted, then bounded) and returns its digest, or nil
// if there is no document. A document ledgerd would refuse is refused
// here, before anything is sent.
func renderPreview(doc json.RawMessage) (*commit.Digest, error) {
	if doc == nil {
		return nil, nil
	}
	p, err := preview.Render(doc)
	if err != nil {
		return nil, fmt.Errorf("client: preview: %w", err)
	}
	return &p.Digest, nil
}

// checkOpened checks the approval member raw of the answer to a decision
// whose verified entry is e; shown is the digest of the preview sent with
// it, or nil if none was. The member, when present, must name the
// approval e opened: e is a needs_approval decision, the id is e's entry
// hash, the pending deadline is after e's time (the deadline is e's time
// plus the ledger's pending TTL, which the client does not know, and
// which is at least a millisecond), and, if a preview was sent, its
// digest is that of the preview rendered from it. The digest of a
// default preview (none sent) is not checked: ledgerd makes that preview
// from the entry by rules of its own. An absent member is accepted unless
// a preview was sent with a decision that is needs_approval: ledgerd
// takes a preview only with approvals on, and with approvals on every
// needs_approval decision opens an approval.
func checkOpened(raw json.RawMessage, e *entry.Entry, shown *commit.Digest) (*OpenedApproval, error) {
	if raw == nil {
		if shown != nil && e.Decision == entry.NeedsApproval {
			return nil, fmt.Errorf("%w: a needs_approval decision sent with a preview opened no approval", ErrUnverified)
		}
		return nil, nil
	}
	if e.Decision != entry.NeedsApproval {
		return nil, fmt.Errorf("%w: a %s decision names an approval", ErrUnverified, e.Decision)
	}
	var a struct {
		ID              commit.Digest `json:"id"`
		PendingDeadline time.Time     `json:"pending_deadline"`
		PreviewDigest   commit.Digest `json:"preview_digest"`
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, fmt.Errorf("%w: malformed approval: %w", ErrUnverified, err)
	}
	h, err := e.Hash()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnverified, err)
	}
	switch {
	case a.ID != h:
		return nil, fmt.Errorf("%w: the approval's id is not the entry hash of the decision", ErrUnverified)
	case !a.PendingDeadline.After(e.Time):
		return nil, fmt.Errorf("%w: the approval's pending deadline is not after the decision's time", ErrUnverified)
	case shown != nil && a.PreviewDigest != *shown:
		return nil, fmt.Errorf("%w: the approval's preview digest is not that of the preview sent", ErrUnverified)
	case a.PreviewDigest == (commit.Digest{}):
		return nil, fmt.Errorf("%w: the approval has no preview digest", ErrUnverified)
	}
	return &OpenedApproval{ID: a.ID, PendingDeadline: a.PendingDeadline.UTC(), PreviewDigest: a.PreviewDigest}, nil
}

// Terms are the terms of the action an approval permits: the request's
// action, principal and parameter commitment, which a consumption must
// repeat exactly (the mediator is the one the token authenticates, and
// must be the request's).
type Terms struct {
	Action    string
	Principal string
	Params    commit.Commitment
}

// Consumed is the verified receipt of a consumption: the approval is
// spent, and the action may be performed once, now.
type Consumed struct {
	Receipt
	// Request is the index of the needs_approval decision that opened the
	// approval (the consumption entry's request).
	Request uint64
}

// Consume spends the approval id (POST /v1/approvals/{id}/consume)
// before the mediator performs the action on terms t, and returns the
// verified receipt of the consumption. It retries as Append does, with
// one random idempotency key, so a retry after a lost answer never
// consumes twice and answers with the first consumption. A refusal of the
// lifecycle is an *Error: 404 approval_not_found; 409 approval_pending,
// approval_denied, approval_expired, approval_consumed, and
// approval_mismatch or approval_digest_mismatch with the differing term
// in Term. The receipt is checked as checkConsumed says.
func (c *Client) Consume(ctx context.Context, id commit.Digest, t Terms) (*Consumed, error) {
	keyBytes := make([]byte, 16)
	rand.Read(keyBytes)
	return c.ConsumeIdempotent(ctx, hex.EncodeToString(keyBytes), id, t)
}

// ConsumeIdempotent is Consume with the caller's idempotency key, which
// makes the consumption safe to repeat beyond one call (after a crash
// between the consumption and the action, say): while the key names the
// consumption the same mediator made of id with the same terms, the
// ledger appends nothing and answers with it (Replayed).
func (c *Client) ConsumeIdempotent(ctx context.Context, idempotencyKey string, id commit.Digest, t Terms) (*Consumed, error) {
	if err := checkKey(idempotencyKey); err != nil {
		return nil, err
	}
	body, err := json.Marshal(map[string]any{
		"action": t.Action, "principal": t.Principal, "params_digest": t.Params.DigestText(), "params_size": t.Params.Size,
	})
	if err != nil {
		return nil, err
	}
	status, b, err := c.post(ctx, "consume", "/v1/approvals/"+id.String()+"/consume", idempotencyKey, body)
	if err != nil {
		return nil, err
	}
	return c.checkConsumed(b, id, t, status == http.StatusOK)
}

// checkConsumed verifies a consumption receipt: the entry is strictly
// valid, signed by the ledger's key, at the index claimed, a version 4
// consumption of approval id, and records exactly the terms t. Its
// mediator is present (strict parsing requires it) but not compared: the
// client does not know the name its token authenticates.
func (c *Client) checkConsumed(body []byte, id commit.Digest, t Terms, replayed bool) (*Consumed, error) {
	e, raw, index, err := c.receiptEntry(body)
	if err != nil {
		return nil, err
	}
	switch {
	case e.Version() != entry.Version4 || e.Kind != entry.KindConsumption:
		return nil, fmt.Errorf("%w: the entry is not a consumption (version 4, kind consumption)", ErrUnverified)
	case e.ApprovalID != id:
		return nil, fmt.Errorf("%w: the consumption spends another approval", ErrUnverified)
	case e.Action != t.Action || e.Principal != t.Principal || !e.Params.Equal(t.Params):
		return nil, fmt.Errorf("%w: the consumption does not record the terms sent", ErrUnverified)
	}
	return &Consumed{Receipt: Receipt{Index: index, Entry: e, Raw: raw, Replayed: replayed}, Request: e.Request}, nil
}

// receiptEntry reads a receipt ({"index", "entry", ...}) and returns its
// entry, parsed strictly, signed by the ledger's key and at the index
// claimed, with its bytes and index.
func (c *Client) receiptEntry(body []byte) (*entry.Entry, []byte, uint64, error) {
	var r struct {
		Index uint64          `json:"index"`
		Entry json.RawMessage `json:"entry"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, nil, 0, fmt.Errorf("%w: malformed receipt", ErrUnverified)
	}
	e, err := c.signedEntry(r.Entry, r.Index)
	if err != nil {
		return nil, nil, 0, err
	}
	return e, []byte(r.Entry), r.Index, nil
}

// Outcome reports what became of the action the consumption at index
// consumption (of approval id) permitted (POST
// /v1/approvals/{id}/outcome): result, and the downstream system's id for
// the operation, if any (an identifier; "" for none). It returns the
// verified receipt: a version 4 outcome entry, signed by the ledger's
// key, at the index claimed, recording exactly id, consumption, result
// and operationID. It retries as Append does, with one random
// idempotency key. Refusals are *Error: 404 consumption_not_found, 409
// approval_mismatch (Term approval or mediator), 409 outcome_final.
func (c *Client) Outcome(ctx context.Context, id commit.Digest, consumption uint64, result entry.Result, operationID string) (*Receipt, error) {
	keyBytes := make([]byte, 16)
	rand.Read(keyBytes)
	return c.OutcomeIdempotent(ctx, hex.EncodeToString(keyBytes), id, consumption, result, operationID)
}

// OutcomeIdempotent is Outcome with the caller's idempotency key.
func (c *Client) OutcomeIdempotent(ctx context.Context, idempotencyKey string, id commit.Digest, consumption uint64, result entry.Result, operationID string) (*Receipt, error) {
	if err := checkKey(idempotencyKey); err != nil {
		return nil, err
	}
	req := map[string]any{"consumption": consumption}
	return c.postOutcome(ctx, "/v1/approvals/"+id.String()+"/outcome", idempotencyKey, req, result, operationID, func(e *entry.Entry) error {
		switch {
		case e.Version() != entry.Version4 || e.Kind != entry.KindOutcome:
			return fmt.Errorf("%w: the entry is not an outcome (version 4, kind outcome)", ErrUnverified)
		case e.ApprovalID != id || e.Consumption != consumption:
			return fmt.Errorf("%w: the outcome reports on another approval or consumption", ErrUnverified)
		}
		return nil
	})
}

// postOutcome posts an outcome body (req with result and operationID
// added) to path and returns the verified receipt: a signed entry that
// check accepts and that records the result sent.
func (c *Client) postOutcome(ctx context.Context, path, idempotencyKey string, req map[string]any, result entry.Result, operationID string, check func(*entry.Entry) error) (*Receipt, error) {
	req["result"] = result
	if operationID != "" {
		req["operation_id"] = operationID
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	status, b, err := c.post(ctx, "outcome", path, idempotencyKey, body)
	if err != nil {
		return nil, err
	}
	e, raw, index, err := c.receiptEntry(b)
	if err != nil {
		return nil, err
	}
	if err := check(e); err != nil {
		return nil, err
	}
	if e.Result != result || e.OperationID != operationID {
		return nil, fmt.Errorf("%w: the outcome does not record the result sent", ErrUnverified)
	}
	return &Receipt{Index: index, Entry: e, Raw: raw, Replayed: status == http.StatusOK}, nil
}

// State is an approval's state, judged by ledgerd at the time it answers.
type State string

const (
	// StatePending: awaiting a verdict, before the pending deadline.
	StatePending State = "pending"
	// StateApproved: approved, not yet consumed, before the execution
	// deadline.
	StateApproved State = "approved"
	// StateDenied: denied. Final.
	StateDenied State = "denied"
	// StateExpired: no verdict before the pending deadline, or approved
	// and not consumed before the execution deadline. Final.
	StateExpired State = "expired"
	// StateConsumed: approved and spent by a consumption. Final.
	StateConsumed State = "consumed"
)

// ApprovalState is ledgerd's account of one approval (GET
// /v1/approvals/{id}). It is the server's view, not evidence: nothing in
// it is signed. The evidence is the log's entries — the request, the
// verdict, the consumption, the outcome — which Entry fetches and
// verifies by the indexes given here; WaitApproval does so for the
// verdict. Members without a value are zero.
type ApprovalState struct {
	ID          commit.Digest
	Request     uint64 // the index of the needs_approval decision
	RequestTime time.Time
	// The request's terms.
	Mediator, Principal, Action string
	Params                      commit.Commitment
	State                       State
	PendingDeadline             time.Time
	// Verdict, at index VerdictIndex, by Approver; empty until there is
	// one.
	Verdict      entry.Verdict
	VerdictIndex uint64
	Approver     string
	// ExecutionDeadline: after approve, a consumption must come strictly
	// before it.
	ExecutionDeadline time.Time
	// Consumption is the index of the consumption that spent the
	// approval; 0 if none.
	Consumption uint64
	// Outcome is the latest outcome reported, at index OutcomeIndex.
	Outcome      entry.Result
	OutcomeIndex uint64

	// VerdictEntry is the verdict's entry, verified (signed by the
	// ledger's key, at VerdictIndex, an approval entry of this approval
	// with this verdict). Set by WaitApproval only.
	VerdictEntry *entry.Entry
}

// Approval returns ledgerd's account of the approval id: see
// ApprovalState for what it is worth. An unknown id is an *Error, 404
// approval_not_found; a ledger without approvals answers 404
// approvals_off. The answer must name id and a known state.
func (c *Client) Approval(ctx context.Context, id commit.Digest) (*ApprovalState, error) {
	b, err := c.get(ctx, "/v1/approvals/"+id.String())
	if err != nil {
		return nil, err
	}
	var a struct {
		ID                commit.Digest `json:"id"`
		Request           uint64        `json:"request"`
		RequestTime       time.Time     `json:"request_time"`
		Mediator          string        `json:"mediator"`
		Principal         string        `json:"principal"`
		Action            string        `json:"action"`
		ParamsDigest      string        `json:"params_digest"`
		ParamsSize        int           `json:"params_size"`
		State             State         `json:"state"`
		PendingDeadline   time.Time     `json:"pending_deadline"`
		Verdict           entry.Verdict `json:"verdict"`
		VerdictIndex      uint64        `json:"verdict_index"`
		Approver          string        `json:"approver"`
		ExecutionDeadline time.Time     `json:"execution_deadline"`
		Consumption       uint64        `json:"consumption"`
		Outcome           entry.Result  `json:"outcome"`
		OutcomeIndex      uint64        `json:"outcome_index"`
	}
	if err := json.Unmarshal(b, &a); err != nil {
		return nil, fmt.Errorf("%w: malformed approval: %w", ErrUnverified, err)
	}
	if a.ID != id {
		return nil, fmt.Errorf("%w: asked for approval %s, got %s", ErrUnverified, id, a.ID)
	}
	digest, hiding, err := commit.ParseParamsDigest(a.ParamsDigest)
	if err != nil {
		return nil, fmt.Errorf("%w: malformed approval: params_digest: %w", ErrUnverified, err)
	}
	switch a.State {
	case StatePending, StateApproved, StateDenied, StateExpired, StateConsumed:
	default:
		return nil, fmt.Errorf("%w: unknown approval state %q", ErrUnverified, a.State)
	}
	return &ApprovalState{
		ID: a.ID, Request: a.Request, RequestTime: a.RequestTime,
		Mediator: a.Mediator, Principal: a.Principal, Action: a.Action,
		Params: commit.Commitment{Digest: digest, Size: a.ParamsSize, Hiding: hiding},
		State:  a.State, PendingDeadline: a.PendingDeadline,
		Verdict: a.Verdict, VerdictIndex: a.VerdictIndex, Approver: a.Approver,
		ExecutionDeadline: a.ExecutionDeadline, Consumption: a.Consumption,
		Outcome: a.Outcome, OutcomeIndex: a.OutcomeIndex,
	}, nil
}

// WaitApproval polls Approval every poll (default 1 s) until the approval
// id is no longer pending or ctx ends, riding out network errors and 429
// and 503 answers. When the state has a verdict (approved, denied,
// consumed, or expired after approve) it fetches the verdict's entry at
// VerdictIndex and verifies it (Entry: signed by the ledger's key, at
// that index) and that it is a version 4 approval entry of id whose
// verdict is the state's — consumed and approved need approve — and sets
// VerdictEntry. So an approve is the approver's signed verdict, not the
// server's word; a state without a verdict (expired, or pending until
// ctx ends) stays the server's word. ledgerd's account includes a
// verdict as soon as it is sequenced, and serves its entry once it is
// durable, a moment later: until the entry is served (404), WaitApproval
// polls on.
func (c *Client) WaitApproval(ctx context.Context, id commit.Digest, poll time.Duration) (*ApprovalState, error) {
	if poll <= 0 {
		poll = time.Second
	}
	for {
		st, err := c.Approval(ctx, id)
		if err == nil && st.State != StatePending {
			st, err = c.checkVerdict(ctx, st)
			var apiErr *Error
			if err == nil || !(errors.As(err, &apiErr) && apiErr.Status == http.StatusNotFound) && !transient(err) {
				return st, err
			}
			// The verdict's entry is not served yet: poll again.
		} else if err != nil && !transient(err) {
			return nil, err
		}
		select {
		case <-time.After(poll):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// transient says a read's err may pass if the read is tried again: a
// network error, or a 429 or 503 answer; not the end of ctx, an answer
// that does not verify, or another refusal.
func transient(err error) bool {
	var apiErr *Error
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), errors.Is(err, ErrUnverified):
		return false
	case errors.As(err, &apiErr):
		return apiErr.Status == http.StatusTooManyRequests || apiErr.Status == http.StatusServiceUnavailable
	}
	return true
}

// checkVerdict fetches and verifies the verdict entry of a decided st, as
// WaitApproval says.
func (c *Client) checkVerdict(ctx context.Context, st *ApprovalState) (*ApprovalState, error) {
	want := st.Verdict
	switch st.State {
	case StateApproved, StateConsumed:
		if want != entry.Approve {
			return nil, fmt.Errorf("%w: an approval %s with the verdict %q", ErrUnverified, st.State, want)
		}
	case StateDenied:
		if want != entry.Reject {
			return nil, fmt.Errorf("%w: an approval denied with the verdict %q", ErrUnverified, want)
		}
	case StateExpired:
		if want == "" {
			return st, nil
		}
	}
	e, _, err := c.Entry(ctx, st.VerdictIndex)
	if err != nil {
		return nil, err
	}
	switch {
	case e.Version() != entry.Version4 || e.Kind != entry.KindApproval:
		return nil, fmt.Errorf("%w: entry %d is not a verdict (version 4, kind approval)", ErrUnverified, st.VerdictIndex)
	case e.ApprovalID != st.ID:
		return nil, fmt.Errorf("%w: entry %d is a verdict on another approval", ErrUnverified, st.VerdictIndex)
	case e.Verdict != want:
		return nil, fmt.Errorf("%w: entry %d records the verdict %s, not %s", ErrUnverified, st.VerdictIndex, e.Verdict, want)
	}
	st.VerdictEntry = e
	return st, nil
}
