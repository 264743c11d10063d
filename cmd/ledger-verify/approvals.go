package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/internal/termtext"
	"github.com/decisionledger/ledger/verify"
)

const approvalsUsage = `Usage:
    ledger-verify approvals (--key VKEY | --key-file FILE | --trust FILE)...
                            [--trusted CHECKPOINT] [--prev HASH] [--all]
                            [--write-checkpoint FILE] [--json] EXPORT

Verify the export file EXPORT, as the export command does, then check the
approval lifecycle of its entries against docs/approvals.md, from entry
times alone: an approval_config sets the deadlines in force from it on; a
needs_approval decision after one opens an approval, whose id is its entry
hash; each verdict (approval entry) names an open request by id and index,
is its first, comes strictly before the pending deadline and is by an
approver other than the request's principal; each consumption names an
approved approval, is its first, comes strictly before the execution
deadline and carries the request's mediator, principal, action,
params_digest and params_size; each outcome names a consumption of the
same approval by the same mediator and follows no final (succeeded or
failed) outcome of it. Each outcome of an allowed act (entry version 5)
names an allow decision by the same mediator and follows no final outcome
of it. A rule that needs an entry before the export's range (a request, a
consumption, a decision, the config in force) is not checked: the
reference is reported as unresolved, which is not a failure. Expiry is
judged at the time of the export's last entry.

Options:
` + exportOptions + `
Output: a line per violation, naming the entry, its kind, the rule (and
the differing member) and the entries it refers to by index, then a line
per unresolved reference and a summary. Identifiers and attribute values
are never printed. With --json, one object:
    {"result": "valid" | "violated", "origin", "tree_size", "start", "end",
     "configs", "opened", "approved", "denied", "expired_pending",
     "expired_execution", "pending", "unconsumed", "consumed",
     "outcomes": {"succeeded", "failed", "unknown"}, "without_outcome",
     "allowed", "allowed_outcomes": {"succeeded", "failed", "unknown"},
     "allowed_without_outcome",
     "violation_count", "violations": [finding, ...],
     "unresolved_count", "unresolved": [finding, ...]}
    finding: {"index", "kind", "rule", "member" (when a member differs),
              "refers": [{"role", "index"}, ...]}
"kind" is "approval", "consumption" or "outcome". A violation's "rule" is
approval_not_found, verdict_repeated, verdict_late, self_approval,
approval_pending, approval_denied, approval_expired, approval_consumed,
approval_digest_mismatch (member params_digest or params_size),
approval_mismatch (member action, principal or mediator),
outcome_no_consumption, outcome_no_decision (an outcome of an allowed act
whose decision is not an allow decision), outcome_mismatch (member
approval or mediator) or outcome_after_final; an unresolved reference's is
request_before_range, consumption_before_range, decision_before_range or
config_before_range. "role" is request, claimed_request, verdict,
consumption, decision or outcome. The lists hold at most
10000 findings each; the counts count them all. An export that does not
verify gives the export command's {"result": "failed", "failures": [...]}.

Exit status: 0 no entry breaks a lifecycle rule (unresolved references
allowed), 1 the export does not verify or an entry breaks a rule, 2 bad
usage or unreadable input.

Examples:
    $ ledger-verify approvals --key-file ledger.vkey export.ledger
    valid: entries 0 to 15 of ledger.example.com/log: every approval lifecycle keeps its rules
      1 approval config, 5 approvals opened
      verdicts: 3 approved, 1 denied
      expired: 1 without a verdict by its pending deadline, 1 not consumed by its execution deadline
      open at the last entry: 0 awaiting a verdict, 0 approved awaiting consumption
      2 consumptions, 0 without outcome; outcomes: 2 succeeded, 0 failed, 1 unknown
      1 allow decision, 1 without outcome; outcomes of allowed acts: 0 succeeded, 0 failed, 0 unknown
      0 unresolved references
    $ ledger-verify approvals --key-file ledger.vkey lying.ledger
    entry 4: consumption: approval_consumed: request 1, verdict 2, consumption 3
    violated: entries 0 to 4 of ledger.example.com/log: 1 violation of the approval lifecycle
      ...
`

// runApprovals verifies an export, then audits its approval lifecycles.
func runApprovals(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("approvals", flag.ContinueOnError)
	var r exportRun
	r.register(fs)
	files, code, ok := parseFlags(fs, approvalsUsage, args, stdout, stderr)
	if !ok {
		return code
	}
	if len(files) != 1 {
		return usageError(stderr, "approvals", "takes exactly one export file")
	}
	key, opts, err := r.options(stderr)
	if err != nil {
		return inputError(stderr, "approvals", err)
	}
	f, br, err := openExport(files[0])
	if err != nil {
		return inputError(stderr, "approvals", err)
	}
	defer f.Close()
	meter := r.meter(stderr, &opts)
	rep, err := verify.VerifyApprovals(br, key, opts)
	meter.Finish()
	switch {
	case err != nil && isFailure(err):
		return reportFailures(stdout, stderr, err, r.json)
	case err != nil:
		return inputError(stderr, "approvals", err)
	}
	if code, ok := r.writeCheckpoint("approvals", rep.Export, stderr); !ok {
		return code
	}
	if r.json {
		writeApprovalsJSON(stdout, rep)
	} else {
		printApprovals(stdout, rep)
	}
	if !rep.OK() {
		return exitFailed
	}
	return exitOK
}

