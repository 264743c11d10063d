package verify_test

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/internal/logtest"
	"github.com/decisionledger/ledger/verify"
)

// lifecycle writes approval lifecycles into a log built without a ledger
// (logtest), so that a test can write the entries a lying ledger would:
// each is signed with the log's own key, so the export verifies.
type lifecycle struct {
	t   testing.TB
	log *logtest.Log
	// now is the time of the next entry; each append moves it one
	// second on.
	now time.Time
}

var (
	t0         = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	payParams  = logtest.Params(`{"amount_minor":125000,"payee":"DE89370400440532013000"}`)
	mailParams = logtest.Params(`{"to":"a@example.com"}`)
)

func newLifecycle(t testing.TB) *lifecycle {
	t.Helper()
	l, err := logtest.New("ledger.example.com/approvals")
	if err != nil {
		t.Fatal(err)
	}
	return &lifecycle{t: t, log: l, now: t0}
}

func (c *lifecycle) add(e entry.Entry) uint64 {
	c.t.Helper()
	if e.Time.IsZero() {
		e.Time = c.now
	}
	c.now = e.Time.Add(time.Second)
	i, _, err := c.log.Append(e)
	if err != nil {
		c.t.Fatal(err)
	}
	return i
}

func (c *lifecycle) config(pending, execution time.Duration) uint64 {
	return c.add(entry.Entry{Kind: entry.KindApprovalConfig, PendingTTL: pending, ExecutionTTL: execution})
}

// request is a mediator's decision (version 1) that the call needs
// approval: mediator-1 for principal agent-1, make_payment with
// payParams. It returns its index and the approval's id.
func (c *lifecycle) request() (uint64, commit.Digest) {
	return c.decision(entry.NeedsApproval, "agent-1", "make_payment", payParams)
}

func (c *lifecycle) decision(d entry.Decision, principal, action string, params commit.Commitment) (uint64, commit.Digest) {
	i := c.add(entry.Entry{Mediator: "mediator-1", Principal: principal, Action: action, Decision: d,
		Policies: []string{"payments.review"}, Params: params, Tiers: logtest.Digest("tiers"), Attributes: []byte(`{"amount_minor":125000}`)})
	return i, c.log.Hash(i)
}

func (c *lifecycle) verdict(id commit.Digest, request uint64, approver string, v entry.Verdict) uint64 {
	return c.add(entry.Entry{Kind: entry.KindApproval, ApprovalID: id, Request: request, Approver: approver,
		Verdict: v, PreviewDigest: logtest.Digest("preview")})
}

// consume spends the approval with the request's terms; edit, if not
// nil, changes them first.
func (c *lifecycle) consume(id commit.Digest, request uint64, edit func(*entry.Entry)) uint64 {
	e := entry.Entry{Kind: entry.KindConsumption, ApprovalID: id, Request: request, Mediator: "mediator-1",
		Principal: "agent-1", Action: "make_payment", Params: payParams}
	if edit != nil {
		edit(&e)
	}
	return c.add(e)
}

func (c *lifecycle) outcome(id commit.Digest, consumption uint64, mediator string, r entry.Result) uint64 {
	return c.add(entry.Entry{Kind: entry.KindOutcome, ApprovalID: id, Consumption: consumption, Mediator: mediator,
		Result: r, OperationID: "op-1"})
}

// filler is an entry with nothing to do with approvals.
func (c *lifecycle) filler() uint64 {
	i, _ := c.decision(entry.Allow, "agent-2", "send_email", mailParams)
	return i
}

// export verifies the approvals of entries [start, end) of the log.
func (c *lifecycle) audit(start, end uint64) (*verify.ApprovalReport, error) {
	c.t.Helper()
	data, err := c.log.Export(start, end)
	if err != nil {
		c.t.Fatal(err)
	}
	key, err := verify.ParseKey(c.log.VerifierKey)
	if err != nil {
		c.t.Fatal(err)
	}
	return verify.VerifyApprovals(bytes.NewReader(data), key, verify.ExportOptions{All: true})
}

func (c *lifecycle) auditAll() *verify.ApprovalReport {
	c.t.Helper()
	rep, err := c.audit(0, c.log.Len())
	if err != nil {
		c.t.Fatalf("the export does not verify: %v", err)
	}
	return rep
}

