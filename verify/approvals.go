package verify

import (
	"bytes"
	"io"
	"time"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
)

// Rule names a rule of the approval lifecycle (docs/approvals.md) that an
// entry breaks, or, for an unresolved reference, what lies before the
// export's range. The names are stable: they appear in ledger-verify's
// --json output. The consumption rules carry the names of the ledger's
// refusals of a consumption.
type Rule string

// The violations. Each is found at the entry that breaks the rule; an
// entry that breaks one changes no approval's state.
const (
	// RuleNotFound: a verdict or consumption names no open approval: the
	// entry at its request index is not a needs_approval decision that
	// opened one (an allow decision, say, or a request with no
	// approval_config before it), or the approval id is not the entry
	// hash of that request.
	RuleNotFound Rule = "approval_not_found"
	// RuleVerdictRepeated: a verdict on an approval that has one.
	RuleVerdictRepeated Rule = "verdict_repeated"
	// RuleVerdictLate: a verdict at or after the pending deadline.
	RuleVerdictLate Rule = "verdict_late"
	// RuleSelfApproval: the approver is the request's principal.
	RuleSelfApproval Rule = "self_approval"
	// RulePending: a consumption of an approval without a verdict.
	RulePending Rule = "approval_pending"
	// RuleDenied: a consumption of a denied approval.
	RuleDenied Rule = "approval_denied"
	// RuleExpired: a consumption at or after the execution deadline.
	RuleExpired Rule = "approval_expired"
	// RuleConsumed: a consumption of an approval consumed before (a
	// double spend).
	RuleConsumed Rule = "approval_consumed"
	// RuleDigestMismatch: a consumption whose params_digest or
	// params_size (Member) differs from the request's.
	RuleDigestMismatch Rule = "approval_digest_mismatch"
	// RuleMismatch: a consumption whose action, principal or mediator
	// (Member) differs from the request's.
	RuleMismatch Rule = "approval_mismatch"
	// RuleNoConsumption: an outcome whose consumption index is not a
	// consumption entry.
	RuleNoConsumption Rule = "outcome_no_consumption"
	// RuleOutcomeMismatch: an outcome whose approval or mediator (Member)
	// differs from its consumption's; or an outcome of an allowed act
	// whose mediator (Member) differs from its decision's.
	RuleOutcomeMismatch Rule = "outcome_mismatch"
	// RuleAfterFinal: an outcome for a consumption, or of an allowed act
	// for a decision, that already has a final one (succeeded or failed).
	RuleAfterFinal Rule = "outcome_after_final"
	// RuleNoDecision: an outcome of an allowed act (version 5) whose
	// decision index is not an allow decision (version 1 or 2, or a
	// version 3 decision, whose decision is allow).
	RuleNoDecision Rule = "outcome_no_decision"
)

// The unresolved references: a rule that could not be checked because
// what it needs lies before the export's range. They are not failures.
const (
	// RequestBeforeRange: a verdict or consumption whose request (Refers)
	// precedes the range: whether it opened an approval, its terms, its
	// principal and its deadlines are unknown. What the range itself
	// shows is still checked (a second verdict, a second consumption, a
	// consumption of an approval denied in the range).
	RequestBeforeRange Rule = "request_before_range"
	// ConsumptionBeforeRange: an outcome whose consumption precedes the
	// range.
	ConsumptionBeforeRange Rule = "consumption_before_range"
	// DecisionBeforeRange: an outcome of an allowed act whose decision
	// precedes the range: whether it is an allow decision, and its
	// mediator, are unknown (a second final outcome in the range is still
	// found).
	DecisionBeforeRange Rule = "decision_before_range"
	// ConfigBeforeRange: a deadline could not be computed because no
	// approval_config precedes, in the range, the request (pending
	// deadline) or the verdict (execution deadline) that sets it.
	ConfigBeforeRange Rule = "config_before_range"
)

// Role says what a referred entry is to the entry of a Finding. The
// names are stable.
type Role string

