package mcpgate

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/decisionledger/ledger/approval/preview"
	"github.com/decisionledger/ledger/client"
	"github.com/decisionledger/ledger/commit"
)

// approvals holds what the gateway keeps of the approvals its calls
// opened: the key that authenticates request states, the states used,
// and, per principal, tool and parameters, the approval a repeated call
// can consume. All of it is memory only: after a restart a repeated call
// opens a new approval, and a state from before is refused.
type approvals struct {
	key      []byte
	wait     time.Duration
	pageBase string

	mu      sync.Mutex
	used    map[string]time.Time // request-state nonces spent, until their deadline
	pending map[string]pendingApproval
}

type pendingApproval struct {
	id       commit.Digest
	deadline time.Time // the pending deadline; then an execution deadline we do not know
	// consumed is when a call consumed it, zero before. For
	// consumedWindow after, a call with the same terms is told so
	// rather than asking anew: retries of one act arriving together (an
	// agent's client retrying, 64 concurrent ones) must not each put a
	// new approval on the approvers' page.
	consumed    time.Time
	consumption uint64
}

// consumedWindow is how long a consumed approval answers repeated calls
// with its terms; after it, such a call asks anew.
const consumedWindow = time.Minute

// consumedApproval is a consumption the forwarded call is reported on.
type consumedApproval struct {
	id          commit.Digest
	consumption uint64
}

func newApprovals(cfg *Config) (*approvals, error) {
	a := &approvals{used: map[string]time.Time{}, pending: map[string]pendingApproval{}, pageBase: cfg.pageBase(),
		wait: 120 * time.Second}
	if cfg.Approvals == nil {
		return a, nil
	}
	var err error
	if a.wait, err = cfg.Approvals.wait(); err != nil {
		return nil, err
	}
	if f := cfg.Approvals.StateKeyFile; f != "" {
		b, err := readSecret("approvals.state_key_file", cfg.Path(f))
		if err != nil {
			return nil, err
		}
		k, err := hex.DecodeString(string(b))
		if err != nil || len(k) != 32 {
			return nil, errors.New("approvals.state_key_file: not 64 hex digits")
		}
		a.key = k
	} else {
		a.key = make([]byte, 32)
		rand.Read(a.key)
	}
	return a, nil
}

// pendingKey names a call's terms: a repeated call with the same terms
// may consume the approval the first one opened.
func pendingKey(c *call) string {
	return c.principal + "\x00" + c.tool + "\x00" + c.min.Params.DigestText() + fmt.Sprintf("\x00%d", c.min.Params.Size)
}

// pageURL is where a person decides the approval.
func (a *approvals) pageURL(id commit.Digest) string {
	return a.pageBase + "/approvals/" + id.String()
}

// requestState is what a state authenticates. It binds the retry to the
// principal, the tool, the parameter commitment and the approval, until a
// deadline, once.
type requestState struct {
	Version   int    `json:"v"`
	Principal string `json:"principal"`
	Tool      string `json:"tool"`
	Digest    string `json:"params_digest"`
	Size      int64  `json:"params_size"`
	Approval  string `json:"approval"`
	Deadline  int64  `json:"deadline_ms"`
	Nonce     string `json:"nonce"`
}

// stateDomain separates the state MAC from any other use of the key.
const stateDomain = "ledger-mcp/v1/request-state\n"

func (a *approvals) mac(payload []byte) []byte {
	m := hmac.New(sha256.New, a.key)
	m.Write([]byte(stateDomain))
	m.Write(payload)
	return m.Sum(nil)
}

// seal makes the requestState for a call and approval.
func (a *approvals) seal(c *call, id commit.Digest, deadline time.Time) string {
	nonce := make([]byte, 16)
	rand.Read(nonce)
	payload, _ := json.Marshal(requestState{Version: 1, Principal: c.principal, Tool: c.tool,
		Digest: c.min.Params.DigestText(), Size: int64(c.min.Params.Size), Approval: id.String(),
		Deadline: deadline.UnixMilli(), Nonce: hex.EncodeToString(nonce)})
	enc := base64.RawURLEncoding
	return enc.EncodeToString(payload) + "." + enc.EncodeToString(a.mac(payload))
}