// findings writes findings as "entry:rule[(member)]:role=index,...", in
// order, for comparison with hand-written expectations.
func findings(fs []verify.Finding) []string {
	var out []string
	for _, f := range fs {
		s := fmt.Sprintf("%d:%s", f.Index, f.Rule)
		if f.Member != "" {
			s += "(" + f.Member + ")"
		}
		var refs []string
		for _, r := range f.Refers {
			refs = append(refs, fmt.Sprintf("%s=%d", r.Role, r.Index))
		}
		out = append(out, s+":"+strings.Join(refs, ","))
	}
	return out
}

// counts writes a report's counts in one line.
func counts(r *verify.ApprovalReport) string {
	return fmt.Sprintf("configs=%d opened=%d approved=%d denied=%d expired_pending=%d expired_execution=%d pending=%d unconsumed=%d consumed=%d succeeded=%d failed=%d unknown=%d without_outcome=%d violations=%d unresolved=%d",
		r.Configs, r.Opened, r.Approved, r.Denied, r.ExpiredPending, r.ExpiredExecution, r.Pending, r.Unconsumed,
		r.Consumed, r.Outcomes.Succeeded, r.Outcomes.Failed, r.Outcomes.Unknown, r.WithoutOutcome, r.ViolationCount, r.UnresolvedCount)
}

// honestLog writes the honest lifecycles of TestApprovalsHonest.
func honestLog(c *lifecycle) {
	c.filler()                        // 0: before any config: an allow
	c.request()                       // 1: needs_approval before any config: opens nothing
	c.config(24*time.Hour, time.Hour) // 2
	r1, id1 := c.request()            // 3
	c.verdict(id1, r1, "alice", entry.Approve)
	k1 := c.consume(id1, r1, nil)
	c.outcome(id1, k1, "mediator-1", entry.Succeeded)
	r2, id2 := c.request() // 7
	c.verdict(id2, r2, "bob", entry.Reject)
	c.request()            // 9: never decided: expires pending
	r4, id4 := c.request() // 10
	c.verdict(id4, r4, "alice", entry.Approve)
	k4 := c.consume(id4, r4, nil)
	c.outcome(id4, k4, "mediator-1", entry.Unknown)
	c.outcome(id4, k4, "mediator-1", entry.Succeeded) // resolves unknown
	// A ledger decision (version 3) needing approval, consumed, failed.
	r5 := c.add(entry.Entry{Kind: entry.KindDecision, Mediator: "mediator-1", Principal: "agent-1", Action: "make_payment",
		Decision: entry.NeedsApproval, Policies: []string{"payments.review"}, PolicyErrors: []string{}, Params: payParams,
		Tiers: logtest.Digest("tiers"), Attributes: []byte(`{}`), Definition: logtest.Digest("definition"),
		PolicySet: logtest.Digest("set")})
	id5 := c.log.Hash(r5)
	c.verdict(id5, r5, "alice", entry.Approve)
	k5 := c.consume(id5, r5, nil)
	c.outcome(id5, k5, "mediator-1", entry.Failed)
	r6, id6 := c.request() // 19: approved, never consumed: expires
	c.verdict(id6, r6, "bob", entry.Approve)
	// A day later: r3 (9) passed its pending deadline, r6 its execution
	// deadline.
	c.now = c.now.Add(25 * time.Hour)
	c.filler()
}

func TestApprovalsHonest(t *testing.T) {
	c := newLifecycle(t)
	honestLog(c)
	rep := c.auditAll()
	want := "configs=1 opened=6 approved=4 denied=1 expired_pending=1 expired_execution=1 pending=0 unconsumed=0 consumed=3 succeeded=2 failed=1 unknown=1 without_outcome=0 violations=0 unresolved=0"
	if got := counts(rep); got != want || !rep.OK() {
		t.Errorf("counts:\n got %s\nwant %s\nviolations %v", got, want, findings(rep.Violations))
	}
	if rep.Export.End != c.log.Len() {
		t.Errorf("export report %+v", rep.Export)
	}
	// Only the version 3 decision names a policy set; the approval's
	// entries (versions 4 and 5) have kinds but name none.
	if want := []commit.Digest{logtest.Digest("set")}; !slices.Equal(rep.Export.Named, want) {
		t.Errorf("named policy sets %v, want %v", rep.Export.Named, want)
	}
}

