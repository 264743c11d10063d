package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/decisionledger/ledger/entry"
)

// DecisionOutcome reports what became of the act the allow decision at
// index decision permitted (POST /v1/entries/{index}/outcome): result
// (succeeded; failed when the upstream answered with an error; unknown on
// a transport error or a timeout), and the downstream system's id for the
// operation, if any (an identifier; "" for none). It returns the verified
// receipt: a version 5 outcome entry, signed by the ledger's key, at the
// index claimed, recording exactly decision, result and operationID. It
// retries as Append does, with one random idempotency key. Refusals are
// *Error: 404 decision_not_found (the entry at decision is not an allow
// decision, or there is none), 409 outcome_mismatch (Term mediator: the
// decision is another mediator's), 409 outcome_final (the decision has a
// succeeded or failed outcome already).
func (c *Client) DecisionOutcome(ctx context.Context, decision uint64, result entry.Result, operationID string) (*Receipt, error) {
	keyBytes := make([]byte, 16)
	rand.Read(keyBytes)
	return c.DecisionOutcomeIdempotent(ctx, hex.EncodeToString(keyBytes), decision, result, operationID)
}

// DecisionOutcomeIdempotent is DecisionOutcome with the caller's
// idempotency key: a final outcome reported again under the same key,
// with the same result and operation id, is answered with the first
// receipt (Replayed), not outcome_final.
func (c *Client) DecisionOutcomeIdempotent(ctx context.Context, idempotencyKey string, decision uint64, result entry.Result, operationID string) (*Receipt, error) {
	if err := checkKey(idempotencyKey); err != nil {
		return nil, err
	}
	return c.postOutcome(ctx, "/v1/entries/"+strconv.FormatUint(decision, 10)+"/outcome", idempotencyKey, map[string]any{}, result, operationID, func(e *entry.Entry) error {
		switch {
		case e.Version() != entry.Version5 || e.Kind != entry.KindOutcome:
			return fmt.Errorf("%w: the entry is not an outcome of an allowed act (version 5, kind outcome)", ErrUnverified)
		case e.DecisionIndex != decision:
			return fmt.Errorf("%w: the outcome reports on another decision", ErrUnverified)
		}
		return nil
	})
}
