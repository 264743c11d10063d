package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/decisionledger/ledger/client"
	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/internal/termtext"
)

// runApproval runs the approval commands of a mediator (docs/approvals.md):
// get and wait read an approval's state and verify the entries it names;
// consume spends an approved one; outcome reports what the act did.
func runApproval(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		errorf(stderr, "approval: needs a command: get, wait, consume or outcome")
		hintf(stderr, "run %s --help for the usage", programName)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, synopsisAndText("approval"))
		return exitOK
	case "get", "wait":
		return runApprovalState(args[0], args[1:], stdout, stderr)
	case "consume":
		return runConsume(args[1:], stdin, stdout, stderr)
	case "outcome":
		return runOutcome(args[1:], stdout, stderr)
	}
	errorf(stderr, "approval: unknown command %s", termtext.Quote(args[0]))
	hintf(stderr, "the approval commands are get, wait, consume and outcome")
	return exitUsage
}

// parseApprovalID reads an approval id: sha256: and 64 lower-case hex
// digits, the request entry's hash.
func (c *common) parseApprovalID(stderr io.Writer, s string) (commit.Digest, int) {
	id, err := commit.ParseDigest(s)
	if err != nil {
		return id, c.usageError(stderr, "ID %s is not an approval id (sha256: and 64 lower-case hex digits)", termtext.Quote(s))
	}
	return id, exitOK
}

const approvalKeys = "[--url URL] (--key VKEY | --key-file FILE | --trust FILE)... [--token-file FILE]"

func runApprovalState(cmd string, args []string, stdout, stderr io.Writer) int {
	synopsis := "approval get " + approvalKeys + " [--json] ID"
	if cmd == "wait" {
		synopsis = "approval wait " + approvalKeys + " [--timeout DURATION] [--poll DURATION] [--json] ID"
	}
	c := newCommon("approval "+cmd, synopsis)
	var poll *time.Duration
	if cmd == "wait" {
		poll = c.fs.Duration("poll", time.Second, "")
	}
	pos, code := c.parseArgs(args, stdout, stderr)
	if code >= 0 {
		return code
	}
	if len(pos) != 1 {
		return c.usageError(stderr, "takes exactly one approval ID")
	}
	id, code := c.parseApprovalID(stderr, pos[0])
	if code != exitOK {
		return code
	}
	if poll != nil && *poll <= 0 {
		return c.usageError(stderr, "--poll must be positive")
	}
	cl, ctx, cancel, code := c.setup(stderr, false)
	if code != exitOK {
		return code
	}
	defer cancel()
	var st *client.ApprovalState
	var err error
	if cmd == "wait" {
		st, err = cl.WaitApproval(ctx, id, *poll)
		if errors.Is(err, context.DeadlineExceeded) {
			errorf(stderr, "approval wait: no verdict on %s within --timeout %s: still pending", id, *c.timeout)
			hintf(stderr, "wait again (the approval stays pending until its pending deadline), or do not act")
			return exitFailed
		}
	} else {
		st, err = cl.Approval(ctx, id)
	}
	if err != nil {
		return c.failed(stderr, c.fs.Name(), err)
	}
	request, err := verifyAccount(ctx, cl, st)
	if err != nil {
		return c.failed(stderr, c.fs.Name(), err)
	}
	if *c.json {
		v := map[string]any{
			"result": "verified", "id": st.ID, "state": st.State, "request": st.Request, "action": st.Action,
			"principal": st.Principal, "mediator": st.Mediator, "params_digest": st.Params.DigestText(), "params_size": st.Params.Size,
			"pending_deadline": jsonTime(st.PendingDeadline),
		}
		if st.Verdict != "" {
			v["verdict"], v["verdict_index"], v["approver"] = st.Verdict, st.VerdictIndex, st.Approver
			v["execution_deadline"] = jsonTime(st.ExecutionDeadline)
		}
		if st.Consumption != 0 {
			v["consumption"] = st.Consumption
		}
		if st.Outcome != "" {
			v["outcome"], v["outcome_index"] = st.Outcome, st.OutcomeIndex
		}
		termtext.WriteJSON(stdout, v)
		return exitOK
	}
	termtext.PrintLine(stdout, "approval %s: %s (ledgerd's account; the entries it names verified)", st.ID, st.State)
	termtext.PrintLine(stdout, "  request     entry %d: %s %s by %s, mediator %s", st.Request, request.Decision, termtext.Quote(st.Action), termtext.Quote(st.Principal), termtext.Quote(st.Mediator))
	termtext.PrintLine(stdout, "  params      %s (%d bytes)", st.Params.DigestText(), st.Params.Size)
	termtext.PrintLine(stdout, "  pending     until %s", st.PendingDeadline.UTC().Format(time.RFC3339))
	if st.Verdict != "" {
		termtext.PrintLine(stdout, "  verdict     entry %d: %s by %s", st.VerdictIndex, st.Verdict, termtext.Quote(st.Approver))
		if st.Verdict == entry.Approve {
			termtext.PrintLine(stdout, "  execution   consume before %s", st.ExecutionDeadline.UTC().Format(time.RFC3339))
		}
	}
	if st.Consumption != 0 {
		termtext.PrintLine(stdout, "  consumed    entry %d", st.Consumption)
	}
	if st.Outcome != "" {
		termtext.PrintLine(stdout, "  outcome     entry %d: %s", st.OutcomeIndex, st.Outcome)
	}
	return exitOK
}

func jsonTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// verifyAccount checks the entries ledgerd's account of an approval names
// (the account itself is unsigned): the request is the needs_approval
// decision whose entry hash is the id, on the account's terms; the
// verdict, the consumption and the outcome, where there are, are this
// approval's, as the account says. It returns the request's entry.
func verifyAccount(ctx context.Context, cl *client.Client, st *client.ApprovalState) (*entry.Entry, error) {
	req, _, err := cl.Entry(ctx, st.Request)
	if err != nil {
		return nil, err
	}
	if h, err := req.Hash(); err != nil || h != st.ID {
		return nil, fmt.Errorf("%w: entry %d, the account's request, is not approval %s's (its hash is not the id)", client.ErrUnverified, st.Request, st.ID)
	}
	if req.Decision != entry.NeedsApproval || req.Action != st.Action || req.Principal != st.Principal ||
		req.Mediator != st.Mediator || !req.Params.Equal(st.Params) {
		return nil, fmt.Errorf("%w: entry %d does not record the account's request (a needs_approval decision on its terms)", client.ErrUnverified, st.Request)
	}
	if st.Verdict != "" {
		e, _, err := cl.Entry(ctx, st.VerdictIndex)
		if err != nil {
			return nil, err
		}
		if e.Kind != entry.KindApproval || e.ApprovalID != st.ID || e.Verdict != st.Verdict || e.Approver != st.Approver {
			return nil, fmt.Errorf("%w: entry %d is not the account's verdict on approval %s", client.ErrUnverified, st.VerdictIndex, st.ID)
		}
	}
	if st.Consumption != 0 {
		e, _, err := cl.Entry(ctx, st.Consumption)
		if err != nil {
			return nil, err
		}
		if e.Kind != entry.KindConsumption || e.ApprovalID != st.ID {
			return nil, fmt.Errorf("%w: entry %d is not a consumption of approval %s", client.ErrUnverified, st.Consumption, st.ID)
		}
	}
	if st.Outcome != "" {
		e, _, err := cl.Entry(ctx, st.OutcomeIndex)
		if err != nil {
			return nil, err
		}
		if e.Kind != entry.KindOutcome || e.ApprovalID != st.ID || e.Result != st.Outcome {
			return nil, fmt.Errorf("%w: entry %d is not the account's outcome of approval %s", client.ErrUnverified, st.OutcomeIndex, st.ID)
		}
	}
	return req, nil
}

