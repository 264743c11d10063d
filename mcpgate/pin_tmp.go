package mcpgate

import (
	"context"
	"errors"

	"github.com/decisionledger/ledger/commit/declare"
	"github.com/decisionledger/ledger/entry"
)

func pinOf(d *declare.Declaration) *declare.Tool {
	if d == nil {
		return nil
	}
	return d.Tool
}

func reviewed(d *declare.Declaration) bool { return d != nil && d.Reviewed() }

func (g *Gateway) decisionOutcome(ctx context.Context, key string, index uint64, result entry.Result) error {
	return errors.New("decision outcomes: not yet")
}
