// Decisions the ledger makes (docs/api.md "Decide"):
//
//	POST /v1/decide  evaluate the policy set in force and record the decision

package server

import (
	"encoding/json"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/decisionledger/ledger/commit"
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
		if !receipt.Replayed {
			s.m.ObserveDecision(string(res.Decision))
			return appendDecidedHead(answer, res.Decision, res.Determining, res.Errored, set.Digest()), true
		}
		e, err := entry.Parse(receipt.Entry)
		if err != nil || e.Kind != entry.KindDecision {
			s.refuse(w, http.StatusConflict, "idempotency_conflict", "the Idempotency-Key was used for another decision")
			return nil, false
		}
		return appendDecidedHead(answer, e.Decision, e.Policies, e.PolicyErrors, e.PolicySet), true
	})
}

// appendDecidedHead appends to b the decision part of a decide answer:
// its members decision, policies, policy_errors and policy_set, as
// json.Marshal would write them (an empty list as [], never null), each
// followed by a comma, for the receipt's members follow. It is written
// by hand, for it is on every decide's path.
func appendDecidedHead(b []byte, decision entry.Decision, policies, errored []string, set commit.Digest) []byte {
	b = append(b, `"decision":`...)
	b = appendJSONString(b, string(decision))
	b = append(b, `,"policies":`...)
	b = appendJSONStrings(b, policies)
	b = append(b, `,"policy_errors":`...)
	b = appendJSONStrings(b, errored)
	b = append(b, `,"policy_set":"`...)
	b, _ = set.AppendText(b)
	return append(b, `",`...)
}

// appendJSONStrings appends ss as a JSON array of strings.
func appendJSONStrings(b []byte, ss []string) []byte {
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, s)
	}
	return append(b, ']')
}

// appendJSONString appends s as json.Marshal writes it: between quotes
// as it is when it is plainJSON, as an identifier (the decision, a policy
// id) nearly always is, and otherwise by json.Marshal.
func appendJSONString(b []byte, s string) []byte {
	if !plainJSON(s) {
		q, _ := json.Marshal(s)
		return append(b, q...)
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// plainJSON reports whether json.Marshal writes s unescaped between
// quotes: whether s is valid UTF-8 without a control character, a quote,
// a backslash, the characters it escapes for HTML (<, >, &), U+2028 or
// U+2029.
func plainJSON(s string) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
				return false
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
			return false
		}
		i += size
	}
	return true
}