// errState is a request state the gateway did not make, or made for
// something else; its text says which term, never a value.
type errState string

func (e errState) Error() string { return string(e) }

// open checks a state against the call retried and spends it.
func (a *approvals) open(state string, c *call, now time.Time) (commit.Digest, error) {
	enc := base64.RawURLEncoding
	p, m, ok := strings.Cut(state, ".")
	payload, err1 := enc.DecodeString(p)
	sum, err2 := enc.DecodeString(m)
	if !ok || err1 != nil || err2 != nil || !hmac.Equal(sum, a.mac(payload)) {
		return commit.Digest{}, errState("the request state is not one this gateway made")
	}
	var s requestState
	if err := json.Unmarshal(payload, &s); err != nil || s.Version != 1 {
		return commit.Digest{}, errState("the request state is not one this gateway made")
	}
	switch {
	case s.Principal != c.principal:
		return commit.Digest{}, errState("the request state was made for another principal")
	case s.Tool != c.tool:
		return commit.Digest{}, errState("the request state was made for another tool")
	case s.Digest != c.min.Params.DigestText() || s.Size != int64(c.min.Params.Size):
		return commit.Digest{}, errState("the arguments differ from those the approval was requested for")
	case now.UnixMilli() >= s.Deadline:
		return commit.Digest{}, errState("the request state has expired")
	}
	id, err := commit.ParseDigest(s.Approval)
	if err != nil {
		return commit.Digest{}, errState("the request state is not one this gateway made")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for n, d := range a.used {
		if now.After(d) {
			delete(a.used, n)
		}
	}
	if _, spent := a.used[s.Nonce]; spent {
		return commit.Digest{}, errState("the request state was used already")
	}
	a.used[s.Nonce] = time.UnixMilli(s.Deadline)
	return id, nil
}

func (a *approvals) remember(c *call, id commit.Digest, deadline time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := time.Now()
	for k, p := range a.pending {
		if now.After(p.deadline.Add(24 * time.Hour)) {
			delete(a.pending, k)
		}
	}
	a.pending[pendingKey(c)] = pendingApproval{id: id, deadline: deadline}
}

func (a *approvals) lookup(c *call) (pendingApproval, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	p, ok := a.pending[pendingKey(c)]
	if ok && !p.consumed.IsZero() && time.Since(p.consumed) >= consumedWindow {
		delete(a.pending, pendingKey(c))
		return pendingApproval{}, false
	}
	return p, ok
}

// markConsumed records that a call consumed id.
func (a *approvals) markConsumed(c *call, id commit.Digest, consumption uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if p, ok := a.pending[pendingKey(c)]; ok && p.id == id {
		p.consumed, p.consumption = time.Now(), consumption
		a.pending[pendingKey(c)] = p
	}
}

func (a *approvals) forget(c *call, id commit.Digest) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if p, ok := a.pending[pendingKey(c)]; ok && p.id == id {
		delete(a.pending, pendingKey(c))
	}
}

// previewDoc is the document approvers are shown: the tool and its raw
// arguments, redacted and bounded here as ledgerd will (preview.Render).
// An approver must see what will be done; the preview never enters the
// log, only its digest does.
func previewDoc(tool string, args []byte) (json.RawMessage, error) {
	doc, err := json.Marshal(map[string]any{"tool": tool, "arguments": json.RawMessage(args)})
	if err != nil {
		return nil, err
	}
	p, err := preview.Render(doc)
	if err != nil {
		return nil, err
	}
	return p.JSON, nil
}

// supportsURLElicitation says whether the agent's client can be sent to a
// URL: a multi round-trip retry (2026-07-28) or an elicitation request
// (earlier versions) that the client answers after showing it.
func supportsURLElicitation(req *mcp.CallToolRequest) bool {
	ip := req.Session.InitializeParams()
	return ip != nil && ip.Capabilities != nil && ip.Capabilities.Elicitation != nil && ip.Capabilities.Elicitation.URL != nil
}