const (
	RoleRequest     Role = "request"     // the needs_approval decision
	RoleVerdict     Role = "verdict"     // an approval entry
	RoleConsumption Role = "consumption" // a consumption entry
	RoleOutcome     Role = "outcome"     // an outcome entry
	RoleDecision    Role = "decision"    // the allow decision an outcome of an allowed act reports on
	// RoleClaimed is a request index an entry names that is not the
	// request of the approval it names (RuleNotFound).
	RoleClaimed Role = "claimed_request"
)

// Ref is an entry a finding refers to, by index.
type Ref struct {
	Role  Role
	Index uint64
}

// Finding is a violation, or an unresolved reference, at one entry. It
// names entries by index and members by name, never a value.
type Finding struct {
	Index uint64     // the entry that breaks the rule, or refers back
	Kind  entry.Kind // its kind: approval, consumption or outcome
	Rule  Rule
	// Member is the differing member for RuleDigestMismatch,
	// RuleMismatch and RuleOutcomeMismatch, else empty.
	Member string
	// Refers are the entries the finding involves, in the range or
	// (for an unresolved reference) before it.
	Refers []Ref
}

// MaxListedFindings bounds ApprovalReport.Violations and .Unresolved,
// so that memory does not grow with an export that fails everywhere.
const MaxListedFindings = 10000

// OutcomeCounts counts outcome entries by result.
type OutcomeCounts struct {
	Succeeded, Failed, Unknown uint64
}

// ApprovalReport sums up the approval lifecycles of an export. Counts
// are of entries that break no rule (those with an unresolved reference
// included); expiry is judged at the time of the export's last entry.
type ApprovalReport struct {
	Export *ExportReport
	// Configs counts approval_config entries.
	Configs uint64
	// Opened counts the needs_approval decisions of the range that open
	// an approval (an approval_config precedes them in the log; in an
	// export from a later index, one may precede the range).
	Opened uint64
	// Approved and Denied count verdicts.
	Approved, Denied uint64
	// ExpiredPending counts approvals opened in the range without a
	// verdict by their pending deadline; ExpiredExecution approvals
	// approved and not consumed by their execution
	// deadline. Pending and Unconsumed count those whose deadline has not
	// passed (or is unknown) at the last entry's time. An approval
	// opened before the range is counted here only once the range holds
	// its verdict.
	ExpiredPending, ExpiredExecution uint64
	Pending, Unconsumed              uint64
	// Consumed counts consumptions.
	Consumed uint64
	// Outcomes counts outcomes by result; WithoutOutcome the counted
	// consumptions that no outcome of the range reports on.
	Outcomes       OutcomeCounts
	WithoutOutcome uint64
	// Allowed counts the allow decisions of the range (versions 1 to 3);
	// AllowedOutcomes the outcomes of allowed acts (version 5) by result;
	// AllowedWithoutOutcome the allow decisions of the range that no
	// outcome of the range reports on (not a violation: a mediator
	// without a gateway may report none).
	Allowed               uint64
	AllowedOutcomes       OutcomeCounts
	AllowedWithoutOutcome uint64
	// Violations lists the violations in entry order, at most
	// MaxListedFindings; ViolationCount counts them all.
	Violations     []Finding
	ViolationCount uint64
	// Unresolved lists the unresolved references likewise.
	Unresolved      []Finding
	UnresolvedCount uint64
}

// OK reports whether no entry breaks a lifecycle rule.
func (r *ApprovalReport) OK() bool { return r.ViolationCount == 0 }

