package mcpgate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/decisionledger/ledger/client"
	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/commit/declare"
	"github.com/decisionledger/ledger/entry"
)

// call is one tools/call as the gateway handles it.
type call struct {
	tool      string // namespaced
	gt        *gatedTool
	principal string
	args      []byte // as received
	min       declare.Result
	terms     string // pendingKey's, once computed
}

// minimizeOptions are the options every call is minimized with. With the
// hiding commitment, src gives the openings: nil for fresh random ones,
// the disclosure of an earlier call to commit again as it was.
func (g *Gateway) minimizeOptions(src commit.OpeningSource) declare.Options {
	opts := declare.Options{Allowlists: g.allowlists, Domain: commit.Domain{AllowNonInteger: g.cfg.AllowNonInteger}}
	if g.cfg.Hiding() {
		if src == nil {
			src = commit.RandomOpenings()
		}
		opts.Openings = src
	}
	return opts
}

// recommit minimizes c again under the openings of the disclosure x of
// an earlier call: the commitment is that call's if and only if the
// arguments are the same. An error means they are not (a field the
// earlier call did not have). The result is only for presenting that
// commitment to the approval it opened: a call that asks the ledger
// anew keeps its own fresh openings.
func (g *Gateway) recommit(c *call, x *commit.Disclosure) (declare.Result, error) {
	return c.gt.decl.Minimize(c.args, g.minimizeOptions(x))
}

func rawJSON(b []byte) json.RawMessage { return b }

// upstreamErrKey holds, in a call's context, where forward leaves a
// protocol error the upstream answered.
type upstreamErrKey struct{}

// handler is the ToolHandler of the exposed tool name.
func (g *Gateway) handler(name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if !g.enter() {
			g.metrics.add(g.metrics.refused, "shutting_down")
			return refusal("%s: refused, not forwarded: the gateway is shutting down", name), nil
		}
		defer g.calls.Done()
		var upstreamErr error
		ctx = context.WithValue(ctx, upstreamErrKey{}, &upstreamErr)
		res := g.handle(ctx, name, req)
		if upstreamErr != nil {
			// The upstream answered with a protocol error: the agent
			// gets it as the upstream gave it.
			return nil, upstreamErr
		}
		return res, nil
	}
}

// handle runs the gate: every path that does not forward answers a
// refusal, so nothing is forwarded unless the ledger recorded an allow
// (or a consumed approval) for exactly these arguments.
func (g *Gateway) handle(ctx context.Context, name string, req *mcp.CallToolRequest) *mcp.CallToolResult {
	gt, status := g.lookup(name)
	if gt == nil {
		return g.refuseUnexposed(name, status)
	}
	principal, ok := g.principal(req)
	if !ok {
		g.metrics.add(g.metrics.refused, "unauthenticated")
		return refusal("%s: refused, not forwarded: no principal for this session", name)
	}
	c := &call{tool: name, gt: gt, principal: principal, args: rawArguments(req.Params)}
	min, err := gt.decl.Minimize(c.args, g.minimizeOptions(nil))
	if err != nil {
		g.metrics.add(g.metrics.refused, "arguments")
		g.log.Warn("call refused: arguments", "tool", name, "principal", principal, "err", err)
		return refusal("%s: refused, not forwarded: %v", name, err)
	}
	c.min = min
	if st := req.Params.RequestState; st != "" {
		return g.resume(ctx, c, req)
	}
	if res := g.retryPending(ctx, c, req); res != nil {
		return res
	}
	return g.decide(ctx, c, req)
}