// awaitApproval answers a needs_approval decision: the agent is sent to
// the page if its client can follow a URL, else the call waits (bounded)
// for a verdict.
func (g *Gateway) awaitApproval(ctx context.Context, c *call, req *mcp.CallToolRequest, d *client.Decided) *mcp.CallToolResult {
	a := g.approvals
	id := d.Approval.ID
	a.remember(c, id, d.Approval.PendingDeadline)
	g.log.Info("call needs approval", "tool", c.tool, "principal", c.principal, "index", d.Index, "approval", id.String(), "policies", d.Policies)
	if g.cfg.Approvals == nil {
		return refusal("%s: needs approval %s (entry %d; policies: %s); the gateway has no approvals configured, so the call is not forwarded",
			c.tool, id, d.Index, policyList(d.Policies))
	}
	if supportsURLElicitation(req) {
		deadline := time.Now().Add(a.wait + 10*time.Minute)
		if d.Approval.PendingDeadline.Before(deadline) {
			deadline = d.Approval.PendingDeadline
		}
		return &mcp.CallToolResult{
			InputRequests: mcp.InputRequestMap{"approval": &mcp.ElicitParams{
				Mode:          "url",
				Message:       fmt.Sprintf("%s needs a person's approval (policies: %s). Open the page to have it decided; the call goes ahead only once an approver has approved it there.", c.tool, policyList(d.Policies)),
				URL:           a.pageURL(id),
				ElicitationID: id.String(),
			}},
			RequestState: a.seal(c, id, deadline),
		}
	}
	return g.waitAndConsume(ctx, c, id)
}

// resume handles a retry that carries a request state: the state must be
// this gateway's, for these terms, unspent; the client's elicitation
// answer is read as nothing more than "the agent is back" — only a
// verdict on the page approves.
func (g *Gateway) resume(ctx context.Context, c *call, req *mcp.CallToolRequest) *mcp.CallToolResult {
	id, err := g.approvals.open(req.Params.RequestState, c, time.Now())
	if err != nil {
		g.metrics.add(g.metrics.refused, "request_state")
		g.log.Warn("call refused: request state", "tool", c.tool, "principal", c.principal, "problem", err.Error())
		return refusal("%s: refused, not forwarded: %v", c.tool, err)
	}
	// A person who declined or dismissed the page in the client is not
	// kept waiting; the approval stays open on the page.
	if r, ok := req.Params.InputResponses["approval"].(*mcp.ElicitResult); ok && r.Action != "accept" {
		g.metrics.add(g.metrics.refused, "approval_pending")
		return refusal("%s: not forwarded: the approval page was not followed (%s); approval %s stays open at %s until its deadline",
			c.tool, elicitAction(r.Action), id, g.approvals.pageURL(id))
	}
	return g.waitAndConsume(ctx, c, id)
}

// elicitAction names a client's elicitation answer for a refusal.
func elicitAction(a string) string {
	switch a {
	case "decline":
		return "declined"
	case "cancel":
		return "dismissed"
	}
	return "no answer"
}

// retryPending consumes the approval an earlier call with the same terms
// opened, if there is one; nil when the call needs a decision of its own.
func (g *Gateway) retryPending(ctx context.Context, c *call, req *mcp.CallToolRequest) *mcp.CallToolResult {
	p, ok := g.approvals.lookup(c)
	if !ok {
		return nil
	}
	id := p.id
	if !p.consumed.IsZero() {
		g.metrics.add(g.metrics.refused, "approval_consumed")
		return refusal("%s: refused, not forwarded: approval %s for these arguments was consumed (entry %d) moments ago by another call; the act was carried out once. Call again later to ask for a new approval.",
			c.tool, id, p.consumption)
	}
	st, err := g.ledger.Approval(ctx, id)
	if err != nil {
		var ce *client.Error
		if errors.As(err, &ce) && ce.Status == 404 {
			g.approvals.forget(c, id)
			return nil
		}
		g.metrics.add(g.metrics.refused, "ledger")
		return refusal("%s: refused, not forwarded: the ledger did not answer for approval %s (%s)", c.tool, id, ledgerErr(err))
	}
	switch st.State {
	case client.StatePending, client.StateApproved:
		return g.waitAndConsume(ctx, c, id)
	case client.StateConsumed:
		// Consumed by a call with these terms an instant ago (or by
		// another gateway): refused for consumedWindow like the others.
		g.approvals.markConsumed(c, id, st.Consumption)
		g.metrics.add(g.metrics.refused, "approval_consumed")
		return refusal("%s: refused, not forwarded: approval %s for these arguments was consumed (entry %d); the act was carried out once. Call again later to ask for a new approval.",
			c.tool, id, st.Consumption)
	}
	// Denied or expired: this call asks anew.
	g.approvals.forget(c, id)
	return nil
}

