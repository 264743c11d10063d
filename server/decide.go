// Decisions the ledger makes (docs/api.md "Decide"):
//
//	POST /v1/decide  evaluate the policy set in force and record the decision

package server

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/policy"
)

// decideFields are the members a decide body may have: an append's but
// decision and policies, which the ledger derives. A preview is kept only
// if the decision is needs_approval (appendAndAnswer); otherwise it is
// dropped.
var decideFields = []string{"action", "attributes", "params_digest", "params_size", "preview", "principal", "tiers_digest"}

// decide answers POST /v1/decide for mediator, authenticated by
// mediatorAuth: the request is read and checked as an append is
// (readRecord), decided by the policy set in force, and the decision
// appended as a version 3 entry naming that set. The answer's decision is
// the recorded entry's: after a retry with the same Idempotency-Key, the
// first decision, whatever the set in force now says.
func (s *Server) decide(w http.ResponseWriter, r *http.Request, mediator string) {
	start := time.Now()
	if s.pol.Current() == nil {
		s.refuse(w, http.StatusNotFound, "no_policies", "this ledger has no policy_dir: it does not decide (append a mediator's decision with POST /v1/entries)")
		return
	}
	in, ok := s.readRecord(w, r, mediator, decideFields, "a decide")
	if !ok {
		return
	}
	// One load: the set that decides is the set whose digest is recorded.
	set := s.pol.Current()
	var res policy.Result
	if in.attributes != nil {
		res = set.DecideValue(in.rec.Principal, in.rec.Action, in.attributes)
	} else {
		res = set.Decide(in.rec.Principal, in.rec.Action, in.rec.Attributes)
	}
	if res.Invalid != nil {
		// The catalog's check passed, so the set's schema and the
		// catalog disagree: nothing is recorded.
		s.log.ErrorContext(r.Context(), "the policy set refused a request the catalog accepted; nothing recorded", "action", in.rec.Action, "policy_set", set.Digest().String())
		s.refuse(w, http.StatusUnprocessableEntity, "attributes_not_declared", "attributes of %s: the policy set's schema refuses them", in.rec.Action)
		return
	}
	in.rec.Kind, in.rec.PolicySet = entry.KindDecision, set.Digest()
	in.rec.Decision, in.rec.Policies, in.rec.PolicyErrors = res.Decision, res.Determining, res.Errored
	s.appendAndAnswer(w, r, mediator, in, start, func(answer []byte, receipt ledger.Receipt) ([]byte, bool) {
		// The decision is the stored entry's: a new entry's is the one
		// just made; a replayed entry's is read back from it (parsing
		// every new entry too would cost a third of a decide's CPU).
		head := decidedHead{Decision: res.Decision, Policies: res.Determining, PolicyErrors: res.Errored, PolicySet: set.Digest().String()}
		if receipt.Replayed {
			e, err := entry.Parse(receipt.Entry)
			if err != nil || e.Kind != entry.KindDecision {
				s.refuse(w, http.StatusConflict, "idempotency_conflict", "the Idempotency-Key was used for another decision")
				return nil, false
			}
			head = decidedHead{Decision: e.Decision, Policies: e.Policies, PolicyErrors: e.PolicyErrors, PolicySet: e.PolicySet.String()}
		} else {
			s.m.ObserveDecision(string(res.Decision))
		}
		head.Policies, head.PolicyErrors = nonNilIDs(head.Policies), nonNilIDs(head.PolicyErrors)
		b, _ := json.Marshal(head)
		// The members, without the braces, then a comma: the receipt's follow.
		return append(append(answer, b[1:len(b)-1]...), ','), true
	})
}

// decidedHead is the decision part of a decide answer.
type decidedHead struct {
	Decision     entry.Decision `json:"decision"`
	Policies     []string       `json:"policies"`
	PolicyErrors []string       `json:"policy_errors"`
	PolicySet    string         `json:"policy_set"`
}

func nonNilIDs(ids []string) []string {
	if ids == nil {
		return []string{}
	}
	return ids
}