// Before their deadlines, approvals are pending or unconsumed, not
// expired; a consumption without outcome is counted.
func TestApprovalsOpenAtEnd(t *testing.T) {
	c := newLifecycle(t)
	c.config(24*time.Hour, time.Hour)
	c.request()
	r, id := c.request()
	c.verdict(id, r, "alice", entry.Approve)
	r2, id2 := c.request()
	c.verdict(id2, r2, "alice", entry.Approve)
	c.consume(id2, r2, nil)
	want := "configs=1 opened=3 approved=2 denied=0 expired_pending=0 expired_execution=0 pending=1 unconsumed=1 consumed=1 succeeded=0 failed=0 unknown=0 without_outcome=1 violations=0 unresolved=0"
	if got := counts(c.auditAll()); got != want {
		t.Errorf("counts:\n got %s\nwant %s", got, want)
	}
}

// TestApprovalsLyingLedger writes, for each rule, a log whose entries are
// all signed with the log's own key (the export verifies) but one of which
// the ledger must never have appended; the audit names it, its rule and
// the entries it refers to, and nothing else.
func TestApprovalsLyingLedger(t *testing.T) {
	for _, tc := range []struct {
		name string
		// lie writes the log after the config at 0; the request is at 1.
		lie  func(c *lifecycle)
		want []string
	}{
		{"double spend", func(c *lifecycle) {
			r, id := c.request()
			c.verdict(id, r, "alice", entry.Approve)
			c.consume(id, r, nil)
			c.consume(id, r, nil)
		}, []string{"4:approval_consumed:request=1,verdict=2,consumption=3"}},
		{"consumption at the execution deadline", func(c *lifecycle) {
			r, id := c.request()
			c.verdict(id, r, "alice", entry.Approve)
			c.consume(id, r, func(e *entry.Entry) { e.Time = c.now.Add(-time.Second).Add(time.Hour) })
		}, []string{"3:approval_expired:request=1,verdict=2"}},
		{"consumption one millisecond before the execution deadline", func(c *lifecycle) {
			r, id := c.request()
			c.verdict(id, r, "alice", entry.Approve)
			c.consume(id, r, func(e *entry.Entry) { e.Time = c.now.Add(-time.Second).Add(time.Hour - time.Millisecond) })
		}, nil},
		{"consumption of a pending approval", func(c *lifecycle) {
			r, id := c.request()
			c.consume(id, r, nil)
		}, []string{"2:approval_pending:request=1"}},
		{"consumption of a denied approval", func(c *lifecycle) {
			r, id := c.request()
			c.verdict(id, r, "alice", entry.Reject)
			c.consume(id, r, nil)
		}, []string{"3:approval_denied:request=1,verdict=2"}},
		{"digest changed by one byte", func(c *lifecycle) {
			r, id := c.request()
			c.verdict(id, r, "alice", entry.Approve)
			c.consume(id, r, func(e *entry.Entry) { e.Params.Digest[31] ^= 1 })
		}, []string{"3:approval_digest_mismatch(params_digest):request=1,verdict=2"}},
		{"commitment version re-spelled", func(c *lifecycle) {
			r, id := c.request()
			c.verdict(id, r, "alice", entry.Approve)
			c.consume(id, r, func(e *entry.Entry) { e.Params.Hiding = !e.Params.Hiding })
		}, []string{"3:approval_digest_mismatch(params_digest):request=1,verdict=2"}},
		{"params size", func(c *lifecycle) {
			r, id := c.request()
			c.verdict(id, r, "alice", entry.Approve)
			c.consume(id, r, func(e *entry.Entry) { e.Params.Size++ })
		}, []string{"3:approval_digest_mismatch(params_size):request=1,verdict=2"}},
		{"another principal", func(c *lifecycle) {
			r, id := c.request()
			c.verdict(id, r, "alice", entry.Approve)
			c.consume(id, r, func(e *entry.Entry) { e.Principal = "agent-2" })
		}, []string{"3:approval_mismatch(principal):request=1,verdict=2"}},
		{"another mediator", func(c *lifecycle) {
			r, id := c.request()
			c.verdict(id, r, "alice", entry.Approve)
			c.consume(id, r, func(e *entry.Entry) { e.Mediator = "mediator-2" })
		}, []string{"3:approval_mismatch(mediator):request=1,verdict=2"}},
		{"another action", func(c *lifecycle) {
			r, id := c.request()
			c.verdict(id, r, "alice", entry.Approve)
			c.consume(id, r, func(e *entry.Entry) { e.Action = "refund_payment" })
		}, []string{"3:approval_mismatch(action):request=1,verdict=2"}},
		{"verdict at the pending deadline", func(c *lifecycle) {
			r, id := c.request()
			c.add(entry.Entry{Kind: entry.KindApproval, ApprovalID: id, Request: r, Approver: "alice",
				Verdict: entry.Approve, PreviewDigest: logtest.Digest("preview"), Time: c.now.Add(-time.Second).Add(24 * time.Hour)})
			c.consume(id, r, nil)
		}, []string{"2:verdict_late:request=1", "3:approval_pending:request=1"}},
		{"verdict one millisecond before the pending deadline", func(c *lifecycle) {
			r, id := c.request()
			c.add(entry.Entry{Kind: entry.KindApproval, ApprovalID: id, Request: r, Approver: "alice",
				Verdict: entry.Approve, PreviewDigest: logtest.Digest("preview"), Time: c.now.Add(-time.Second).Add(24*time.Hour - time.Millisecond)})
		}, nil},
		{"self-approval", func(c *lifecycle) {
			r, id := c.request()
			c.verdict(id, r, "agent-1", entry.Approve)
		}, []string{"2:self_approval:request=1"}},
		{"verdict repeated", func(c *lifecycle) {
			r, id := c.request()
			c.verdict(id, r, "alice", entry.Reject)
			c.verdict(id, r, "bob", entry.Approve)
		}, []string{"3:verdict_repeated:request=1,verdict=2"}},
		{"verdict on an allow decision", func(c *lifecycle) {
			r, id := c.decision(entry.Allow, "agent-1", "make_payment", payParams)
			c.verdict(id, r, "alice", entry.Approve)
		}, []string{"2:approval_not_found:claimed_request=1"}},
		{"verdict naming another entry's hash", func(c *lifecycle) {
			r, _ := c.request()
			c.verdict(c.log.Hash(0), r, "alice", entry.Approve)
		}, []string{"2:approval_not_found:claimed_request=1"}},
		{"wrong approval id with matching terms", func(c *lifecycle) {
			ra, ida := c.request()
			c.verdict(ida, ra, "alice", entry.Approve)
			rb, idb := c.request()
			c.verdict(idb, rb, "alice", entry.Approve)
			c.consume(idb, ra, nil) // b's id, a's request
			c.consume(ida, ra, nil) // a itself is still unspent
		}, []string{"5:approval_not_found:claimed_request=1,request=3"}},
		{"outcome for a consumption that does not exist", func(c *lifecycle) {
			r, id := c.request()
			a := c.verdict(id, r, "alice", entry.Approve)
			c.outcome(id, a, "mediator-1", entry.Succeeded)
		}, []string{"3:outcome_no_consumption:consumption=2"}},
		{"outcome after a final outcome", func(c *lifecycle) {
			r, id := c.request()
			c.verdict(id, r, "alice", entry.Approve)
			k := c.consume(id, r, nil)
			c.outcome(id, k, "mediator-1", entry.Failed)
			c.outcome(id, k, "mediator-1", entry.Succeeded)
		}, []string{"5:outcome_after_final:consumption=3,outcome=4"}},
		{"outcome by another mediator", func(c *lifecycle) {
			r, id := c.request()
			c.verdict(id, r, "alice", entry.Approve)
			k := c.consume(id, r, nil)
			c.outcome(id, k, "mediator-2", entry.Succeeded)
		}, []string{"4:outcome_mismatch(mediator):consumption=3"}},
		{"outcome for another approval", func(c *lifecycle) {
			r, id := c.request()
			c.verdict(id, r, "alice", entry.Approve)
			k := c.consume(id, r, nil)
			c.outcome(c.log.Hash(0), k, "mediator-1", entry.Succeeded)
		}, []string{"4:outcome_mismatch(approval):consumption=3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newLifecycle(t)
			c.config(24*time.Hour, time.Hour)
			tc.lie(c)
			rep := c.auditAll()
			if got := findings(rep.Violations); !slices.Equal(got, tc.want) {
				t.Errorf("violations:\n got %q\nwant %q", got, tc.want)
			}
			if rep.OK() != (len(tc.want) == 0) || rep.ViolationCount != uint64(len(tc.want)) || rep.UnresolvedCount != 0 {
				t.Errorf("OK %v, %d violations, %d unresolved", rep.OK(), rep.ViolationCount, rep.UnresolvedCount)
			}
		})
	}
}