// VerifyApprovals verifies an export (as VerifyExport does; its failure
// is returned as is) and checks the approval lifecycle of docs/approvals.md
// over its entries, in index order:
//
//   - an approval_config entry sets the pending and execution TTLs in
//     force from it on;
//   - a decision (versions 1 to 3) with decision needs_approval at index r
//     opens an approval when an approval_config precedes it; its id is the
//     entry hash of r, its pending deadline time(r) + the pending TTL in
//     force at r;
//   - a verdict (approval entry) at a must name an open approval by its
//     id and request index, be its first verdict, come strictly before
//     the pending deadline, and be by an approver other than the
//     request's principal; approve sets the execution deadline time(a) +
//     the execution TTL in force at a;
//   - a consumption at c must name an approved approval by id and request
//     index, be its first consumption, come strictly before the
//     execution deadline, and carry the request's mediator, principal,
//     action, params_digest and params_size;
//   - an outcome must name a consumption of the same approval by the same
//     mediator, and follow no final (succeeded or failed) outcome of it;
//   - an outcome of an allowed act (version 5; docs/entry.md "Outcomes of
//     allowed acts") must name an allow decision (versions 1 to 3) by the
//     same mediator, and follow no final outcome of it.
//
// The outcomes of allowed acts are checked here, not by VerifyDecisions:
// like an approval's, they are rules of a lifecycle (an act allowed, then
// reported on), read from entry indexes alone, whereas VerifyDecisions
// replays what a policy set decided.
//
// A rule that needs an entry before the export's range is not checked;
// the entry is listed as an unresolved reference instead.
//
// Entries are read once and not held: memory is O(approvals and
// consumptions in the export) (a small record for each), and 8 bytes for
// each entry of the range (whether it is an allow decision, its mediator
// as a number, and what its outcomes were), so that an outcome of an
// allowed act can name any decision before it.
func VerifyApprovals(r io.Reader, key *Key, opts ExportOptions) (*ApprovalReport, error) {
	a := &auditor{report: &ApprovalReport{}, approvals: map[commit.Digest]*approvalState{},
		consumptions: map[uint64]*consumptionState{}, mediators: map[string]uint32{},
		foreignDecisions: map[uint64]*foreignDecision{}}
	outer := opts.OnEntry
	opts.OnEntry = func(index uint64, b []byte) {
		if outer != nil {
			outer(index, b)
		}
		a.entry(index, b)
	}
	report, err := VerifyExport(r, key, opts)
	if err != nil {
		return nil, err
	}
	a.finish(report)
	return a.report, nil
}

// approvalState is what the audit knows of one approval.
type approvalState struct {
	request uint64
	// foreign: the request precedes the range; terms, principal and the
	// pending deadline are unknown.
	foreign bool
	// The request's terms (not foreign).
	mediator, principal, action string
	params                      commit.Commitment
	pending                     *time.Time // deadline, nil if unknown

	verdict   entry.Verdict // "" until a verdict in the range
	verdictAt uint64
	execution *time.Time // deadline once approved, nil if unknown

	consumed   bool // by an entry of the range
	consumedAt uint64
}

// consumptionState is what outcomes need of a consumption entry.
type consumptionState struct {
	approval commit.Digest
	mediator string
	counted  bool // a counted consumption (not a violation)
	foreign  bool // before the range: known from its outcomes only
	reported bool // an outcome reports on it
	final    bool
	finalAt  uint64
}

type auditor struct {
	report       *ApprovalReport
	approvals    map[commit.Digest]*approvalState
	consumptions map[uint64]*consumptionState
	start        uint64
	started      bool
	// pendingTTL and executionTTL are the TTLs in force (nil: none seen
	// in the range).
	pendingTTL, executionTTL *time.Duration
	last                     []byte // the last entry read

	// decisions[i-start] is what the outcomes of allowed acts need of the
	// entry at index i of the range; mediators numbers the decisions'
	// mediators (from 1), names holds them by number-1.
	decisions []decisionSlot
	mediators map[string]uint32
	names     []string
	// foreignDecisions are the decisions before the range that outcomes
	// of the range name.
	foreignDecisions map[uint64]*foreignDecision
}

// decisionSlot is what the audit keeps of one entry for the outcomes of
// allowed acts.
type decisionSlot struct {
	// mediator is 0 unless the entry is an allow decision, then its
	// mediator's number.
	mediator uint32
	// outcome is 0 before any outcome of the decision, 1 after outcomes
	// none of which is final, and 1 + (f - decision) once the outcome at
	// f is final (outcomeFinalFar when that does not fit).
	outcome uint32
}

const outcomeFinalFar = ^uint32(0)

// foreignDecision is what the range tells of a decision before it.
type foreignDecision struct {
	final   bool
	finalAt uint64
}

