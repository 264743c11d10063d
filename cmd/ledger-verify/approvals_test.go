package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/internal/logtest"
)

// approvalLog appends approval lifecycles to a logtest log (signed,
// chained, exported without a ledger, so that it can hold what a lying
// ledger signs), one second apart unless an entry sets its time; the
// first error sticks.
type approvalLog struct {
	log *logtest.Log
	now time.Time
	err error
}

var fixtureParams = logtest.Params(`{"amount_minor":125000,"payee":"DE89370400440532013000"}`)

func (a *approvalLog) add(e entry.Entry) uint64 {
	if e.Time.IsZero() {
		e.Time = a.now
	}
	a.now = e.Time.Add(time.Second)
	i, _, err := a.log.Append(e)
	if a.err == nil {
		a.err = err
	}
	return i
}

// decision is mediator-1's decision for agent-1 to make_payment.
func (a *approvalLog) decision(d entry.Decision) (uint64, commit.Digest) {
	i := a.add(entry.Entry{Mediator: "mediator-1", Principal: "agent-1", Action: "make_payment", Decision: d,
		Policies: []string{"payments.review"}, Params: fixtureParams, Tiers: logtest.Digest("tiers"), Attributes: []byte(`{}`)})
	if a.err != nil {
		return i, commit.Digest{}
	}
	return i, a.log.Hash(i)
}

func (a *approvalLog) verdict(id commit.Digest, request uint64, approver string, v entry.Verdict) uint64 {
	return a.add(entry.Entry{Kind: entry.KindApproval, ApprovalID: id, Request: request, Approver: approver,
		Verdict: v, PreviewDigest: logtest.Digest("preview")})
}

func (a *approvalLog) consume(id commit.Digest, request uint64, edit func(*entry.Entry)) uint64 {
	e := entry.Entry{Kind: entry.KindConsumption, ApprovalID: id, Request: request, Mediator: "mediator-1",
		Principal: "agent-1", Action: "make_payment", Params: fixtureParams}
	if edit != nil {
		edit(&e)
	}
	return a.add(e)
}

// allowOutcome is the outcome of the allowed act of the decision at d.
func (a *approvalLog) allowOutcome(d uint64, mediator string, r entry.Result) uint64 {
	return a.add(entry.Entry{Kind: entry.KindOutcome, DecisionIndex: d, Mediator: mediator, Result: r})
}

func (a *approvalLog) outcome(id commit.Digest, consumption uint64, r entry.Result) uint64 {
	return a.add(entry.Entry{Kind: entry.KindOutcome, ApprovalID: id, Consumption: consumption,
		Mediator: "mediator-1", Result: r})
}