// findingLine is "KIND: RULE[ (MEMBER)]: ROLE INDEX, ...". Every part is
// one of verify's names or an index: no value from the entries.
func findingLine(f verify.Finding) string {
	rule := string(f.Rule)
	if f.Member != "" {
		rule += " (" + f.Member + ")"
	}
	refs := make([]string, len(f.Refers))
	for i, ref := range f.Refers {
		refs[i] = fmt.Sprintf("%s %d", strings.ReplaceAll(string(ref.Role), "_", " "), ref.Index)
	}
	return fmt.Sprintf("%s: %s: %s", termtext.Escape(string(f.Kind)), rule, strings.Join(refs, ", "))
}

func printApprovals(w io.Writer, rep *verify.ApprovalReport) {
	for _, f := range rep.Violations {
		termtext.PrintLine(w, "entry %d: %s", f.Index, findingLine(f))
	}
	if n := rep.ViolationCount - uint64(len(rep.Violations)); n > 0 {
		termtext.PrintLine(w, "... and %s not listed", termtext.Count(n, "more violation", "more violations"))
	}
	for _, f := range rep.Unresolved {
		termtext.PrintLine(w, "entry %d: unresolved: %s", f.Index, findingLine(f))
	}
	if n := rep.UnresolvedCount - uint64(len(rep.Unresolved)); n > 0 {
		termtext.PrintLine(w, "... and %s not listed", termtext.Count(n, "more unresolved reference", "more unresolved references"))
	}
	ex := rep.Export
	where := fmt.Sprintf("no entries (range %d to %d)", ex.Start, ex.End)
	if ex.End > ex.Start {
		where = fmt.Sprintf("entries %d to %d", ex.Start, ex.End-1)
	}
	origin := termtext.Quote(ex.Checkpoint.Origin)
	if rep.OK() {
		termtext.PrintLine(w, "valid: %s of %s: every approval lifecycle keeps its rules", where, origin)
	} else {
		termtext.PrintLine(w, "violated: %s of %s: %s of the approval lifecycle", where, origin, termtext.Count(rep.ViolationCount, "violation", "violations"))
	}
	termtext.PrintLine(w, "  %s, %s", termtext.Count(rep.Configs, "approval config", "approval configs"), termtext.Count(rep.Opened, "approval opened", "approvals opened"))
	termtext.PrintLine(w, "  verdicts: %d approved, %d denied", rep.Approved, rep.Denied)
	termtext.PrintLine(w, "  expired: %d without a verdict by its pending deadline, %d not consumed by its execution deadline", rep.ExpiredPending, rep.ExpiredExecution)
	termtext.PrintLine(w, "  open at the last entry: %d awaiting a verdict, %d approved awaiting consumption", rep.Pending, rep.Unconsumed)
	termtext.PrintLine(w, "  %s, %d without outcome; outcomes: %d succeeded, %d failed, %d unknown",
		termtext.Count(rep.Consumed, "consumption", "consumptions"), rep.WithoutOutcome, rep.Outcomes.Succeeded, rep.Outcomes.Failed, rep.Outcomes.Unknown)
	termtext.PrintLine(w, "  %s, %d without outcome; outcomes of allowed acts: %d succeeded, %d failed, %d unknown",
		termtext.Count(rep.Allowed, "allow decision", "allow decisions"), rep.AllowedWithoutOutcome,
		rep.AllowedOutcomes.Succeeded, rep.AllowedOutcomes.Failed, rep.AllowedOutcomes.Unknown)
	if ex.Start > 0 || rep.UnresolvedCount > 0 {
		termtext.PrintLine(w, "  %s (the export starts at index %d; not failures)", termtext.Count(rep.UnresolvedCount, "unresolved reference", "unresolved references"), ex.Start)
	} else {
		termtext.PrintLine(w, "  0 unresolved references")
	}
}

func writeApprovalsJSON(w io.Writer, rep *verify.ApprovalReport) {
	type ref struct {
		Role  verify.Role `json:"role"`
		Index uint64      `json:"index"`
	}
	type finding struct {
		Index  uint64      `json:"index"`
		Kind   entry.Kind  `json:"kind"`
		Rule   verify.Rule `json:"rule"`
		Member string      `json:"member,omitempty"`
		Refers []ref       `json:"refers"`
	}
	list := func(fs []verify.Finding) []finding {
		out := []finding{}
		for _, f := range fs {
			x := finding{Index: f.Index, Kind: f.Kind, Rule: f.Rule, Member: f.Member, Refers: []ref{}}
			for _, r := range f.Refers {
				x.Refers = append(x.Refers, ref{r.Role, r.Index})
			}
			out = append(out, x)
		}
		return out
	}
	ex := rep.Export
	termtext.WriteJSON(w, map[string]any{
		"result": map[bool]string{true: "valid", false: "violated"}[rep.OK()],
		"origin": ex.Checkpoint.Origin, "tree_size": ex.Checkpoint.Size, "start": ex.Start, "end": ex.End,
		"configs": rep.Configs, "opened": rep.Opened, "approved": rep.Approved, "denied": rep.Denied,
		"expired_pending": rep.ExpiredPending, "expired_execution": rep.ExpiredExecution,
		"pending": rep.Pending, "unconsumed": rep.Unconsumed, "consumed": rep.Consumed,
		"outcomes":        map[string]uint64{"succeeded": rep.Outcomes.Succeeded, "failed": rep.Outcomes.Failed, "unknown": rep.Outcomes.Unknown},
		"without_outcome": rep.WithoutOutcome,
		"allowed":         rep.Allowed,
		"allowed_outcomes": map[string]uint64{"succeeded": rep.AllowedOutcomes.Succeeded, "failed": rep.AllowedOutcomes.Failed,
			"unknown": rep.AllowedOutcomes.Unknown},
		"allowed_without_outcome": rep.AllowedWithoutOutcome,
		"violation_count":         rep.ViolationCount, "violations": list(rep.Violations),
		"unresolved_count": rep.UnresolvedCount, "unresolved": list(rep.Unresolved),
	})
}