var (
	needsApprovalMember = []byte(`"decision":"needs_approval"`)
	allowMember         = []byte(`"decision":"allow"`)
	version4Suffix      = []byte(`"version":4}`)
	version5Suffix      = []byte(`"version":5}`)
)

// entry handles one entry: only decisions that may be allow or
// needs_approval and version 4 and 5 entries are parsed (the canonical
// form puts "version" last; the decision member may also be found in
// attributes, so the parsed entry decides).
func (a *auditor) entry(index uint64, b []byte) {
	if !a.started {
		a.start, a.started = index, true
	}
	a.last = b
	a.decisions = append(a.decisions, decisionSlot{})
	if !bytes.HasSuffix(b, version4Suffix) && !bytes.HasSuffix(b, version5Suffix) &&
		!bytes.Contains(b, needsApprovalMember) && !bytes.Contains(b, allowMember) {
		return
	}
	e, err := entry.Parse(b)
	if err != nil {
		return // VerifyExport reports it
	}
	switch e.Kind {
	case "", entry.KindDecision:
		switch e.Decision {
		case entry.NeedsApproval:
			a.request(e)
		case entry.Allow:
			a.allowed(e)
		}
	case entry.KindApprovalConfig:
		a.report.Configs++
		p, x := e.PendingTTL, e.ExecutionTTL
		a.pendingTTL, a.executionTTL = &p, &x
	case entry.KindApproval:
		a.verdict(e)
	case entry.KindConsumption:
		a.consumption(e)
	case entry.KindOutcome:
		if e.Version() == entry.Version5 {
			a.decisionOutcome(e)
		} else {
			a.outcome(e)
		}
	}
}

// allowed records an allow decision of the range.
func (a *auditor) allowed(e *entry.Entry) {
	n, ok := a.mediators[e.Mediator]
	if !ok {
		a.names = append(a.names, e.Mediator)
		n = uint32(len(a.names))
		a.mediators[e.Mediator] = n
	}
	a.decisions[e.Index-a.start].mediator = n
	a.report.Allowed++
}

// decisionOutcome checks an outcome of an allowed act: its decision is
// an allow decision by the same mediator, without a final outcome before.
func (a *auditor) decisionOutcome(e *entry.Entry) {
	d := e.DecisionIndex
	dref := Ref{RoleDecision, d}
	final := e.Result != entry.Unknown
	if d < a.start {
		a.add(false, e, DecisionBeforeRange, "", dref)
		fd := a.foreignDecisions[d]
		if fd == nil {
			fd = &foreignDecision{}
			a.foreignDecisions[d] = fd
		}
		if fd.final {
			a.add(true, e, RuleAfterFinal, "", dref, Ref{RoleOutcome, fd.finalAt})
			return
		}
		a.countAllowedOutcome(e.Result)
		if final {
			fd.final, fd.finalAt = true, e.Index
		}
		return
	}
	// The entry format puts d before e, which is in the range.
	slot := &a.decisions[d-a.start]
	if slot.mediator == 0 {
		a.add(true, e, RuleNoDecision, "", dref)
		return
	}
	ok := true
	if a.names[slot.mediator-1] != e.Mediator {
		a.add(true, e, RuleOutcomeMismatch, "mediator", dref)
		ok = false
	}
	if slot.outcome > 1 {
		refs := []Ref{dref}
		if slot.outcome != outcomeFinalFar {
			refs = append(refs, Ref{RoleOutcome, d + uint64(slot.outcome) - 1})
		}
		a.add(true, e, RuleAfterFinal, "", refs...)
		ok = false
	}
	if !ok {
		return
	}
	a.countAllowedOutcome(e.Result)
	switch {
	case !final:
		slot.outcome = 1
	case e.Index-d < uint64(outcomeFinalFar-1):
		slot.outcome = uint32(e.Index-d) + 1
	default:
		slot.outcome = outcomeFinalFar
	}
}

func (a *auditor) countAllowedOutcome(r entry.Result) {
	switch r {
	case entry.Succeeded:
		a.report.AllowedOutcomes.Succeeded++
	case entry.Failed:
		a.report.AllowedOutcomes.Failed++
	default:
		a.report.AllowedOutcomes.Unknown++
	}
}