func runConsume(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := newCommon("approval consume", "approval consume "+approvalKeys+" [--idempotency-key KEY] [--principal NAME] [--json] ID BODY")
	idempotencyKey := c.fs.String("idempotency-key", "", "")
	fill := registerFill(c.fs, true)
	pos, code := c.parseArgs(args, stdout, stderr)
	if code >= 0 {
		return code
	}
	if len(pos) != 2 {
		return c.usageError(stderr, "takes an approval ID and a BODY file (\"-\" for standard input)")
	}
	id, code := c.parseApprovalID(stderr, pos[0])
	if code != exitOK {
		return code
	}
	if *idempotencyKey != "" && !validIdempotencyKey(*idempotencyKey) {
		return c.usageError(stderr, "--idempotency-key is not 1 to %d printable ASCII characters without spaces", client.MaxIdempotencyKey)
	}
	raw, err := readInput(pos[1], stdin, maxDecisionFile)
	if err != nil {
		errorf(stderr, "approval consume: %v", err)
		return exitUsage
	}
	d, err := parseBody(raw, true, fill)
	if err != nil {
		errorf(stderr, "approval consume: %s: not the request's body: %v", termtext.Quote(pos[1]), err)
		hintf(stderr, "BODY is the decide request that opened the approval (ledgerctl minimize prints it): its action, principal and parameter commitment are the terms")
		return exitFailed
	}
	cl, ctx, cancel, code := c.setup(stderr, true)
	if code != exitOK {
		return code
	}
	defer cancel()
	terms := client.Terms{Action: d.Action, Principal: d.Principal, Params: d.Params}
	var r *client.Consumed
	if *idempotencyKey != "" {
		r, err = cl.ConsumeIdempotent(ctx, *idempotencyKey, id, terms)
	} else {
		r, err = cl.Consume(ctx, id, terms)
	}
	if err != nil {
		return c.failed(stderr, "approval consume", err)
	}
	result := "consumed"
	if r.Replayed {
		result = "replayed"
	}
	if *c.json {
		termtext.WriteJSON(stdout, map[string]any{"result": result, "id": id, "index": r.Index, "request": r.Request, "entry": json.RawMessage(r.Raw)})
		return exitOK
	}
	if r.Replayed {
		termtext.PrintLine(stdout, "replayed: approval %s was consumed before with this idempotency key, entry %d; nothing new was recorded (receipt verified)", id, r.Index)
	} else {
		termtext.PrintLine(stdout, "consumed: approval %s, entry %d of %s (receipt verified): act now, once", id, r.Index, termtext.Quote(r.Entry.Origin))
	}
	termtext.PrintLine(stdout, "  request     entry %d", r.Request)
	termtext.PrintLine(stdout, "  then        %s approval outcome --consumption %d --result succeeded|failed|unknown %s", programName, r.Index, id)
	return exitOK
}

func runOutcome(args []string, stdout, stderr io.Writer) int {
	c := newCommon("approval outcome", "approval outcome "+approvalKeys+" [--idempotency-key KEY] --consumption INDEX --result RESULT [--operation-id ID] [--json] ID")
	idempotencyKey := c.fs.String("idempotency-key", "", "")
	consumption := c.fs.String("consumption", "", "")
	result := c.fs.String("result", "", "")
	operationID := c.fs.String("operation-id", "", "")
	pos, code := c.parseArgs(args, stdout, stderr)
	if code >= 0 {
		return code
	}
	if len(pos) != 1 {
		return c.usageError(stderr, "takes exactly one approval ID")
	}
	id, code := c.parseApprovalID(stderr, pos[0])
	if code != exitOK {
		return code
	}
	index, ok := parseIndex(*consumption)
	if !ok {
		return c.usageError(stderr, "needs --consumption INDEX, the consumption entry's decimal index")
	}
	switch entry.Result(*result) {
	case entry.Succeeded, entry.Failed, entry.Unknown:
	default:
		return c.usageError(stderr, "needs --result succeeded, failed or unknown")
	}
	if *idempotencyKey != "" && !validIdempotencyKey(*idempotencyKey) {
		return c.usageError(stderr, "--idempotency-key is not 1 to %d printable ASCII characters without spaces", client.MaxIdempotencyKey)
	}
	cl, ctx, cancel, code := c.setup(stderr, true)
	if code != exitOK {
		return code
	}
	defer cancel()
	var r *client.Receipt
	var err error
	if *idempotencyKey != "" {
		r, err = cl.OutcomeIdempotent(ctx, *idempotencyKey, id, index, entry.Result(*result), *operationID)
	} else {
		r, err = cl.Outcome(ctx, id, index, entry.Result(*result), *operationID)
	}
	if err != nil {
		return c.failed(stderr, "approval outcome", err)
	}
	res := "recorded"
	if r.Replayed {
		res = "replayed"
	}
	if *c.json {
		termtext.WriteJSON(stdout, map[string]any{"result": res, "id": id, "index": r.Index, "consumption": index, "entry": json.RawMessage(r.Raw)})
		return exitOK
	}
	verb := "recorded"
	if r.Replayed {
		verb = "replayed (recorded before with this idempotency key)"
	}
	termtext.PrintLine(stdout, "outcome %s %s: consumption %s of approval %s, entry %d of %s (receipt verified)", *result, verb, strconv.FormatUint(index, 10), id, r.Index, termtext.Quote(r.Entry.Origin))
	return exitOK
}
