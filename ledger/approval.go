package ledger

import (
	"bytes"
	"cmp"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"
	"unique"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
)

// The approval lifecycle (docs/approvals.md §Lifecycle) is enforced by the
// sequencer: a verdict, consumption or outcome is checked against the
// approval state at the moment it is given its index and time, and the
// state changes in the same step, so no two records can both see an
// approval available. The state covers every entry chained before, those
// of the batch not yet durable included.
//
// Why optimistic state is safe. The state moves when an entry is chained,
// before it is durable. If the batch holding it is never made durable
// (its commit or its encoding fails), the ledger sets failed and takes no
// further append: that batch and every batch chained after it are
// answered with an error, never acknowledged. So every acknowledged entry
// was admitted against a state built only from entries that are durable
// (acknowledged ones and those chained before them in the same or earlier
// batches, which commit in order). A refusal made on the strength of an
// entry that then failed to become durable errs on the safe side (say,
// approval_consumed when the first consumption was lost); after reopen the
// state is rebuilt from the durable log alone (Open) and the mediator may
// try again.

// ErrApproval classifies the refusals of the approval lifecycle: test
// with errors.Is, read the code with errors.As(*ApprovalError).
var ErrApproval = errors.New("ledger: approval refused")

// The refusal codes of ApprovalError. They are stable: ledgerd returns
// them to callers and the offline auditor (package verify) uses the same
// names for the same rules.
const (
	CodeNotFound         = "approval_not_found"
	CodePending          = "approval_pending"
	CodeExpired          = "approval_expired"
	CodeDenied           = "approval_denied"
	CodeConsumed         = "approval_consumed"
	CodeMismatch         = "approval_mismatch"
	CodeDigestMismatch   = "approval_digest_mismatch"
	CodeDecided          = "approval_decided"
	CodeSelf             = "approval_self"
	CodeNoConsumption    = "consumption_not_found"
	CodeOutcomeFinal     = "outcome_final"
	codeTermAction       = "action"
	codeTermPrincipal    = "principal"
	codeTermMediator     = "mediator"
	codeTermApproval     = "approval"
	codeTermParamsDigest = "params_digest"
	codeTermParamsSize   = "params_size"
)

// The refusals of a version 5 outcome (the outcome of an allowed act,
// docs/entry.md "Outcomes of allowed acts"): the entry at its decision
// index is not an allow decision (CodeNoDecision), or is another
// mediator's (CodeOutcomeMismatch, Term mediator); a second final outcome
// is CodeOutcomeFinal.
const (
	CodeNoDecision      = "decision_not_found"
	CodeOutcomeMismatch = "outcome_mismatch"
)

// ApprovalError is the refusal of a verdict, consumption or outcome by
// the lifecycle's rules, or of the outcome of an allowed act by its rules
// (Record). Nothing was appended. Term names the differing member for
// approval_mismatch (action, principal, mediator, approval),
// approval_digest_mismatch (params_digest, params_size) and
// outcome_mismatch (mediator), else it is empty; the error never holds a
// value.
type ApprovalError struct {
	Code string
	Term string
	// allowed: the refusal of the outcome of an allowed act.
	allowed bool
}

func (e *ApprovalError) Error() string {
	what := "approval"
	if e.allowed {
		what = "outcome"
	}
	if e.Term != "" {
		return fmt.Sprintf("ledger: %s refused: %s (%s)", what, e.Code, e.Term)
	}
	return fmt.Sprintf("ledger: %s refused: %s", what, e.Code)
}

// Is makes errors.Is(err, ErrApproval) hold.
func (e *ApprovalError) Is(target error) bool { return target == ErrApproval }

func refuse(code, term string) *ApprovalError { return &ApprovalError{Code: code, Term: term} }

// refuseOutcome is the refusal of the outcome of an allowed act.
func refuseOutcome(code, term string) *ApprovalError {
	return &ApprovalError{Code: code, Term: term, allowed: true}
}

