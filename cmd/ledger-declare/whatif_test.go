package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/internal/referencecalls"
	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/policy"
	"github.com/decisionledger/ledger/storage/memory"
)

// writeWhatifFixture writes, in dir, from the reference corpus in corpus
// (testdata), as cmd/ledger-verify's
// writeDecisionFixture does:
//
//   - export.ledger: entry 0 a mediator's decision (the table's first
//     call), 1 the publication of the reference set (testdata/policies),
//     2 to 46 the referencecalls table decided by the reference set, 47 a
//     mediator's decision; with the set's bundle; so table row i is
//     entry i+2;
//   - tampered.ledger: export.ledger with one byte of an entry changed;
//   - ledger.vkey, its verifier key, and other.vkey, another key of the
//     same name.
func writeWhatifFixture(dir, corpus string) error {
	ctx := context.Background()
	at := func(name string) string { return filepath.Join(dir, name) }
	decls, err := referencecalls.Declarations(filepath.Join(corpus, "declarations"))
	if err != nil {
		return err
	}
	live, err := policy.Load(filepath.Join(corpus, "policies"), decls)
	if err != nil {
		return err
	}
	skey, vkey, err := ledger.GenerateKey("ledger.example.com/log")
	if err != nil {
		return err
	}
	key, err := ledger.ParseKey([]byte(skey), ledger.KeyOptions{})
	if err != nil {
		return err
	}
	_, otherKey, err := ledger.GenerateKey("ledger.example.com/log")
	if err != nil {
		return err
	}
	for name, k := range map[string]string{"ledger.vkey": vkey, "other.vkey": otherKey} {
		if err := os.WriteFile(at(name), []byte(k+"\n"), 0o644); err != nil {
			return err
		}
	}
	record := func(c referencecalls.Call, s *policy.Set) (ledger.Record, error) {
		m, err := referencecalls.Minimize(decls, c)
		if err != nil {
			return ledger.Record{}, err
		}
		var def commit.Digest
		for _, d := range decls {
			if d.Action == c.Action {
				if def, err = d.Digest(); err != nil {
					return ledger.Record{}, err
				}
			}
		}
		r := ledger.Record{Mediator: "mediator-1", Principal: c.Principal, Action: c.Action,
			Params: m.Params, Tiers: m.Tiers, Attributes: m.Attributes, Definition: def,
			Decision: c.Decision, Policies: c.Determining}
		if s != nil {
			res := s.Decide(c.Principal, c.Action, m.Attributes)
			r.Kind, r.PolicySet = entry.KindDecision, s.Digest()
			r.Decision, r.Policies, r.PolicyErrors = res.Decision, res.Determining, res.Errored
		}
		return r, nil
	}
	table := referencecalls.Table()
	var recs []ledger.Record
	add := func(c referencecalls.Call, s *policy.Set) error {
		r, err := record(c, s)
		recs = append(recs, r)
		return err
	}
	if err := add(table[0], nil); err != nil {
		return err
	}
	recs = append(recs, ledger.Record{Kind: entry.KindPolicySet, PolicySet: live.Digest()})
	for _, c := range table {
		if err := add(c, live); err != nil {
			return err
		}
	}
	if err := add(table[5], nil); err != nil {
		return err
	}
	l, err := ledger.Open(ctx, memory.New(), key, ledger.Options{CheckpointInterval: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	defer l.Close()
	for _, r := range recs {
		if _, err := l.Append(ctx, r); err != nil {
			return err
		}
	}
	if _, err := l.Publish(ctx); err != nil {
		return err
	}
	var buf bytes.Buffer
	opts := ledger.ExportOptions{PolicySet: func(_ context.Context, d commit.Digest) ([]byte, error) {
		if !d.Equal(live.Digest()) {
			return nil, fmt.Errorf("no set %s", d)
		}
		return live.Bundle(), nil
	}}
	if err := l.Export(ctx, &buf, 0, uint64(len(recs)), opts); err != nil {
		return err
	}
	b := buf.Bytes()
	if err := os.WriteFile(at("export.ledger"), b, 0o644); err != nil {
		return err
	}
	b = bytes.Clone(b)
	i := bytes.Index(b, []byte(`"principal":"agent-1"`))
	if i < 0 {
		return fmt.Errorf("no principal in the export")
	}
	b[i+len(`"principal":"agent-`)] = '2' // agent-2: the entry's signature no longer verifies
	return os.WriteFile(at("tampered.ledger"), b, 0o644)
}