// A needs_approval decision with no approval_config before it, in a log
// read from index 0, opens no approval.
func TestApprovalsNoConfig(t *testing.T) {
	c := newLifecycle(t)
	r, id := c.request()
	c.verdict(id, r, "alice", entry.Approve)
	c.consume(id, r, nil)
	rep := c.auditAll()
	want := []string{"1:approval_not_found:claimed_request=0", "2:approval_not_found:claimed_request=0"}
	if got := findings(rep.Violations); !slices.Equal(got, want) || rep.Opened != 0 {
		t.Errorf("violations %q (want %q), opened %d", got, want, rep.Opened)
	}
}

// A partial export whose verdicts, consumptions and outcomes refer to
// requests, consumptions and the config before its range: unresolved,
// not violations; what the range itself shows is still checked.
func TestApprovalsPartialExport(t *testing.T) {
	c := newLifecycle(t)
	c.config(24*time.Hour, time.Hour) // 0
	r1, id1 := c.request()            // 1
	r2, id2 := c.request()            // 2
	c.verdict(id2, r2, "alice", entry.Approve)
	r3, id3 := c.request() // 4
	c.verdict(id3, r3, "alice", entry.Approve)
	k3 := c.consume(id3, r3, nil) // 6
	r4, id4 := c.request()        // 7
	c.verdict(id4, r4, "alice", entry.Approve)
	start := c.log.Len()                       // 9
	c.verdict(id1, r1, "alice", entry.Approve) // 9: request before the range
	c.consume(id1, r1, nil)                    // 10
	c.consume(id2, r2, nil)                    // 11: verdict before the range too
	c.outcome(id3, k3, "mediator-1", entry.Succeeded)
	c.request() // 13: no config in the range: its deadline is unknown
	rep, err := c.audit(start, c.log.Len())
	if err != nil {
		t.Fatal(err)
	}
	wantUnresolved := []string{
		"9:request_before_range:request=1",
		"10:request_before_range:request=1",
		"10:config_before_range:request=1,verdict=9",
		"11:request_before_range:request=2",
		"12:consumption_before_range:consumption=6",
	}
	if got := findings(rep.Unresolved); !slices.Equal(got, wantUnresolved) {
		t.Errorf("unresolved:\n got %q\nwant %q", got, wantUnresolved)
	}
	want := "configs=0 opened=1 approved=1 denied=0 expired_pending=0 expired_execution=0 pending=1 unconsumed=0 consumed=2 succeeded=1 failed=0 unknown=0 without_outcome=2 violations=0 unresolved=5"
	if got := counts(rep); got != want || !rep.OK() {
		t.Errorf("counts:\n got %s\nwant %s\nviolations %q", got, want, findings(rep.Violations))
	}

	// What the range shows is checked: a second consumption of an
	// approval consumed in the range, a consumption of one denied in it.
	c.consume(id1, r1, nil)                  // 14
	c.verdict(id4, r4, "bob", entry.Approve) // 15: the range cannot tell (4's verdict is at 8)
	c.request()
	rep, err = c.audit(start, c.log.Len())
	if err != nil {
		t.Fatal(err)
	}
	wantViolations := []string{"14:approval_consumed:request=1,verdict=9,consumption=10"}
	if got := findings(rep.Violations); !slices.Equal(got, wantViolations) {
		t.Errorf("violations:\n got %q\nwant %q", got, wantViolations)
	}
	// The same log from index 0: the second verdict on 7 is caught.
	rep = c.auditAll()
	wantViolations = []string{"14:approval_consumed:request=1,verdict=9,consumption=10", "15:verdict_repeated:request=7,verdict=8"}
	if got := findings(rep.Violations); !slices.Equal(got, wantViolations) || rep.UnresolvedCount != 0 {
		t.Errorf("from 0: violations:\n got %q\nwant %q\nunresolved %q", got, wantViolations, findings(rep.Unresolved))
	}
}

// An export that does not verify gives VerifyExport's failure.
func TestApprovalsExportFails(t *testing.T) {
	c := newLifecycle(t)
	honestLog(c)
	data, err := c.log.Export(0, c.log.Len())
	if err != nil {
		t.Fatal(err)
	}
	other := newLifecycle(t)
	key, _ := verify.ParseKey(other.log.VerifierKey)
	if _, err := verify.VerifyApprovals(bytes.NewReader(data), key, verify.ExportOptions{}); !isCheck(err, verify.CheckCheckpointSignature) {
		t.Fatalf("another key: %v", err)
	}
}