// ApprovalStatus is what the ledger knows of one approval, for the
// approver's page. Times are entry times (the ledger's sequencing
// clock, UTC, microseconds).
type ApprovalStatus struct {
	ID          commit.Digest // the entry hash of the request
	Request     uint64        // the request's index
	RequestTime time.Time
	// The request's terms.
	Mediator, Principal, Action string
	Params                      commit.Commitment
	// PendingDeadline: a verdict must come strictly before it.
	PendingDeadline time.Time
	// Verdict is empty until a verdict; VerdictIndex is its entry.
	Verdict      entry.Verdict
	VerdictIndex uint64
	Approver     string
	// ExecutionDeadline (after approve): a consumption must come strictly
	// before it. Zero otherwise.
	ExecutionDeadline time.Time
	// Consumed says a consumption spent the approval, at index
	// Consumption.
	Consumed    bool
	Consumption uint64
	// Outcome is the latest outcome reported for the consumption (empty
	// if none), at index OutcomeIndex.
	Outcome      entry.Result
	OutcomeIndex uint64
	// Reduced says the approval is closed and the ledger keeps only what
	// its rules still read: RequestTime, Mediator, Principal, Action,
	// Params and Approver are zero (Ledger.ReadApproval fills them).
	Reduced bool
}

// The state keeps each approval in one of two forms. An open approval
// (awaiting a verdict, or approved and neither consumed nor past its
// execution deadline) keeps its whole record: a verdict or consumption
// may still be checked against any of its terms. A closed one is reduced
// to what any later check of the rules reads, and the indexes of its
// entries:
//
//   - denied: a later verdict is approval_decided, a consumption
//     approval_denied;
//   - expired pending (no verdict, the pending deadline passed): a verdict
//     or consumption is approval_expired;
//   - lapsed (approved, not consumed, the execution deadline passed): a
//     verdict is approval_decided, a consumption approval_expired;
//   - consumed: a verdict is approval_decided, a consumption
//     approval_consumed before the execution deadline and
//     approval_expired from it on (so the deadline is kept), and an
//     outcome is checked against the approval's id, the consumption's
//     mediator and whether an outcome was final (kept, the mediator as a
//     number in a table of the consumptions' mediators).
//
// Every lookup by id (a verdict's, a consumption's) needs the request's
// index too, to refuse one naming another request when rebuilding. The
// id is kept whole, 32 bytes: a shortened one would let two approvals
// share a record, and a refusal name the wrong rule.
//
// When. Denial and consumption reduce an approval as they are chained.
// Expiry is a matter of time: an approval is reduced once its deadline
// is at or before the settled time, the time of an entry chained before
// the one being checked. Entry times never decrease with the index, so
// every entry checked later has a time at or after it, and the reduced
// record answers it as the whole one would. A refused record is not
// chained and settles nothing; nor does one admitted and then not chained
// (its signing or its batch failed), which is known when the next record
// is given the same index. The settled time is the latest lifecycle
// entry's (a needs_approval decision, a version 4 entry) and only those
// sweep: Open's replay reads exactly these entries, so the state it
// rebuilds from the log is the state the sequencer built, reductions
// included. A log whose times go back (fsck reports it; this ledger never
// writes one) may be judged otherwise after the step back.
//
// Sizes: an open approval is its record (200 bytes), its map slot (32 +
// 8 bytes) and its place in the deadline heap (8); a closed one is a map
// slot of 32 + 56 bytes, and 8 bytes more in consumptions if consumed,
// the maps' spare room aside (BenchmarkApprovalMemory measures both;
// docs/approvals.md §Lifecycle, memory).

// approval is the whole record of an open approval. Identifiers are
// interned; times are Unix microseconds.
type approval struct {
	id                          commit.Digest
	request                     uint64
	requestTime                 int64
	mediator, principal, action unique.Handle[string]
	params                      commit.Commitment
	pending                     int64 // deadline
	verdict                     entry.Verdict
	verdictIndex                uint64
	approver                    unique.Handle[string]
	execution                   int64 // deadline, after approve
	consumption                 uint64
	outcome                     entry.Result
	outcomeIndex                uint64
	slot                        int // its place in approvals.deadlines
}

// deadline is the time at which a closes if nothing else closes it first.
func (a *approval) deadline() int64 {
	if a.verdict == "" {
		return a.pending
	}
	return a.execution
}

// closedState is how a closed approval closed.
type closedState uint8