// waitAndConsume waits (bounded) for a verdict on id, then consumes the
// approval with the terms of the call as it is now and forwards it.
func (g *Gateway) waitAndConsume(ctx context.Context, c *call, id commit.Digest) *mcp.CallToolResult {
	wctx, cancel := context.WithTimeout(ctx, g.approvals.wait)
	st, err := g.ledger.WaitApproval(wctx, id, 250*time.Millisecond)
	cancel()
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		// The wait ran out: one last look, in case the verdict came as
		// it did, or the ledger was slow to serve it.
		lctx, cancel := context.WithTimeout(ctx, g.callTimeout)
		if last, lerr := g.ledger.Approval(lctx, id); lerr == nil && last.State != client.StatePending {
			st, err = g.ledger.WaitApproval(lctx, id, 250*time.Millisecond)
		}
		cancel()
	}
	page := g.approvals.pageURL(id)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			g.metrics.add(g.metrics.refused, "approval_pending")
			return refusal("%s: approval %s is still pending; a person decides it at %s. Call again with the same arguments once it is approved; until then nothing is forwarded.",
				c.tool, id, page)
		}
		g.metrics.add(g.metrics.refused, "ledger")
		return refusal("%s: refused, not forwarded: the ledger did not answer for approval %s (%s)", c.tool, id, ledgerErr(err))
	}
	switch st.State {
	case client.StateApproved:
	case client.StateDenied:
		g.approvals.forget(c, id)
		g.metrics.add(g.metrics.refused, "approval_denied")
		return refusal("%s: approval %s was denied by %s; not forwarded", c.tool, id, st.Approver)
	case client.StateConsumed:
		g.approvals.markConsumed(c, id, st.Consumption)
		g.metrics.add(g.metrics.refused, "approval_consumed")
		return refusal("%s: refused, not forwarded: approval %s for these arguments was consumed (entry %d); the act was carried out once. Call again later to ask for a new approval.",
			c.tool, id, st.Consumption)
	default:
		g.approvals.forget(c, id)
		g.metrics.add(g.metrics.refused, "approval_"+string(st.State))
		return refusal("%s: approval %s is %s; not forwarded", c.tool, id, st.State)
	}
	cctx, cancel := context.WithTimeout(ctx, g.callTimeout)
	cons, err := g.ledger.Consume(cctx, id, client.Terms{Action: c.tool, Principal: c.principal, Params: c.min.Params})
	cancel()
	if err != nil {
		g.metrics.add(g.metrics.refused, "consume")
		g.log.Warn("call refused: approval not consumed", "tool", c.tool, "principal", c.principal, "approval", id.String(), "err", ledgerErr(err))
		var ce *client.Error
		if errors.As(err, &ce) {
			msg := ce.Code
			if ce.Term != "" {
				msg += " (" + ce.Term + ")"
			}
			return refusal("%s: refused, not forwarded: the ledger did not let approval %s be consumed: %s", c.tool, id, msg)
		}
		return refusal("%s: refused, not forwarded: the ledger did not let approval %s be consumed (%s)", c.tool, id, ledgerErr(err))
	}
	g.approvals.markConsumed(c, id, cons.Index)
	g.log.Info("approval consumed", "tool", c.tool, "principal", c.principal, "approval", id.String(), "consumption", cons.Index)
	return g.forward(ctx, c, cons.Index, &consumedApproval{id: id, consumption: cons.Index})
}
