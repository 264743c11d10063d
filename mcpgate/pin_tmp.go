package mcpgate

import (
	"context"
	"errors"
	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/commit/declare"
	"github.com/decisionledger/ledger/entry"
)

type toolPin struct {
	Server, Name     string
	DefinitionDigest commit.Digest
}

func pinOf(d *declare.Declaration) *toolPin { return nil }
func reviewed(d *declare.Declaration) bool  { return d != nil }

func (g *Gateway) decisionOutcome(ctx context.Context, key string, index uint64, result entry.Result) error {
	return errors.New("decision outcomes: not yet")
}

func (g *Gateway) WriteDrafts(ctx context.Context, server, dir string) ([]string, error) {
	return nil, errors.New("drafts: not yet")
}
