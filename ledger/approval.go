package ledger

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
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

// ApprovalError is the refusal of a verdict, consumption or outcome by
// the lifecycle's rules. Nothing was appended. Term names the differing
// member for approval_mismatch (action, principal, mediator, approval)
// and approval_digest_mismatch (params_digest, params_size), else it is
// empty; the error never holds a value.
type ApprovalError struct {
	Code string
	Term string
}

func (e *ApprovalError) Error() string {
	if e.Term != "" {
		return fmt.Sprintf("ledger: approval refused: %s (%s)", e.Code, e.Term)
	}
	return "ledger: approval refused: " + e.Code
}

// Is makes errors.Is(err, ErrApproval) hold.
func (e *ApprovalError) Is(target error) bool { return target == ErrApproval }

func refuse(code, term string) *ApprovalError { return &ApprovalError{Code: code, Term: term} }

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
}

// approval is the state of one approval: about 200 bytes with its map
// entries (docs/approvals.md §Lifecycle, memory). Identifiers are
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
}

// approvals is the lifecycle state. The sequencer is its only writer
// (under mu, so that readers may look); readers take mu.
type approvals struct {
	mu sync.Mutex
	// The TTLs in force; configured once an approval_config was chained.
	configured               bool
	pendingTTL, executionTTL time.Duration
	byID                     map[commit.Digest]*approval
	byConsumption            map[uint64]*approval
}

func newApprovals() *approvals {
	return &approvals{byID: map[commit.Digest]*approval{}, byConsumption: map[uint64]*approval{}}
}

func micros(t time.Time) int64 { return t.UnixMicro() }

func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

// admit checks e, whose Index and Time are set, against the lifecycle's
// rules and the state of every entry chained before it. It refuses with
// an *ApprovalError, changing nothing, or returns the change to make once
// e's entry hash is known (nil if e changes nothing). When chaining
// (rebuild false) it fills a verdict's or consumption's Request from the
// state; when rebuilding from the log, e's own Request must be the
// approval's.
func (s *approvals) admit(e *entry.Entry, rebuild bool) (func(hash commit.Digest), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := micros(e.Time)
	switch e.Kind {
	case "", entry.KindDecision:
		if e.Decision != entry.NeedsApproval || !s.configured {
			return nil, nil
		}
		a := &approval{request: e.Index, requestTime: t,
			mediator: unique.Make(e.Mediator), principal: unique.Make(e.Principal), action: unique.Make(e.Action),
			params: e.Params, pending: t + s.pendingTTL.Microseconds()}
		return func(h commit.Digest) {
			s.mu.Lock()
			defer s.mu.Unlock()
			a.id = h
			s.byID[h] = a
		}, nil

	case entry.KindApprovalConfig:
		return func(commit.Digest) {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.configured, s.pendingTTL, s.executionTTL = true, e.PendingTTL, e.ExecutionTTL
		}, nil

	case entry.KindApproval:
		a, err := s.lookup(e, rebuild)
		if err != nil {
			return nil, err
		}
		switch {
		case a.verdict != "":
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
			if verdict == entry.Approve {
				a.execution = execution
			}
		}, nil

	case entry.KindConsumption:
		a, err := s.lookup(e, rebuild)
		if err != nil {
			return nil, err
		}
		switch {
		case a.verdict == "" && t < a.pending:
			return nil, refuse(CodePending, "")
		case a.verdict == "": // the pending deadline passed
			return nil, refuse(CodeExpired, "")
		case a.verdict == entry.Approve && t >= a.execution: // expired at equality
			return nil, refuse(CodeExpired, "")
		case a.verdict != entry.Approve:
			return nil, refuse(CodeDenied, "")
		case a.consumption != 0:
			return nil, refuse(CodeConsumed, "")
		case e.Action != a.action.Value():
			return nil, refuse(CodeMismatch, codeTermAction)
		case e.Principal != a.principal.Value():
			return nil, refuse(CodeMismatch, codeTermPrincipal)
		case e.Mediator != a.mediator.Value():
			return nil, refuse(CodeMismatch, codeTermMediator)
		case e.Params.Digest != a.params.Digest:
			return nil, refuse(CodeDigestMismatch, codeTermParamsDigest)
		case e.Params.Size != a.params.Size:
			return nil, refuse(CodeDigestMismatch, codeTermParamsSize)
		}
		index := e.Index
		return func(commit.Digest) {
			s.mu.Lock()
			defer s.mu.Unlock()
			a.consumption = index
			s.byConsumption[index] = a
		}, nil

	case entry.KindOutcome:
		a := s.byConsumption[e.Consumption]
		switch {
		case a == nil:
			return nil, refuse(CodeNoConsumption, "")
		case a.id != e.ApprovalID:
			return nil, refuse(CodeMismatch, codeTermApproval)
		case e.Mediator != a.mediator.Value():
			return nil, refuse(CodeMismatch, codeTermMediator)
		case a.outcome == entry.Succeeded || a.outcome == entry.Failed:
			return nil, refuse(CodeOutcomeFinal, "")
		}
		result, index := e.Result, e.Index
		return func(commit.Digest) {
			s.mu.Lock()
			defer s.mu.Unlock()
			a.outcome, a.outcomeIndex = result, index
		}, nil
	}
	return nil, nil
}

// lookup finds the approval a verdict or consumption names by id; the id
// is its own term, never looked up by the request's terms. When chaining
// it fills e.Request; when rebuilding, e.Request must be the approval's.
func (s *approvals) lookup(e *entry.Entry, rebuild bool) (*approval, error) {
	a := s.byID[e.ApprovalID]
	if a == nil || a.request >= e.Index || (rebuild && e.Request != a.request) {
		return nil, refuse(CodeNotFound, "")
	}
	e.Request = a.request
	return a, nil
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
	if a.consumption != 0 && a.consumption < durable {
		st.Consumed, st.Consumption = true, a.consumption
		if a.outcome != "" && a.outcomeIndex < durable {
			st.Outcome, st.OutcomeIndex = a.outcome, a.outcomeIndex
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
func (l *Ledger) Approval(id commit.Digest) (ApprovalStatus, bool) {
	durable := l.Size()
	s := l.approvals
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.byID[id]
	if a == nil || a.request >= durable {
		return ApprovalStatus{}, false
	}
	return a.status(durable), true
}

// PendingApprovals returns the approvals awaiting a verdict at now: no
// durable verdict, now strictly before the pending deadline; in request
// order; durable requests only, as Approval.
func (l *Ledger) PendingApprovals(now time.Time) []ApprovalStatus {
	durable := l.Size()
	s := l.approvals
	t := micros(now)
	s.mu.Lock()
	var list []ApprovalStatus
	for _, a := range s.byID {
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
