// The outcome of an allowed act (docs/api.md "POST
// /v1/entries/{index}/outcome"; docs/entry.md "Outcomes of allowed
// acts"):
//
//	POST /v1/entries/{index}/outcome  report the effect of an allowed call
//
// A mediator that forwarded the act an allow decision permitted reports
// its effect; the ledger appends a version 5 outcome entry chained to the
// decision. The rules are the ledger's (ledger.Record): this handler
// reads the body and answers the refusals.

package server

import (
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/ledger"
)

// decisionOutcomeFields are the members of a decision outcome's body;
// result is needed.
var (
	decisionOutcomeFields = []string{"operation_id", "result"}
	decisionOutcomeNeeded = []string{"result"}
)

// decisionOutcome answers POST /v1/entries/{index}/outcome for
// mediator: an outcome entry reporting the effect of the act the allow
// decision at index permitted, which the ledger appends only if that
// entry is an allow decision by this mediator without a final outcome.
// The body is read as an approval outcome's is (readMembers: the rate,
// bound and timeout of an append, the strict domain); it is served
// whether or not the config has approvals.
func (s *Server) decisionOutcome(w http.ResponseWriter, r *http.Request, mediator string) {
	start := time.Now()
	text := r.PathValue("index")
	index, err := strconv.ParseUint(text, 10, 64)
	if err != nil || strconv.FormatUint(index, 10) != text {
		s.refuse(w, http.StatusBadRequest, "invalid_request", "the index is not a decimal integer")
		return
	}
	obj, ok := s.readMembers(w, r, mediator, decisionOutcomeFields, decisionOutcomeNeeded, "an outcome")
	if !ok {
		return
	}
	result, okResult := textMember(obj, "result")
	operation, okOperation := textMember(obj, "operation_id")
	switch {
	case !okResult:
		s.refuse(w, http.StatusBadRequest, "invalid_request", "the body is not an outcome request: field \"result\" has the wrong type")
		return
	case !okOperation:
		s.refuse(w, http.StatusBadRequest, "invalid_request", "the body is not an outcome request: field \"operation_id\" has the wrong type")
		return
	case !slices.Contains(outcomeResults, entry.Result(result)):
		s.refuse(w, http.StatusBadRequest, "invalid_request", "result: one of succeeded, failed, unknown")
		return
	}
	if _, ok := obj.Get("operation_id"); ok && operation == "" {
		s.refuse(w, http.StatusBadRequest, "invalid_request", "operation_id: an identifier, not empty (or leave the member out)")
		return
	}
	if index >= commit.MaxSafeInteger {
		// No log holds an entry there with room for its outcome after it.
		s.refuse(w, http.StatusNotFound, "decision_not_found", "the entry at this index is not an allow decision")
		return
	}
	rec := ledger.Record{
		Kind: entry.KindOutcome, DecisionIndex: index, Mediator: mediator,
		Result: entry.Result(result), OperationID: operation, IdempotencyKey: r.Header.Get("Idempotency-Key"),
	}
	s.appendAndAnswer(w, r, mediator, intake{rec: rec}, start, nil)
}
