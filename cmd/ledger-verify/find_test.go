package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/internal/logtest"
	"github.com/rogpeppe/go-internal/testscript"
)

// findParams are the parameters of the requests 3 and 9 of the find
// fixture (and of consumption 5); findOther those of entry 0.
const (
	findParams = `{"amount_minor":125000,"payee":"DE89370400440532013000"}`
	findOther  = `{"amount_minor":100,"payee":"DE00000000000000000001"}`
)

// writeFindFixture writes, in dir, find.ledger (signed with the key of
// ledger.vkey), entries one second apart from 2026-12-01T09:00:00Z:
//
//	0  decision/1 agent-1 make_payment allow [payments.limit] (findOther)
//	1  decision/1 agent-2 read_invoice deny [payments.block, read.deny]
//	2  approval_config
//	3  decision/1 agent-1 make_payment needs_approval [payments.review] (findParams)
//	4  approval: alice approves 3
//	5  consumption of 3 (findParams)
//	6  outcome of 5 (version 4)
//	7  decision/1 agent-2 read_invoice allow [read.allow], hiding commitment
//	8  outcome of the allowed act 7 (version 5)
//	9  decision/1 agent-1 make_payment needs_approval [payments.review] (findParams), never decided
//	10 policy_set
//	11 decision/3 agent-1 make_payment allow [payments.limit], a day later
//
// and request.id (entry 3's hash, the approval's id), other.id (entry 9's),
// params.digest (findParams' commitment), hidden.digest (entry 7's),
// other.json (findOther), params.json (findParams), tail.ledger (entries
// 4 to 11), v1.ledger (entries 0 to 6: no hiding commitment),
// tampered.ledger (find.ledger with entry 11's time changed after
// signing) and other.vkey (another key of the same name).
func writeFindFixture(dir string) error {
	l, err := logtest.New("ledger.example.com/log")
	if err != nil {
		return err
	}
	a := &approvalLog{log: l, now: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	params, other := logtest.Params(findParams), logtest.Params(findOther)
	hidden := commit.Commitment{Digest: logtest.Digest("hidden"), Size: 64, Hiding: true}
	decide := func(principal, action string, d entry.Decision, policies []string, p commit.Commitment) uint64 {
		return a.add(entry.Entry{Mediator: "mediator-1", Principal: principal, Action: action, Decision: d,
			Policies: policies, Params: p, Tiers: logtest.Digest("tiers"), Attributes: []byte(`{}`)})
	}
	decide("agent-1", "make_payment", entry.Allow, []string{"payments.limit"}, other)
	decide("agent-2", "read_invoice", entry.Deny, []string{"payments.block", "read.deny"}, other)
	a.add(entry.Entry{Kind: entry.KindApprovalConfig, PendingTTL: 24 * time.Hour, ExecutionTTL: time.Hour})
	r3 := decide("agent-1", "make_payment", entry.NeedsApproval, []string{"payments.review"}, params)
	a.verdict(l.Hash(r3), r3, "alice", entry.Approve)
	k := a.consume(l.Hash(r3), r3, func(e *entry.Entry) { e.Params = params })
	a.outcome(l.Hash(r3), k, entry.Succeeded)
	d7 := decide("agent-2", "read_invoice", entry.Allow, []string{"read.allow"}, hidden)
	a.allowOutcome(d7, "mediator-1", entry.Succeeded)
	r9 := decide("agent-1", "make_payment", entry.NeedsApproval, []string{"payments.review"}, params)
	a.add(entry.Entry{Kind: entry.KindPolicySet, PolicySet: logtest.Digest("policy set")})
	a.now = a.now.Add(24 * time.Hour)
	a.add(entry.Entry{Kind: entry.KindDecision, PolicySet: logtest.Digest("policy set"), Definition: logtest.Digest("definition"),
		Mediator: "mediator-1", Principal: "agent-1", Action: "make_payment", Decision: entry.Allow,
		Policies: []string{"payments.limit"}, Params: other, Tiers: logtest.Digest("tiers"), Attributes: []byte(`{}`)})
	if a.err != nil {
		return a.err
	}
	files := map[string]string{
		"ledger.vkey":   l.VerifierKey,
		"request.id":    l.Hash(r3).String(),
		"other.id":      l.Hash(r9).String(),
		"params.digest": params.DigestText(),
		"hidden.digest": hidden.DigestText(),
		"params.json":   findParams,
		"other.json":    findOther,
	}
	untrusted, err := logtest.New("ledger.example.com/log")
	if err != nil {
		return err
	}
	files["other.vkey"] = untrusted.VerifierKey
	for _, x := range []struct {
		name       string
		start, end uint64
	}{{"find.ledger", 0, l.Len()}, {"tail.ledger", 4, l.Len()}, {"v1.ledger", 0, 7}} {
		b, err := l.Export(x.start, x.end)
		if err != nil {
			return err
		}
		files[x.name] = string(b)
	}
	// tampered.ledger: entry 11's time changed after signing.
	tampered := strings.Replace(files["find.ledger"], `"time":"2026-12-02T09:00:11.000000Z"`, `"time":"2026-12-02T09:00:12.000000Z"`, 1)
	if tampered == files["find.ledger"] {
		return errors.New("find fixture: entry 11's time not found")
	}
	files["tampered.ledger"] = tampered
	for name, text := range files {
		if !strings.HasSuffix(name, ".ledger") {
			text += "\n"
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// cmdSetenvFrom is the script command "setenv-from VAR FILE": VAR is set
// to FILE's text without its final newline (an id a fixture wrote).
func cmdSetenvFrom(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: setenv-from VAR FILE")
	}
	ts.Setenv(args[0], strings.TrimSuffix(ts.ReadFile(args[1]), "\n"))
}