// decide asks the ledger and acts on its decision.
func (g *Gateway) decide(ctx context.Context, c *call, req *mcp.CallToolRequest) *mcp.CallToolResult {
	r := client.Request{Principal: c.principal, Action: c.tool, Params: c.min.Params, Tiers: c.min.Tiers,
		Attributes: c.min.Attributes}
	if a := g.cfg.Approvals; a != nil && a.Preview != "attributes" {
		p, err := previewDoc(c.tool, c.args)
		if err == nil {
			r.Preview = p
		}
	}
	// The disclosure is on disk before the ledger can record the
	// commitment it opens.
	stored := g.disclosures != nil && c.min.Disclosure != nil
	if stored {
		if err := g.disclosures.write(c.min.Disclosure); err != nil {
			g.metrics.add(g.metrics.refused, "disclosure")
			g.log.Error("call refused: its disclosure could not be stored; the ledger was not asked", "tool", c.tool, "principal", c.principal, "err", err)
			return refusal("%s: refused, not forwarded: the gateway could not store the call's disclosure; the ledger was not asked", c.tool)
		}
	}
	dctx, cancel := context.WithTimeout(ctx, g.callTimeout)
	d, err := g.ledger.Decide(dctx, r)
	cancel()
	if err != nil {
		if stored && refusedOutright(err) {
			// Nothing was appended: no entry names the commitment.
			if rerr := g.disclosures.remove(c.min.Params); rerr != nil {
				g.log.Warn("the disclosure of a call the ledger refused could not be removed", "tool", c.tool, "params_digest", c.min.Params.DigestText(), "err", rerr)
			}
		}
		g.metrics.add(g.metrics.refused, "ledger")
		g.log.Warn("call refused: the ledger did not decide", "tool", c.tool, "principal", c.principal, "err", ledgerErr(err))
		return refusal("%s: refused, not forwarded: the ledger did not decide (%s)", c.tool, ledgerErr(err))
	}
	if want := g.declDigests[c.tool]; d.Entry.Definition != want {
		g.metrics.add(g.metrics.refused, "catalog_drift")
		g.log.Error("call refused: the ledger decided under another declaration of this tool; make declarations_dir and ledgerd's catalog_dir hold the same files",
			"tool", c.tool, "index", d.Index, "ledger_definition_digest", d.Entry.Definition.String(), "gateway_definition_digest", want.String())
		return refusal("%s: refused, not forwarded: the ledger's declaration of this tool (entry %d) is not the gateway's", c.tool, d.Index)
	}
	g.metrics.add(g.metrics.decisions, string(d.Decision))
	switch d.Decision {
	case entry.Allow:
		return g.forward(ctx, c, d.Index, nil)
	case entry.Deny:
		g.log.Info("call denied", "tool", c.tool, "principal", c.principal, "index", d.Index, "policies", d.Policies)
		return refusal("%s: denied by the ledger's policies (entry %d; determining policies: %s); not forwarded",
			c.tool, d.Index, policyList(d.Policies))
	case entry.NeedsApproval:
		if d.Approval == nil {
			return refusal("%s: needs approval (entry %d; policies: %s), but the ledger opened none (its approvals are off); not forwarded",
				c.tool, d.Index, policyList(d.Policies))
		}
		return g.awaitApproval(ctx, c, req, d)
	}
	return refusal("%s: refused, not forwarded: the ledger answered an unknown decision", c.tool)
}

// forward calls the upstream and records the outcome: of the decision at
// index, or of the consumption when approved says so.
func (g *Gateway) forward(ctx context.Context, c *call, index uint64, consumed *consumedApproval) *mcp.CallToolResult {
	fctx, cancel := context.WithTimeout(ctx, g.callTimeout)
	start := time.Now()
	res, err := c.gt.up.call(fctx, c.gt.def.Name, c.args)
	cancel()
	var rpcErr *jsonrpc.Error
	answered := errors.As(err, &rpcErr)
	result := resultOf(res, err)
	if answered {
		result = entry.Failed
	}
	g.metrics.observeForward(time.Since(start))
	g.metrics.add(g.metrics.outcomes, string(result))
	g.outcomes.add(outcomeJob{tool: c.tool, index: index, consumed: consumed, result: result})
	if answered {
		g.log.Info("call forwarded; the server answered an error", "tool", c.tool, "principal", c.principal, "index", index, "code", rpcErr.Code)
		if slot, ok := ctx.Value(upstreamErrKey{}).(*error); ok {
			*slot = rpcErr
		}
		return refusal("%s: the server answered error %d", c.tool, rpcErr.Code)
	}
	if err != nil {
		g.log.Warn("forwarded call failed", "tool", c.tool, "index", index, "err", transportErr(err))
		return refusal("%s: forwarded (entry %d), but the server's answer was lost (%s); outcome recorded unknown",
			c.tool, index, transportErr(err))
	}
	g.log.Info("call forwarded", "tool", c.tool, "principal", c.principal, "index", index, "result", string(result))
	return res
}