// add records a finding.
func (a *auditor) add(violation bool, e *entry.Entry, rule Rule, member string, refers ...Ref) {
	list, count := &a.report.Unresolved, &a.report.UnresolvedCount
	if violation {
		list, count = &a.report.Violations, &a.report.ViolationCount
	}
	*count++
	if len(*list) < MaxListedFindings {
		*list = append(*list, Finding{Index: e.Index, Kind: e.Kind, Rule: rule, Member: member, Refers: refers})
	}
}

func deadline(t time.Time, ttl *time.Duration) *time.Time {
	if ttl == nil {
		return nil
	}
	d := t.Add(*ttl)
	return &d
}

func (a *auditor) request(e *entry.Entry) {
	if a.pendingTTL == nil && a.start == 0 {
		return // no approval_config precedes it: it opens no approval
	}
	id, err := e.Hash()
	if err != nil {
		return
	}
	a.report.Opened++
	a.approvals[id] = &approvalState{request: e.Index, mediator: e.Mediator, principal: e.Principal,
		action: e.Action, params: e.Params, pending: deadline(e.Time, a.pendingTTL)}
}

// lookup returns the state of the approval an entry names by id and
// request index, or nil after recording why there is none: a violation,
// or an unresolved reference to a request before the range (then a
// foreign state is returned too, so that the range's own facts about
// the approval are still checked).
func (a *auditor) lookup(e *entry.Entry) *approvalState {
	st := a.approvals[e.ApprovalID]
	switch {
	case st != nil && st.request == e.Request:
		if st.foreign {
			a.add(false, e, RequestBeforeRange, "", Ref{RoleRequest, e.Request})
		}
		return st
	case st != nil && !st.foreign:
		a.add(true, e, RuleNotFound, "", Ref{RoleClaimed, e.Request}, Ref{RoleRequest, st.request})
		return nil
	case e.Request >= a.start:
		a.add(true, e, RuleNotFound, "", Ref{RoleClaimed, e.Request})
		return nil
	case st != nil:
		// Two entries give one id two requests before the range: at most
		// one is right, and the range cannot tell which.
		a.add(false, e, RequestBeforeRange, "", Ref{RoleRequest, e.Request})
		return nil
	}
	a.add(false, e, RequestBeforeRange, "", Ref{RoleRequest, e.Request})
	st = &approvalState{request: e.Request, foreign: true}
	a.approvals[e.ApprovalID] = st
	return st
}

func (a *auditor) verdict(e *entry.Entry) {
	st := a.lookup(e)
	if st == nil {
		return
	}
	req := Ref{RoleRequest, st.request}
	ok := true
	if st.verdict != "" {
		a.add(true, e, RuleVerdictRepeated, "", req, Ref{RoleVerdict, st.verdictAt})
		ok = false
	}
	if !st.foreign {
		switch {
		case st.pending == nil:
			a.add(false, e, ConfigBeforeRange, "", req)
		case !e.Time.Before(*st.pending):
			a.add(true, e, RuleVerdictLate, "", req)
			ok = false
		}
		if e.Approver == st.principal {
			a.add(true, e, RuleSelfApproval, "", req)
			ok = false
		}
	}
	if !ok {
		return
	}
	st.verdict, st.verdictAt = e.Verdict, e.Index
	if e.Verdict == entry.Approve {
		a.report.Approved++
		st.execution = deadline(e.Time, a.executionTTL)
	} else {
		a.report.Denied++
	}
}

