package ledger

import (
	"crypto/sha256"
	"fmt"
	"time"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
)

// fixtureT0 is the time of the first entry of fixtureLifecycle.
var fixtureT0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

// fixtureID is the id fixtureLifecycle gives the approval requested at
// index: a stand-in for the entry hash, which only the ledger computes.
func fixtureID(index uint64) commit.Digest {
	return sha256.Sum256(fmt.Appendf(nil, "fixture request %d", index))
}

// fixtureLifecycle is a log's lifecycle entries with every way an
// approval closes, and some left open, for the version 1 snapshot in
// testdata/approvals-v1.snap, which the version 1 encoder (before closed
// approvals were reduced, commit a51397f) wrote of the state these
// entries leave, admitted in order with the ids of fixtureID: consumed with an unknown outcome (1),
// denied (5), expired pending (7), approved and lapsed (8), consumed with
// succeeded (10) and failed (14) outcomes, approved and open (18),
// pending (20, 25), consumed without outcome (21); a second
// approval_config at 24.
func fixtureLifecycle() []*entry.Entry {
	params := func(s string) commit.Commitment {
		c, err := commit.Params([]byte(`{"to":"` + s + `@example.com"}`))
		if err != nil {
			panic(err)
		}
		return c
	}
	at := func(m time.Duration) time.Time { return fixtureT0.Add(m * time.Minute) }
	var list []*entry.Entry
	add := func(m time.Duration, e *entry.Entry) {
		e.Index, e.Time = uint64(len(list)), at(m)
		list = append(list, e)
	}
	type req struct {
		index                       uint64
		mediator, principal, action string
		params                      commit.Commitment
	}
	reqs := map[uint64]req{}
	request := func(m time.Duration, mediator, principal string) uint64 {
		r := req{uint64(len(list)), mediator, principal, "send_email", params(principal)}
		reqs[r.index] = r
		add(m, &entry.Entry{Decision: entry.NeedsApproval, Mediator: mediator, Principal: principal, Action: r.action, Params: r.params})
		return r.index
	}
	verdict := func(m time.Duration, r uint64, v entry.Verdict) {
		add(m, &entry.Entry{Kind: entry.KindApproval, ApprovalID: fixtureID(r), Approver: "alice", Verdict: v})
	}
	consume := func(m time.Duration, r uint64) uint64 {
		q := reqs[r]
		add(m, &entry.Entry{Kind: entry.KindConsumption, ApprovalID: fixtureID(r), Mediator: q.mediator, Principal: q.principal, Action: q.action, Params: q.params})
		return uint64(len(list) - 1)
	}
	outcome := func(m time.Duration, r, c uint64, res entry.Result) {
		add(m, &entry.Entry{Kind: entry.KindOutcome, ApprovalID: fixtureID(r), Consumption: c, Mediator: reqs[r].mediator, Result: res})
	}
	add(0, &entry.Entry{Kind: entry.KindApprovalConfig, PendingTTL: 10 * time.Minute, ExecutionTTL: 5 * time.Minute})
	a := request(0, "mediator-1", "agent-a")
	verdict(1, a, entry.Approve)
	outcome(3, a, consume(2, a), entry.Unknown)
	b := request(3, "mediator-2", "agent-b")
	verdict(4, b, entry.Reject)
	request(4, "mediator-1", "agent-c")
	d := request(4, "mediator-2", "agent-d")
	verdict(5, d, entry.Approve)
	e := request(5, "mediator-2", "agent-e")
	verdict(5, e, entry.Approve)
	outcome(6, e, consume(6, e), entry.Succeeded)
	f := request(6, "mediator-1", "agent-f")
	verdict(7, f, entry.Approve)
	outcome(7, f, consume(7, f), entry.Failed)
	g := request(7, "mediator-1", "agent-g")
	verdict(8, g, entry.Approve)
	request(20, "mediator-1", "agent-h")
	i := request(20, "mediator-2", "agent-i")
	verdict(20, i, entry.Approve)
	consume(21, i)
	add(21, &entry.Entry{Kind: entry.KindApprovalConfig, PendingTTL: time.Hour, ExecutionTTL: 2 * time.Minute})
	request(21, "mediator-1", "agent-j")
	return list
}