const (
	closedExpired  closedState = iota + 1 // no verdict by the pending deadline
	closedDenied                          // deny
	closedLapsed                          // approved, not consumed by the execution deadline
	closedConsumed                        // consumed
)

// results numbers the outcome results in a closedApproval; 0 is none.
var results = [...]entry.Result{"", entry.Unknown, entry.Succeeded, entry.Failed}

func resultNumber(r entry.Result) uint8 {
	for i, v := range results {
		if v == r {
			return uint8(i)
		}
	}
	panic("ledger: outcome result " + string(r)) // entry.Parse and prepare admit only these
}

// closedApproval is a closed approval, reduced; its id is the key it is
// kept under. Indexes are 0 where there is no such entry (no verdict,
// consumption or outcome is at index 0).
type closedApproval struct {
	request      uint64
	pending      int64 // deadline, reported only
	verdictIndex uint64
	execution    int64 // deadline; approved only
	consumption  uint64
	outcomeIndex uint64
	mediator     uint32 // the consumption's, in approvals.mediators; consumed only
	state        closedState
	outcome      uint8 // the latest result's number in results
}

func (c *closedApproval) verdict() entry.Verdict {
	switch c.state {
	case closedExpired:
		return ""
	case closedDenied:
		return entry.Reject
	}
	return entry.Approve
}

// approvals is the lifecycle state. The sequencer is its only writer
// (under mu, so that readers may look); readers take mu.
type approvals struct {
	mu sync.Mutex
	// The TTLs in force; configured once an approval_config was chained.
	configured               bool
	pendingTTL, executionTTL time.Duration
	open                     map[commit.Digest]*approval
	closed                   map[commit.Digest]closedApproval
	// consumptions is the index of every consumption, ascending.
	consumptions []uint64
	// mediators are the consumed approvals' mediators, numbered.
	mediators   []unique.Handle[string]
	mediatorNum map[unique.Handle[string]]uint32
	// deadlines orders the open approvals by deadline, earliest first.
	deadlines deadlineHeap
	// openPeak is the most open approvals since open was made (shrink).
	openPeak int
	// settled is a time no entry checked from now on precedes; last is
	// the latest lifecycle entry admitted, which settles its time once an
	// entry of a later index is admitted.
	settled int64
	last    struct {
		ok    bool
		index uint64
		time  int64
	}
}

func newApprovals() *approvals {
	return &approvals{open: map[commit.Digest]*approval{}, closed: map[commit.Digest]closedApproval{},
		mediatorNum: map[unique.Handle[string]]uint32{}}
}

// count is the number of approvals opened.
func (s *approvals) count() int { return len(s.open) + len(s.closed) }

// empty reports whether the state is a new one's: no lifecycle entry was
// admitted (no approval_config, no approval).
func (s *approvals) empty() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.configured && len(s.open) == 0 && len(s.closed) == 0 && !s.last.ok
}

func micros(t time.Time) int64 { return t.UnixMicro() }

func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

// deadlineHeap is a min-heap of open approvals by deadline
// (container/heap); each knows its slot.
type deadlineHeap []*approval

func (h deadlineHeap) Len() int           { return len(h) }
func (h deadlineHeap) Less(i, j int) bool { return h[i].deadline() < h[j].deadline() }
func (h deadlineHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].slot, h[j].slot = i, j
}
func (h *deadlineHeap) Push(x any) {
	a := x.(*approval)
	a.slot = len(*h)
	*h = append(*h, a)
}
func (h *deadlineHeap) Pop() any {
	old := *h
	a := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return a
}

// addOpen keeps a, an open approval.
func (s *approvals) addOpen(a *approval) {
	s.open[a.id] = a
	s.openPeak = max(s.openPeak, len(s.open))
	heap.Push(&s.deadlines, a)
}

// close reduces the open approval a to c, whose state is set.
func (s *approvals) close(a *approval, c closedApproval) {
	c.request, c.pending, c.verdictIndex = a.request, a.pending, a.verdictIndex
	if a.verdict == entry.Approve {
		c.execution = a.execution
	}
	delete(s.open, a.id)
	heap.Remove(&s.deadlines, a.slot)
	s.closed[a.id] = c
}