func (a *auditor) consumption(e *entry.Entry) {
	cs := &consumptionState{approval: e.ApprovalID, mediator: e.Mediator}
	a.consumptions[e.Index] = cs
	st := a.lookup(e)
	if st == nil {
		return
	}
	req := Ref{RoleRequest, st.request}
	refers := []Ref{req}
	if st.verdict != "" {
		refers = append(refers, Ref{RoleVerdict, st.verdictAt})
	}
	ok := true
	switch {
	case st.verdict == "" && st.foreign:
		// The verdict may precede the range.
	case st.verdict == "":
		a.add(true, e, RulePending, "", refers...)
		ok = false
	case st.verdict != entry.Approve:
		a.add(true, e, RuleDenied, "", refers...)
		ok = false
	}
	if st.consumed {
		a.add(true, e, RuleConsumed, "", append(refers, Ref{RoleConsumption, st.consumedAt})...)
		ok = false
	}
	if st.verdict == entry.Approve {
		switch {
		case st.execution == nil:
			a.add(false, e, ConfigBeforeRange, "", refers...)
		case !e.Time.Before(*st.execution):
			a.add(true, e, RuleExpired, "", refers...)
			ok = false
		}
	}
	if !st.foreign {
		for _, m := range []struct {
			rule      Rule
			member    string
			different bool
		}{
			{RuleDigestMismatch, "params_digest", e.Params.Digest != st.params.Digest || e.Params.Hiding != st.params.Hiding},
			{RuleDigestMismatch, "params_size", e.Params.Size != st.params.Size},
			{RuleMismatch, "action", e.Action != st.action},
			{RuleMismatch, "principal", e.Principal != st.principal},
			{RuleMismatch, "mediator", e.Mediator != st.mediator},
		} {
			if m.different {
				a.add(true, e, m.rule, m.member, refers...)
				ok = false
			}
		}
	}
	if !ok {
		return
	}
	st.consumed, st.consumedAt = true, e.Index
	cs.counted = true
	a.report.Consumed++
}

func (a *auditor) outcome(e *entry.Entry) {
	cref := Ref{RoleConsumption, e.Consumption}
	cs := a.consumptions[e.Consumption]
	switch {
	case cs == nil && e.Consumption >= a.start:
		a.add(true, e, RuleNoConsumption, "", cref)
		return
	case cs == nil:
		a.add(false, e, ConsumptionBeforeRange, "", cref)
		cs = &consumptionState{approval: e.ApprovalID, mediator: e.Mediator, foreign: true}
		a.consumptions[e.Consumption] = cs
	case cs.foreign:
		a.add(false, e, ConsumptionBeforeRange, "", cref)
	}
	ok := true
	if !cs.foreign {
		if e.ApprovalID != cs.approval {
			a.add(true, e, RuleOutcomeMismatch, "approval", cref)
			ok = false
		}
		if e.Mediator != cs.mediator {
			a.add(true, e, RuleOutcomeMismatch, "mediator", cref)
			ok = false
		}
	}
	if cs.final {
		a.add(true, e, RuleAfterFinal, "", cref, Ref{RoleOutcome, cs.finalAt})
		ok = false
	}
	if !ok {
		return
	}
	cs.reported = true
	switch e.Result {
	case entry.Succeeded:
		a.report.Outcomes.Succeeded++
	case entry.Failed:
		a.report.Outcomes.Failed++
	default:
		a.report.Outcomes.Unknown++
	}
	if e.Result != entry.Unknown {
		cs.final, cs.finalAt = true, e.Index
	}
}

// finish judges expiry at the last entry's time and completes the
// report.
func (a *auditor) finish(report *ExportReport) {
	rep := a.report
	rep.Export = report
	var now time.Time
	if a.last != nil {
		if e, err := entry.Parse(a.last); err == nil {
			now = e.Time
		}
	}
	for _, st := range a.approvals {
		switch {
		case st.foreign && st.verdict == "":
			// Opened before the range, no verdict in it: unknown.
		case st.verdict == "":
			if st.pending != nil && !now.Before(*st.pending) {
				rep.ExpiredPending++
			} else {
				rep.Pending++
			}
		case st.verdict == entry.Approve && !st.consumed:
			if st.execution != nil && !now.Before(*st.execution) {
				rep.ExpiredExecution++
			} else {
				rep.Unconsumed++
			}
		}
	}
	for _, cs := range a.consumptions {
		if cs.counted && !cs.reported {
			rep.WithoutOutcome++
		}
	}
	for _, slot := range a.decisions {
		if slot.mediator != 0 && slot.outcome == 0 {
			rep.AllowedWithoutOutcome++
		}
	}
}