// writeApprovalFixture writes, in dir, logs of approval lifecycles all
// signed with the key of ledger.vkey:
//
//   - honest.ledger: 0 an approval_config (24 h pending, 1 h execution),
//     1 a request approved (2), consumed (3), succeeded (4); 5 a request
//     denied (6); 7 a request never decided; 8 a request approved (9),
//     consumed (10), unknown (11) then succeeded (12); 13 a request
//     approved (14) never consumed; 15, a day later, an allow decision;
//   - tail.ledger: entries 3 to 15 of it (requests, verdicts and the
//     config before the range);
//   - lie-*.ledger: 0 the config, 1 a request approved at 2, then what
//     the ledger must refuse: double-spend (consumptions 3 and 4),
//     expired (a consumption at the execution deadline), in-time (one
//     millisecond before it: honest), pending (a consumption of the
//     pending request 3), denied, digest (params_digest one byte off),
//     principal, mediator, late (a verdict at the pending deadline of
//     request 3), self (agent-1 approving its own request 3), allow (a
//     verdict on the allow decision 3), wrong-id (a consumption naming
//     request 3's id with request 1's index, both approved),
//     no-consumption (an outcome naming the verdict 2), final (an
//     outcome after a failed one); and outcomes of allowed acts
//     (version 5): allow-honest (an allow decision at 3, unknown, then
//     succeeded), allow-no-decision (an outcome of the request 1),
//     allow-mediator (mediator-2's outcome of mediator-1's allow
//     decision 3), allow-final (succeeded after failed).
func writeApprovalFixture(dir string) error {
	l, err := logtest.New("ledger.example.com/log")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "ledger.vkey"), []byte(l.VerifierKey+"\n"), 0o644); err != nil {
		return err
	}
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	a := &approvalLog{log: l, now: t0}
	a.add(entry.Entry{Kind: entry.KindApprovalConfig, PendingTTL: 24 * time.Hour, ExecutionTTL: time.Hour})
	r1, id1 := a.decision(entry.NeedsApproval)
	a.verdict(id1, r1, "alice", entry.Approve)
	k1 := a.consume(id1, r1, nil)
	a.outcome(id1, k1, entry.Succeeded)
	r5, id5 := a.decision(entry.NeedsApproval)
	a.verdict(id5, r5, "bob", entry.Reject)
	a.decision(entry.NeedsApproval)
	r8, id8 := a.decision(entry.NeedsApproval)
	a.verdict(id8, r8, "alice", entry.Approve)
	k8 := a.consume(id8, r8, nil)
	a.outcome(id8, k8, entry.Unknown)
	a.outcome(id8, k8, entry.Succeeded)
	r13, id13 := a.decision(entry.NeedsApproval)
	a.verdict(id13, r13, "bob", entry.Approve)
	a.now = a.now.Add(25 * time.Hour)
	a.decision(entry.Allow)
	if a.err != nil {
		return a.err
	}
	write := func(log *logtest.Log, name string, start uint64) error {
		b, err := log.Export(start, log.Len())
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, name), b, 0o644)
	}
	if err := write(l, "honest.ledger", 0); err != nil {
		return err
	}
	if err := write(l, "tail.ledger", 3); err != nil {
		return err
	}

	// The lies: after the config and a request approved at 2.
	base := l.Copy(3)
	approvedAt := t0.Add(2 * time.Second)
	for name, lie := range map[string]func(a *approvalLog){
		"double-spend": func(a *approvalLog) { a.consume(id1, r1, nil); a.consume(id1, r1, nil) },
		"expired": func(a *approvalLog) {
			a.consume(id1, r1, func(e *entry.Entry) { e.Time = approvedAt.Add(time.Hour) })
		},
		"in-time": func(a *approvalLog) {
			a.consume(id1, r1, func(e *entry.Entry) { e.Time = approvedAt.Add(time.Hour - time.Millisecond) })
		},
		"pending": func(a *approvalLog) {
			r, id := a.decision(entry.NeedsApproval)
			a.consume(id, r, nil)
		},
		"denied": func(a *approvalLog) {
			r, id := a.decision(entry.NeedsApproval)
			a.verdict(id, r, "bob", entry.Reject)
			a.consume(id, r, nil)
		},
		"digest":    func(a *approvalLog) { a.consume(id1, r1, func(e *entry.Entry) { e.Params.Digest[0] ^= 1 }) },
		"principal": func(a *approvalLog) { a.consume(id1, r1, func(e *entry.Entry) { e.Principal = "agent-2" }) },
		"mediator":  func(a *approvalLog) { a.consume(id1, r1, func(e *entry.Entry) { e.Mediator = "mediator-2" }) },
		"late": func(a *approvalLog) {
			r, id := a.decision(entry.NeedsApproval)
			a.add(entry.Entry{Kind: entry.KindApproval, ApprovalID: id, Request: r, Approver: "alice",
				Verdict: entry.Approve, PreviewDigest: logtest.Digest("preview"), Time: a.now.Add(-time.Second).Add(24 * time.Hour)})
		},
		"self": func(a *approvalLog) {
			r, id := a.decision(entry.NeedsApproval)
			a.verdict(id, r, "agent-1", entry.Approve)
		},
		"allow": func(a *approvalLog) {
			r, id := a.decision(entry.Allow)
			a.verdict(id, r, "alice", entry.Approve)
		},
		"wrong-id": func(a *approvalLog) {
			r, id := a.decision(entry.NeedsApproval)
			a.verdict(id, r, "alice", entry.Approve)
			a.consume(id, r1, nil)
		},
		"no-consumption": func(a *approvalLog) { a.outcome(id1, 2, entry.Succeeded) },
		// The outcomes of allowed acts (version 5).
		"allow-honest": func(a *approvalLog) {
			d, _ := a.decision(entry.Allow)
			a.allowOutcome(d, "mediator-1", entry.Unknown)
			a.allowOutcome(d, "mediator-1", entry.Succeeded)
		},
		"allow-no-decision": func(a *approvalLog) { a.allowOutcome(r1, "mediator-1", entry.Succeeded) },
		"allow-mediator": func(a *approvalLog) {
			d, _ := a.decision(entry.Allow)
			a.allowOutcome(d, "mediator-2", entry.Succeeded)
		},
		"allow-final": func(a *approvalLog) {
			d, _ := a.decision(entry.Allow)
			a.allowOutcome(d, "mediator-1", entry.Failed)
			a.allowOutcome(d, "mediator-1", entry.Succeeded)
		},
		"final": func(a *approvalLog) {
			k := a.consume(id1, r1, nil)
			a.outcome(id1, k, entry.Failed)
			a.outcome(id1, k, entry.Succeeded)
		},
	} {
		a := &approvalLog{log: base.Copy(3), now: approvedAt.Add(time.Second)}
		lie(a)
		if a.err != nil {
			return fmt.Errorf("%s: %w", name, a.err)
		}
		if err := write(a.log, "lie-"+name+".ledger", 0); err != nil {
			return err
		}
	}
	return nil
}