// consumed reduces a, consumed at index consumption by mediator.
func (s *approvals) consumed(a *approval, consumption uint64, mediator unique.Handle[string]) {
	n, ok := s.mediatorNum[mediator]
	if !ok {
		n = uint32(len(s.mediators))
		s.mediators = append(s.mediators, mediator)
		s.mediatorNum[mediator] = n
	}
	s.close(a, closedApproval{state: closedConsumed, consumption: consumption, mediator: n})
	// Consumptions are admitted in index order: this appends.
	i, _ := slices.BinarySearch(s.consumptions, consumption)
	s.consumptions = slices.Insert(s.consumptions, i, consumption)
}

// settle moves the settled time on for an entry at index, and, for a
// lifecycle entry (sweep), reduces every open approval whose deadline it
// reached. The latest lifecycle entry admitted was chained if index is
// past it; else the entry at index takes its place (that one was not
// chained: its batch or its signing failed).
func (s *approvals) settle(index uint64, sweep bool) {
	if s.last.ok {
		if index > s.last.index {
			s.settled = max(s.settled, s.last.time)
		}
		s.last.ok, s.last.index, s.last.time = false, 0, 0
	}
	for sweep && len(s.deadlines) > 0 && s.deadlines[0].deadline() <= s.settled {
		a := s.deadlines[0]
		state := closedExpired
		if a.verdict != "" {
			state = closedLapsed
		}
		s.close(a, closedApproval{state: state})
	}
	s.shrink()
}

// shrink moves the open approvals to a new map and heap once they are
// far fewer than at their peak: a Go map keeps the memory of its
// largest size, and a burst of approvals that then expired would hold it
// for good. Copying len(s.open) entries when a quarter of the peak is
// left costs O(1) a closure, amortised.
func (s *approvals) shrink() {
	if s.openPeak < 4096 || len(s.open) > s.openPeak/4 {
		return
	}
	open := make(map[commit.Digest]*approval, len(s.open))
	maps.Copy(open, s.open)
	s.open, s.openPeak = open, len(open)
	s.deadlines = slices.Clone(s.deadlines)
}

// admitted records that the entry at index, of time t, passed the rules.
func (s *approvals) admitted(index uint64, t int64) {
	s.last.ok, s.last.index, s.last.time = true, index, t
}

