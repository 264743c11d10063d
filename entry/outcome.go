package entry

import (
	"slices"

	"github.com/decisionledger/ledger/commit"
)

// Version 5 records the outcome of an allowed act (docs/entry.md §1.2,
// "Outcomes of allowed acts"): what the mediator that forwarded an
// allowed call reports of its effect. It has one kind, outcome, told
// apart from version 4's outcome of a consumed approval by its version
// (and, in an Entry, by having no ApprovalID).
const (
	Version5                = 5
	SignedDomainSeparatorV5 = "ledger/v5/entry\n"
)

// fieldsV5 returns the members of a version 5 outcome, in canonical
// order, given whether it has an operation_id (optional: absent, never
// empty): the common ones (index, key_id, kind, origin, prev, sig, time,
// version) and decision, mediator and result.
func fieldsV5(operationID bool) []string {
	f := []string{"index", "key_id", "kind", "origin", "prev", "sig", "time", "version", "decision", "mediator", "result"}
	if operationID {
		f = append(f, "operation_id")
	}
	slices.Sort(f)
	return f
}

// checkV5 checks a version 5 outcome: decision an earlier index, a
// known result, every member of other kinds zero. (Mediator and
// operation_id are checked as identifiers when encoded; mediator must
// not be empty.)
func (e *Entry) checkV5() error {
	for _, m := range []struct {
		name string
		set  bool
	}{
		{"action", e.Action != ""}, {"attributes", e.Attributes != nil},
		{"consumption", e.Consumption != 0}, {"decision", e.Decision != ""},
		{"definition_digest", e.Definition != (commit.Digest{})}, {"execution_ttl_ms", e.ExecutionTTL != 0},
		{"params_digest", e.Params != (commit.Commitment{})}, {"pending_ttl_ms", e.PendingTTL != 0},
		{"policies", e.Policies != nil}, {"policy_errors", e.PolicyErrors != nil}, {"policy_set", e.PolicySet != (commit.Digest{})},
		{"approver", e.Approver != ""}, {"preview_digest", e.PreviewDigest != (commit.Digest{})},
		{"principal", e.Principal != ""}, {"request", e.Request != 0}, {"tiers_digest", e.Tiers != (commit.Digest{})},
		{"verdict", e.Verdict != ""},
	} {
		if m.set {
			if m.name == "decision" {
				return fieldError("decision", "an entry index in a version 5 outcome, not a verdict")
			}
			return fieldError(m.name, "not a member of a version 5 outcome")
		}
	}
	if e.Result != Succeeded && e.Result != Failed && e.Result != Unknown {
		return fieldError("result", "not succeeded, failed or unknown")
	}
	if e.DecisionIndex >= e.Index {
		return fieldError("decision", "not an earlier entry")
	}
	return nil
}
