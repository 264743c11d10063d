package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strconv"

	"github.com/cedar-policy/cedar-go"
	"github.com/cedar-policy/cedar-go/types"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/commit/declare"
	"github.com/decisionledger/ledger/entry"
)

// Result is a decision: one of entry.Allow, entry.Deny and
// entry.NeedsApproval, the ids of the policies that determined it and of
// those whose evaluation failed, each sorted by byte order and never nil.
// Invalid, when set, says why the request itself was not evaluated (the
// decision is then deny, with no ids).
type Result struct {
	Decision    entry.Decision
	Determining []string
	Errored     []string
	Invalid     *RequestError
}

// RequestError is why a request was denied without evaluating a policy:
// the action is not declared, or the attributes are not valid for its
// context. It names the action, never a value.
type RequestError struct {
	Action  string
	Problem string
}

func (e *RequestError) Error() string {
	return fmt.Sprintf("policy: request for action %q: %s", e.Action, e.Problem)
}

// iterator yields the policies in load order under their ids, so that
// cedar-go's evaluation order does not depend on map order.
type iterator struct{ s *Set }

func (it iterator) All() iter.Seq2[cedar.PolicyID, *cedar.Policy] {
	return func(yield func(cedar.PolicyID, *cedar.Policy) bool) {
		for i, p := range it.s.cedar {
			if !yield(cedar.PolicyID(it.s.policies[i].ID), p) {
				return
			}
		}
	}
}

// Decide decides a call by principal to action with the minimized
// attributes (canonical JSON, as an entry records them). See the package
// doc for the mapping. On a replay set (NewReplay) the request is not
// checked against a schema; attributes outside the strict domain are
// still refused with Invalid set.
func (s *Set) Decide(principal, action string, attributes json.RawMessage) Result {
	obj, err := commit.Domain{}.Object(attributes)
	if err != nil {
		return deny(action, errAttributes.Error())
	}
	return s.DecideValue(principal, action, obj.Any())
}

// DecideValue is Decide for attributes already checked against the strict
// domain and decoded (commit.Object.Any), so that a request's attributes
// are parsed once.
func (s *Set) DecideValue(principal, action string, attributes map[string]any) Result {
	ctx, err := contextRecord(attributes)
	if err != nil {
		return deny(action, err.Error())
	}
	req := cedar.Request{
		Principal: types.NewEntityUID(declare.CedarPrincipal, types.String(principal)),
		Action:    types.NewEntityUID("Action", types.String(action)),
		Resource:  types.NewEntityUID(declare.CedarResource, types.String(action)),
		Context:   ctx,
	}
	if s.validator != nil { // nil for a replay set: no schema to admit the request
		if err := s.validator.Request(req); err != nil {
			// cedar-go's message quotes the context's values: not repeated.
			return deny(action, "not valid for the declarations' schema (undeclared action, or attributes outside its context)")
		}
	}
	_, diag := cedar.Authorize(iterator{s}, types.EntityMap{}, req)
	var r Result
	forbids := []string{}
	for _, e := range diag.Errors {
		r.Errored = append(r.Errored, string(e.PolicyID))
	}
	var permits, approvals []string
	for _, reason := range diag.Reasons {
		id := string(reason.PolicyID)
		p := s.policies[s.byID[id]]
		switch {
		case p.Forbid:
			forbids = append(forbids, id)
		case p.Approval:
			permits = append(permits, id)
			approvals = append(approvals, id)
		default:
			permits = append(permits, id)
		}
	}
	switch {
	case len(r.Errored) > 0:
		r.Decision = entry.Deny
		r.Determining = append(slices.Clone(r.Errored), forbids...)
	case len(forbids) > 0:
		r.Decision, r.Determining = entry.Deny, forbids
	case len(approvals) > 0:
		r.Decision, r.Determining = entry.NeedsApproval, approvals
	case len(permits) > 0:
		r.Decision, r.Determining = entry.Allow, permits
	default:
		r.Decision = entry.Deny
	}
	slices.Sort(r.Determining)
	r.Determining = slices.Compact(r.Determining)
	slices.Sort(r.Errored)
	if r.Determining == nil {
		r.Determining = []string{}
	}
	if r.Errored == nil {
		r.Errored = []string{}
	}
	return r
}

var errAttributes = errors.New("attributes are not a JSON object in the strict domain")

// contextRecord maps the attributes, checked against the strict domain of
// package commit and decoded, to a Cedar record: an object to a record, an
// array to a set, a string to a String, an integer to a Long, true and
// false to Bools. null and numbers that are not integers are refused.
func contextRecord(attributes map[string]any) (types.Record, error) {
	rec, err := cedarValue(attributes)
	if err != nil {
		return types.Record{}, err
	}
	return rec.(types.Record), nil
}

// deny is the decision on a request that is not evaluated: problem says
// why, naming no value.
func deny(action, problem string) Result {
	return Result{Decision: entry.Deny, Determining: []string{}, Errored: []string{}, Invalid: &RequestError{Action: action, Problem: problem}}
}

func cedarValue(v any) (types.Value, error) {
	switch v := v.(type) {
	case map[string]any:
		m := make(types.RecordMap, len(v))
		for k, e := range v {
			cv, err := cedarValue(e)
			if err != nil {
				return nil, err
			}
			m[types.String(k)] = cv
		}
		return types.NewRecord(m), nil
	case []any:
		s := make([]types.Value, 0, len(v))
		for _, e := range v {
			cv, err := cedarValue(e)
			if err != nil {
				return nil, err
			}
			s = append(s, cv)
		}
		return types.NewSet(s...), nil
	case string:
		return types.String(v), nil
	case bool:
		return types.Boolean(v), nil
	case json.Number:
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			return nil, errors.New("attributes hold a number that is not an integer")
		}
		return types.Long(n), nil
	}
	return nil, errors.New("attributes hold a null")
}