// admit checks e, whose Index and Time are set, against the lifecycle's
// rules and the state of every entry chained before it. It refuses with
// an *ApprovalError, changing nothing the rules read, or returns the
// change to make once e's entry hash is known (nil if e changes nothing).
// When chaining (rebuild false) it fills a verdict's or consumption's
// Request from the state; when rebuilding from the log, e's own Request
// must be the approval's.
func (s *approvals) admit(e *entry.Entry, rebuild bool) (func(hash commit.Digest), error) {
	lifecycle := false
	switch e.Kind {
	case "", entry.KindDecision:
		lifecycle = e.Decision == entry.NeedsApproval
	case entry.KindApprovalConfig, entry.KindApproval, entry.KindConsumption:
		lifecycle = true
	case entry.KindOutcome:
		// Of a consumption (version 4), not of an allowed act (version 5,
		// whose rules Append checks against the store): Open's replay
		// reads version 4 entries only.
		lifecycle = e.Version() == entry.Version4
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// Only the lifecycle's entries sweep, as Open's replay reads only
	// those: the state is the same either way.
	s.settle(e.Index, lifecycle)
	if !lifecycle {
		return nil, nil
	}
	apply, err := s.check(e, rebuild)
	if err == nil {
		s.admitted(e.Index, micros(e.Time))
	}
	return apply, err
}

// check is admit's rules, for a lifecycle entry; s.mu is held.
func (s *approvals) check(e *entry.Entry, rebuild bool) (func(hash commit.Digest), error) {
	t := micros(e.Time)
	switch e.Kind {
	case "", entry.KindDecision:
		if !s.configured {
			return nil, nil
		}
		a := &approval{request: e.Index, requestTime: t,
			mediator: unique.Make(e.Mediator), principal: unique.Make(e.Principal), action: unique.Make(e.Action),
			params: e.Params, pending: t + s.pendingTTL.Microseconds()}
		return func(h commit.Digest) {
			s.mu.Lock()
			defer s.mu.Unlock()
			a.id = h
			s.addOpen(a)
		}, nil

	case entry.KindApprovalConfig:
		return func(commit.Digest) {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.configured, s.pendingTTL, s.executionTTL = true, e.PendingTTL, e.ExecutionTTL
		}, nil

	case entry.KindApproval:
		a, c, err := s.lookup(e, rebuild)
		switch {
		case err != nil:
			return nil, err
		case c != nil && c.state == closedExpired:
			return nil, refuse(CodeExpired, "")
		case c != nil || a.verdict != "":
			return nil, refuse(CodeDecided, "")
		case t >= a.pending: // expired at equality
			return nil, refuse(CodeExpired, "")
		case e.Approver == a.principal.Value():
			return nil, refuse(CodeSelf, "")
		}
		verdict, approver, index := e.Verdict, unique.Make(e.Approver), e.Index
		execution := t + s.executionTTL.Microseconds()
		return func(commit.Digest) {
			s.mu.Lock()
			defer s.mu.Unlock()
			a.verdict, a.approver, a.verdictIndex = verdict, approver, index
			if verdict != entry.Approve {
				s.close(a, closedApproval{state: closedDenied})
				return
			}
			a.execution = execution
			heap.Fix(&s.deadlines, a.slot)
		}, nil

	case entry.KindConsumption:
		a, c, err := s.lookup(e, rebuild)
		if err != nil {
			return nil, err
		}
		if c != nil {
			switch c.state {
			case closedExpired, closedLapsed:
				return nil, refuse(CodeExpired, "")
			case closedDenied:
				return nil, refuse(CodeDenied, "")
			}
			if t >= c.execution { // expired at equality
				return nil, refuse(CodeExpired, "")
			}
			return nil, refuse(CodeConsumed, "")
		}
		switch {
		case a.verdict == "" && t < a.pending:
			return nil, refuse(CodePending, "")
		case a.verdict == "": // the pending deadline passed
			return nil, refuse(CodeExpired, "")
		case t >= a.execution: // approved; expired at equality
			return nil, refuse(CodeExpired, "")
		case e.Action != a.action.Value():
			return nil, refuse(CodeMismatch, codeTermAction)
		case e.Principal != a.principal.Value():
			return nil, refuse(CodeMismatch, codeTermPrincipal)
		case e.Mediator != a.mediator.Value():
			return nil, refuse(CodeMismatch, codeTermMediator)
		case e.Params.Digest != a.params.Digest || e.Params.Hiding != a.params.Hiding:
			return nil, refuse(CodeDigestMismatch, codeTermParamsDigest)
		case e.Params.Size != a.params.Size:
			return nil, refuse(CodeDigestMismatch, codeTermParamsSize)
		}
		index := e.Index
		return func(commit.Digest) {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.consumed(a, index, a.mediator)
		}, nil

	case entry.KindOutcome:
		id := e.ApprovalID
		c, ok := s.closed[id]
		switch {
		case !ok || c.state != closedConsumed || c.consumption != e.Consumption:
			// The consumption, if there is one, is another approval's.
			if _, found := slices.BinarySearch(s.consumptions, e.Consumption); found {
				return nil, refuse(CodeMismatch, codeTermApproval)
			}
			return nil, refuse(CodeNoConsumption, "")
		case e.Mediator != s.mediators[c.mediator].Value():
			return nil, refuse(CodeMismatch, codeTermMediator)
		case results[c.outcome] == entry.Succeeded || results[c.outcome] == entry.Failed:
			return nil, refuse(CodeOutcomeFinal, "")
		}
		result, index := resultNumber(e.Result), e.Index
		return func(commit.Digest) {
			s.mu.Lock()
			defer s.mu.Unlock()
			c := s.closed[id]
			c.outcome, c.outcomeIndex = result, index
			s.closed[id] = c
		}, nil
	}
	return nil, nil
}

// lookup finds the approval a verdict or consumption names by id, open
// (a) or closed (c); the id is its own term, never looked up by the
// request's terms. When chaining it fills e.Request; when rebuilding,
// e.Request must be the approval's.
func (s *approvals) lookup(e *entry.Entry, rebuild bool) (a *approval, c *closedApproval, err error) {
	var request uint64
	if a = s.open[e.ApprovalID]; a != nil {
		request = a.request
	} else if v, ok := s.closed[e.ApprovalID]; ok {
		c, request = &v, v.request
	} else {
		return nil, nil, refuse(CodeNotFound, "")
	}
	if request >= e.Index || (rebuild && e.Request != request) {
		return nil, nil, refuse(CodeNotFound, "")
	}
	e.Request = request
	return a, c, nil
}

// status reports a as an ApprovalStatus, as the durable entries
// [0, durable) tell it: a verdict, consumption or outcome chained but not
// yet durable is left out (an outcome that is not durable hides the one
// before it too, as only the latest is kept).
func (a *approval) status(durable uint64) ApprovalStatus {
	st := ApprovalStatus{
		ID: a.id, Request: a.request, RequestTime: fromMicros(a.requestTime),
		Mediator: a.mediator.Value(), Principal: a.principal.Value(), Action: a.action.Value(),
		Params: a.params, PendingDeadline: fromMicros(a.pending),
	}
	if a.verdict == "" || a.verdictIndex >= durable {
		return st
	}
	st.Verdict, st.VerdictIndex, st.Approver = a.verdict, a.verdictIndex, a.approver.Value()
	if a.verdict == entry.Approve {
		st.ExecutionDeadline = fromMicros(a.execution)
	}
	return st
}

// status reports c, the closed approval id, as approval.status does; the
// request's terms and time and the approver are not kept (Reduced).
func (c *closedApproval) status(id commit.Digest, durable uint64) ApprovalStatus {
	st := ApprovalStatus{ID: id, Request: c.request, PendingDeadline: fromMicros(c.pending), Reduced: true}
	if c.state == closedExpired || c.verdictIndex >= durable {
		return st
	}
	st.Verdict, st.VerdictIndex = c.verdict(), c.verdictIndex
	if st.Verdict == entry.Approve {
		st.ExecutionDeadline = fromMicros(c.execution)
	}
	if c.state == closedConsumed && c.consumption < durable {
		st.Consumed, st.Consumption = true, c.consumption
		if c.outcome != 0 && c.outcomeIndex < durable {
			st.Outcome, st.OutcomeIndex = results[c.outcome], c.outcomeIndex
		}
	}
	return st
}

// Approval returns the state of the approval with the given id (the entry
// hash of its request), and whether there is one, as the durable entries
// tell it: what a batch still being made durable holds is not reported
// (an approval whose request is not durable yet is not found), so that
// every index it reports can be read. The sequencer's own checks see every
// entry chained.
//
// A closed approval (denied, expired, consumed) is reduced: its status
// has Reduced set and holds its id, request index, deadlines, verdict,
// consumption and outcome with their indexes, but not the request's
// terms and time nor the approver; ReadApproval reads those from the
// entries.
func (l *Ledger) Approval(id commit.Digest) (ApprovalStatus, bool) {
	return l.approvals.statusOf(id, l.Size())
}

// statusOf is the status of approval id as the first durable entries
// tell it.
func (s *approvals) statusOf(id commit.Digest, durable uint64) (ApprovalStatus, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a := s.open[id]; a != nil && a.request < durable {
		return a.status(durable), true
	}
	if c, ok := s.closed[id]; ok && c.request < durable {
		return c.status(id, durable), true
	}
	return ApprovalStatus{}, false
}

// ReadApproval is Approval with a reduced approval's request terms and
// time read from its request entry, and its approver from its verdict
// entry: the whole status, as for an open approval. An error is the
// store's, or ErrCorrupt if those entries are not the approval's.
func (l *Ledger) ReadApproval(ctx context.Context, id commit.Digest) (ApprovalStatus, bool, error) {
	st, ok := l.Approval(id)
	if !ok || !st.Reduced {
		return st, ok, nil
	}
	read := func(index uint64) (*entry.Entry, error) {
		b, err := l.Entry(ctx, index)
		if err != nil {
			return nil, fmt.Errorf("ledger: approval %s: entry %d: %w", id, index, err)
		}
		e, err := entry.Parse(b)
		if err != nil {
			return nil, fmt.Errorf("%w: entry %d: %w", ErrCorrupt, index, err)
		}
		return e, nil
	}
	req, err := read(st.Request)
	if err != nil {
		return ApprovalStatus{}, false, err
	}
	if h, err := req.Hash(); err != nil || h != id {
		return ApprovalStatus{}, false, fmt.Errorf("%w: entry %d is not the request of approval %s", ErrCorrupt, st.Request, id)
	}
	st.RequestTime, st.Mediator, st.Principal, st.Action, st.Params = req.Time, req.Mediator, req.Principal, req.Action, req.Params
	if st.Verdict != "" {
		v, err := read(st.VerdictIndex)
		if err != nil {
			return ApprovalStatus{}, false, err
		}
		if v.Kind != entry.KindApproval || v.ApprovalID != id {
			return ApprovalStatus{}, false, fmt.Errorf("%w: entry %d is not the verdict of approval %s", ErrCorrupt, st.VerdictIndex, id)
		}
		st.Approver = v.Approver
	}
	return st, true, nil
}

// PendingApprovals returns the approvals awaiting a verdict at now: no
// durable verdict, now strictly before the pending deadline; in request
// order; durable requests only, as Approval. An approval the sequencer
// has closed is not listed, even while its verdict is not yet durable,
// or while now is before a pending deadline that the time of an entry
// chained since has passed.
func (l *Ledger) PendingApprovals(now time.Time) []ApprovalStatus {
	durable := l.Size()
	s := l.approvals
	t := micros(now)
	s.mu.Lock()
	var list []ApprovalStatus
	for _, a := range s.open {
		if a.request < durable && (a.verdict == "" || a.verdictIndex >= durable) && t < a.pending {
			list = append(list, a.status(durable))
		}
	}
	s.mu.Unlock()
	slices.SortFunc(list, func(x, y ApprovalStatus) int { return cmp.Compare(x.Request, y.Request) })
	return list
}

// ApprovalConfig returns the approval TTLs in force (those of the latest
// approval_config entry chained), and whether there is one.
func (l *Ledger) ApprovalConfig() (pending, execution time.Duration, ok bool) {
	s := l.approvals
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pendingTTL, s.executionTTL, s.configured
}

var (
	needsApprovalMember = []byte(`"decision":"needs_approval"`)
	version4Suffix      = []byte(`"version":4}`)
)

// rebuildApprovals replays the lifecycle of the durable entries [0, size)
// into a new state, as replayApprovals.
func rebuildApprovals(ctx context.Context, store Store, size uint64) (*approvals, uint64, error) {
	s := newApprovals()
	refused, err := s.replay(ctx, store, 0, size)
	if err != nil {
		return nil, 0, err
	}
	return s, refused, nil
}

// replay moves s, the state of the entries [0, from), on over the
// durable entries [from, to): every entry is read, and those that can
// matter (a needs_approval decision, a version 4 entry: "version" is the
// last member of the canonical form) are parsed and admitted as the
// sequencer admitted them. An entry the rules refuse (a log written by
// something else than this ledger) changes nothing and is counted: replay
// returns how many.
func (s *approvals) replay(ctx context.Context, store Store, from, to uint64) (uint64, error) {
	var refused uint64
	const chunk = 4096
	for start := from; start < to; start += chunk {
		end := min(to, start+chunk)
		err := store.ReadEntries(ctx, start, end, func(index uint64, b []byte) error {
			if !bytes.HasSuffix(b, version4Suffix) && !bytes.Contains(b, needsApprovalMember) {
				return nil
			}
			e, err := entry.Parse(b)
			if err != nil {
				return fmt.Errorf("%w: entry %d: %w", ErrCorrupt, index, err)
			}
			if e.Index != index {
				return fmt.Errorf("%w: entry %d says index %d", ErrCorrupt, index, e.Index)
			}
			apply, err := s.admit(e, true)
			if err != nil {
				refused++
				return nil
			}
			if apply != nil {
				var h commit.Digest
				if e.Kind == "" || e.Kind == entry.KindDecision {
					if h, err = e.Hash(); err != nil {
						return fmt.Errorf("%w: entry %d: %w", ErrCorrupt, index, err)
					}
				}
				apply(h)
			}
			return nil
		})
		if err != nil {
			return 0, err
		}
	}
	return refused, nil
}
