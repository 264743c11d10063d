package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"testing"

	"github.com/decisionledger/ledger/client"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/internal/logtest"
)

// DecisionOutcome accepts only a signed version 5 outcome of the decision
// named, recording the result and operation id sent; refusals are
// *Error with their code and term.
func TestDecisionOutcome(t *testing.T) {
	f := newFake(t)
	allowed := request()
	allowed.Decision = entry.Allow
	d, _ := f.add(allowed)
	ok := entry.Entry{Kind: entry.KindOutcome, DecisionIndex: d, Mediator: "mediator-1", Result: entry.Succeeded, OperationID: "op-1"}
	i, _ := f.add(ok)
	var sent map[string]any
	var path, key string
	f.answer = func(r *http.Request, body []byte) (int, string) {
		sent = nil
		json.Unmarshal(body, &sent)
		path, key = r.URL.Path, r.Header.Get("Idempotency-Key")
		return http.StatusCreated, f.receipt(i)
	}
	r, err := f.client("").DecisionOutcome(context.Background(), d, entry.Succeeded, "op-1")
	if err != nil {
		t.Fatal(err)
	}
	if r.Index != i || r.Replayed || r.Entry.DecisionIndex != d || path != "/v1/entries/"+strconv.FormatUint(d, 10)+"/outcome" || key == "" {
		t.Errorf("%+v, path %s, key %q", r, path, key)
	}
	if fmt.Sprint(sent) != fmt.Sprint(map[string]any{"result": "succeeded", "operation_id": "op-1"}) {
		t.Errorf("sent %v", sent)
	}

	noOp := ok
	noOp.OperationID, noOp.Result = "", entry.Unknown
	j, _ := f.add(noOp)
	f.answer = func(r *http.Request, body []byte) (int, string) {
		sent = nil
		json.Unmarshal(body, &sent)
		key = r.Header.Get("Idempotency-Key")
		return http.StatusOK, f.receipt(j)
	}
	r, err = f.client("").DecisionOutcomeIdempotent(context.Background(), "outcome-1", d, entry.Unknown, "")
	if err != nil || !r.Replayed || key != "outcome-1" {
		t.Fatalf("%+v %v, key %q", r, err, key)
	}
	if _, has := sent["operation_id"]; has {
		t.Errorf("sent an empty operation id: %v", sent)
	}
	if _, err := f.client("").DecisionOutcomeIdempotent(context.Background(), "", d, entry.Unknown, ""); err == nil {
		t.Error("an empty idempotency key was taken")
	}

	// Each lie, signed by the log's own key, is refused.
	edits := map[string]func(*entry.Entry){
		"another decision":     func(e *entry.Entry) { e.DecisionIndex = d + 1 },
		"another result":       func(e *entry.Entry) { e.Result = entry.Failed },
		"another operation id": func(e *entry.Entry) { e.OperationID = "op-0000" },
		"no operation id":      func(e *entry.Entry) { e.OperationID = "" },
		"an approval's outcome": func(e *entry.Entry) {
			e.ApprovalID, e.Consumption, e.DecisionIndex = logtest.Digest("approval"), d, 0
		},
		"the decision itself": func(e *entry.Entry) { *e = allowed },
	}
	for name, edit := range edits {
		e := ok
		edit(&e)
		k, _ := f.add(e)
		f.answer = func(*http.Request, []byte) (int, string) { return http.StatusCreated, f.receipt(k) }
		if _, err := f.client("").DecisionOutcome(context.Background(), d, entry.Succeeded, "op-1"); !errors.Is(err, client.ErrUnverified) {
			t.Errorf("%s: %v, want ErrUnverified", name, err)
		}
	}
	f.answer = func(*http.Request, []byte) (int, string) { return http.StatusCreated, f.receipt(i) }
	if _, err := f.client(otherKey(t)).DecisionOutcome(context.Background(), d, entry.Succeeded, "op-1"); !errors.Is(err, client.ErrUnverified) {
		t.Errorf("under another key: %v, want ErrUnverified", err)
	}

	f.answer = func(*http.Request, []byte) (int, string) {
		return http.StatusConflict, `{"error":{"code":"outcome_mismatch","message":"mediator: not the decision's","term":"mediator"}}`
	}
	var ce *client.Error
	if _, err := f.client("").DecisionOutcome(context.Background(), d, entry.Succeeded, ""); !errors.As(err, &ce) || ce.Code != "outcome_mismatch" || ce.Term != "mediator" {
		t.Errorf("refusal: %v", err)
	}
}
