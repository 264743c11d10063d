package main

import (
	"encoding/json"
	"io"
	"strings"
	"time"

	"github.com/decisionledger/ledger/client"
	"github.com/decisionledger/ledger/internal/termtext"
)

// runDecide asks ledgerd to decide the request in BODY (POST /v1/decide)
// and prints its decision once the receipt verifies: the entry is signed
// by the ledger's key, records exactly this request, and is the decision
// the answer names (client.Decide).
func runDecide(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := newCommon("decide", "decide [--url URL] (--key VKEY | --key-file FILE | --trust FILE)... [--token-file FILE] [--idempotency-key KEY] [--principal NAME] [--json] BODY")
	idempotencyKey := c.fs.String("idempotency-key", "", "")
	fill := registerFill(c.fs, true)
	pos, code := c.parseArgs(args, stdout, stderr)
	if code >= 0 {
		return code
	}
	if len(pos) != 1 {
		return c.usageError(stderr, "takes exactly one BODY file (\"-\" for standard input)")
	}
	if *idempotencyKey != "" && !validIdempotencyKey(*idempotencyKey) {
		return c.usageError(stderr, "--idempotency-key is not 1 to %d printable ASCII characters without spaces", client.MaxIdempotencyKey)
	}
	name := pos[0]
	raw, err := readInput(name, stdin, maxDecisionFile)
	if err != nil {
		errorf(stderr, "decide: %v", err)
		return exitUsage
	}
	d, err := parseBody(raw, true, fill)
	if err != nil {
		errorf(stderr, "decide: %s: not a decide request: %v", termtext.Quote(name), err)
		hintf(stderr, "a decide request is the body of POST /v1/decide (docs/api.md), as ledgerctl minimize prints it")
		return exitFailed
	}
	cl, ctx, cancel, code := c.setup(stderr, true)
	if code != exitOK {
		return code
	}
	defer cancel()
	req := client.Request{Principal: d.Principal, Action: d.Action, Params: d.Params, Tiers: d.Tiers, Attributes: d.Attributes, Preview: d.Preview}
	var r *client.Decided
	if *idempotencyKey != "" {
		r, err = cl.DecideIdempotent(ctx, *idempotencyKey, req)
	} else {
		r, err = cl.Decide(ctx, req)
	}
	if err != nil {
		return c.failed(stderr, "decide", err)
	}
	hash, err := r.Entry.Hash()
	if err != nil { // the entry verified, so it encodes
		return c.failed(stderr, "decide", err)
	}
	result := "decided"
	if r.Replayed {
		result = "replayed"
	}
	if *c.json {
		v := map[string]any{"result": result, "decision": r.Decision, "policies": r.Policies, "policy_errors": r.PolicyErrors,
			"policy_set": r.PolicySet, "index": r.Index, "entry_hash": hash, "entry": json.RawMessage(r.Raw)}
		if a := r.Approval; a != nil {
			v["approval"] = map[string]any{"id": a.ID, "pending_deadline": a.PendingDeadline.UTC().Format(time.RFC3339Nano), "preview_digest": a.PreviewDigest}
		}
		termtext.WriteJSON(stdout, v)
		return exitOK
	}
	if r.Replayed {
		termtext.PrintLine(stdout, "replayed: %s was decided before with this idempotency key, entry %d of %s; nothing new was recorded (receipt verified)", r.Decision, r.Index, termtext.Quote(r.Entry.Origin))
	} else {
		termtext.PrintLine(stdout, "decided: %s, entry %d of %s (receipt verified)", r.Decision, r.Index, termtext.Quote(r.Entry.Origin))
	}
	termtext.PrintLine(stdout, "  policies    %s", quoteAll(r.Policies))
	if len(r.PolicyErrors) > 0 {
		termtext.PrintLine(stdout, "  errors      %s (their evaluation failed: the decision is deny)", quoteAll(r.PolicyErrors))
	}
	termtext.PrintLine(stdout, "  policy set  %s", r.PolicySet)
	termtext.PrintLine(stdout, "  entry hash  %s", hash)
	if a := r.Approval; a != nil {
		termtext.PrintLine(stdout, "  approval    %s, pending until %s (preview %s)", a.ID, a.PendingDeadline.UTC().Format(time.RFC3339), a.PreviewDigest)
		termtext.PrintLine(stdout, "  approver's page %s/approvals/%s", strings.TrimSuffix(*c.url, "/"), a.ID)
	}
	return exitOK
}

// quoteAll quotes each of list for the terminal, joined by spaces.
func quoteAll(list []string) string {
	q := make([]string, len(list))
	for i, s := range list {
		q[i] = termtext.Quote(s)
	}
	return strings.Join(q, " ")
}
