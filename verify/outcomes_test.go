package verify_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/verify"
)

// allowOutcome is the outcome of the allowed act of the decision at d.
func (c *lifecycle) allowOutcome(d uint64, mediator string, r entry.Result) uint64 {
	return c.add(entry.Entry{Kind: entry.KindOutcome, DecisionIndex: d, Mediator: mediator, Result: r})
}

func allowedCounts(r *verify.ApprovalReport) string {
	return fmt.Sprintf("allowed=%d succeeded=%d failed=%d unknown=%d without_outcome=%d violations=%d unresolved=%d",
		r.Allowed, r.AllowedOutcomes.Succeeded, r.AllowedOutcomes.Failed, r.AllowedOutcomes.Unknown,
		r.AllowedWithoutOutcome, r.ViolationCount, r.UnresolvedCount)
}

// An honest log's outcomes of allowed acts: unknown then final, a version
// 3 allow decision's, one with an attribute that reads like an allow
// decision, and allow decisions without outcome.
func TestAllowOutcomesHonest(t *testing.T) {
	c := newLifecycle(t)
	d0 := c.filler() // 0
	c.allowOutcome(d0, "mediator-1", entry.Unknown)
	c.allowOutcome(d0, "mediator-1", entry.Unknown)
	c.allowOutcome(d0, "mediator-1", entry.Succeeded)
	d3 := c.add(entry.Entry{Kind: entry.KindDecision, Mediator: "mediator-2", Principal: "agent-1", Action: "make_payment",
		Decision: entry.Allow, Policies: []string{"payments.allow"}, PolicyErrors: []string{}, Params: payParams,
		Tiers: c.log.Hash(0), Attributes: []byte(`{"note":"x"}`), Definition: c.log.Hash(1), PolicySet: c.log.Hash(2)})
	c.filler() // 5: never reported on
	c.allowOutcome(d3, "mediator-2", entry.Failed)
	c.add(entry.Entry{Mediator: "mediator-1", Principal: "agent-1", Action: "send_email", Decision: entry.Deny,
		Policies: []string{}, Params: mailParams, Tiers: c.log.Hash(0), Attributes: []byte(`{"decision":"allow"}`)})
	rep := c.auditAll()
	want := "allowed=3 succeeded=1 failed=1 unknown=2 without_outcome=1 violations=0 unresolved=0"
	if got := allowedCounts(rep); got != want || !rep.OK() {
		t.Errorf("counts:\n got %s\nwant %s\nviolations %q", got, want, findings(rep.Violations))
	}
}

// TestAllowOutcomesLyingLedger writes, for each rule of the outcomes of
// allowed acts, a log signed with the log's own key (the export
// verifies) holding one outcome the ledger must never have appended; the
// audit names it, its rule and the entries it refers to, and nothing
// else. Each case fails if its rule's check is removed.
func TestAllowOutcomesLyingLedger(t *testing.T) {
	for _, tc := range []struct {
		name string
		lie  func(c *lifecycle) // the log from index 0
		want []string
	}{
		{"rule 1: an outcome of a deny decision", func(c *lifecycle) {
			d, _ := c.decision(entry.Deny, "agent-1", "make_payment", payParams)
			c.allowOutcome(d, "mediator-1", entry.Succeeded)
		}, []string{"1:outcome_no_decision:decision=0"}},
		{"rule 1: an outcome of a needs_approval decision", func(c *lifecycle) {
			d, _ := c.request()
			c.allowOutcome(d, "mediator-1", entry.Unknown)
		}, []string{"1:outcome_no_decision:decision=0"}},
		{"rule 1: an outcome of an outcome", func(c *lifecycle) {
			d := c.filler()
			o := c.allowOutcome(d, "mediator-1", entry.Unknown)
			c.allowOutcome(o, "mediator-1", entry.Unknown)
		}, []string{"2:outcome_no_decision:decision=1"}},
		{"rule 2: another mediator's decision", func(c *lifecycle) {
			d := c.filler()
			c.allowOutcome(d, "mediator-2", entry.Succeeded)
		}, []string{"1:outcome_mismatch(mediator):decision=0"}},
		{"rule 3: a second final outcome", func(c *lifecycle) {
			d := c.filler()
			c.allowOutcome(d, "mediator-1", entry.Succeeded)
			c.allowOutcome(d, "mediator-1", entry.Failed)
		}, []string{"2:outcome_after_final:decision=0,outcome=1"}},
		{"rule 3: unknown after the final outcome", func(c *lifecycle) {
			d := c.filler()
			c.allowOutcome(d, "mediator-1", entry.Unknown)
			c.allowOutcome(d, "mediator-1", entry.Failed)
			c.allowOutcome(d, "mediator-1", entry.Unknown)
		}, []string{"3:outcome_after_final:decision=0,outcome=2"}},
		{"unknown, unknown, final: no violation", func(c *lifecycle) {
			d := c.filler()
			c.allowOutcome(d, "mediator-1", entry.Unknown)
			c.allowOutcome(d, "mediator-1", entry.Unknown)
			c.allowOutcome(d, "mediator-1", entry.Succeeded)
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newLifecycle(t)
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

// A partial export: an outcome whose decision precedes the range is an
// unresolved reference, not a violation, and a second final outcome of it
// in the range is still found.
func TestAllowOutcomesPartialExport(t *testing.T) {
	c := newLifecycle(t)
	d := c.filler() // 0
	c.filler()      // 1
	start := c.log.Len()
	c.allowOutcome(d, "mediator-1", entry.Succeeded) // 2
	c.now = c.now.Add(time.Minute)
	c.allowOutcome(d, "mediator-1", entry.Failed) // 3
	rep, err := c.audit(start, c.log.Len())
	if err != nil {
		t.Fatal(err)
	}
	wantUnresolved := []string{"2:decision_before_range:decision=0", "3:decision_before_range:decision=0"}
	wantViolations := []string{"3:outcome_after_final:decision=0,outcome=2"}
	if got := findings(rep.Unresolved); !slices.Equal(got, wantUnresolved) {
		t.Errorf("unresolved:\n got %q\nwant %q", got, wantUnresolved)
	}
	if got := findings(rep.Violations); !slices.Equal(got, wantViolations) {
		t.Errorf("violations:\n got %q\nwant %q", got, wantViolations)
	}
	want := "allowed=0 succeeded=1 failed=0 unknown=0 without_outcome=0 violations=1 unresolved=2"
	if got := allowedCounts(rep); got != want {
		t.Errorf("counts:\n got %s\nwant %s", got, want)
	}
}