// refuseUnexposed answers a call to a tool that is not exposed. The
// name is the agent's, so it is logged only when it names a tool the
// upstreams offer.
func (g *Gateway) refuseUnexposed(name string, status ToolStatus) *mcp.CallToolResult {
	g.metrics.add(g.metrics.refused, string(status))
	g.mu.Lock()
	_, offered := g.tools[name]
	g.mu.Unlock()
	if offered {
		g.log.Warn("call refused", "tool", name, "reason", string(status))
		return refusal("%s: refused, not forwarded: the tool is %s (only declared, reviewed tools whose definition matches their pin are gated)", name, statusText(status))
	}
	g.log.Warn("call refused: no such tool", "reason", string(status))
	return refusal("refused, not forwarded: no such tool (only declared, reviewed tools whose definition matches their pin are gated)")
}

// principal is whom the session acts for: the bearer token's principal
// over HTTP, the configured one over stdio.
func (g *Gateway) principal(req *mcp.CallToolRequest) (string, bool) {
	if req.Extra != nil && req.Extra.TokenInfo != nil {
		p := req.Extra.TokenInfo.UserID
		return p, p != ""
	}
	if req.Extra != nil && req.Extra.Header != nil {
		// Over HTTP without a token: admitted only if configured.
		if g.cfg.HTTP != nil && g.cfg.HTTP.UnauthenticatedPrincipal != "" && req.Extra.Header.Get("Authorization") == "" {
			return g.cfg.HTTP.UnauthenticatedPrincipal, true
		}
		return "", false
	}
	if g.cfg.Stdio != nil {
		return g.cfg.Stdio.Principal, true
	}
	return "", false
}

func statusText(s ToolStatus) string {
	switch s {
	case Undeclared:
		return "not declared or not offered by its server"
	case Unreviewed:
		return "declared by a draft nobody has reviewed"
	case PinMismatch:
		return "changed since its declaration was reviewed"
	case Unpinned:
		return "declared without a tool pin"
	case NoDigest:
		return "defined outside the strict JSON domain"
	}
	return string(s)
}

func policyList(ids []string) string {
	if len(ids) == 0 {
		return "none"
	}
	return strings.Join(ids, ", ")
}

// refusedOutright says whether the ledger answered err as a refusal of
// the request itself (a 4xx but 408 and 429), after which nothing of it
// is appended, whichever attempt it answered: an earlier attempt lost in
// the network that had appended would have made this one a replay. A
// timeout, a network error or a 5xx leaves it unknown.
func refusedOutright(err error) bool {
	var ce *client.Error
	return errors.As(err, &ce) && ce.Status >= 400 && ce.Status < 500 &&
		ce.Status != http.StatusRequestTimeout && ce.Status != http.StatusTooManyRequests
}

// ledgerErr describes a ledger failure by its code, never its body.
func ledgerErr(err error) string {
	var ce *client.Error
	if errors.As(err, &ce) {
		return fmt.Sprintf("%d %s", ce.Status, ce.Code)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "timed out"
	}
	return "unreachable"
}

// transportErr describes an upstream failure without its text, which a
// server may fill with argument values.
func transportErr(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timed out"
	case errors.Is(err, mcp.ErrConnectionClosed):
		return "connection closed"
	}
	return "transport error"
}
