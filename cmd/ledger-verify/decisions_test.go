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

// allowAll is the other policy set of the decisions fixture.
const allowAll = "@id(\"allow-all\")\npermit (principal, action, resource);\n"

// forgedAt is the entry the lying logs of the decisions fixture forge:
// the reference call "unknown payee", denied by
// payments.deny-unknown-payee.
const forgedAt = 8

// writeDecisionFixture writes, in dir, logs of the reference decision
// table decided by the reference policy set (testdata/policies), all
// signed with the key of ledger.vkey:
//
//   - honest.ledger: entry 0 a mediator's decision, 1 the publication of
//     the reference set, 2 the publication of the allow-all set, 3 to 47
//     the table decided with the reference set, 48 a mediator's
//     decision; with both sets' bundles;
//   - plain.ledger: the same without policy-set frames;
//   - tail.ledger: entries 3 to 48 of it (the publications before the
//     range), with the reference set's bundle;
//   - altered.ledger: honest.ledger with one byte of the reference
//     set's bundle changed;
//   - lie-decision.ledger, lie-policies.ledger, lie-errors.ledger,
//     lie-set.ledger: the honest log re-signed with its key, entry 8
//     (a deny by payments.deny-unknown-payee) recording needs_approval,
//     recording payments.deny-non-positive, recording the determining
//     policy as erroring too, or naming the published allow-all set;
//   - unpublished.ledger: a log whose first decision precedes the
//     publication of its set;
//   - policies/ (the reference set) and allow-all/ (the other set);
//   - other.vkey, another key of the same name.
func writeDecisionFixture(dir string) error {
	ctx := context.Background()
	at := func(name string) string { return filepath.Join(dir, name) }
	decls, err := referencecalls.Declarations(declarationsDir())
	if err != nil {
		return err
	}
	refDir := filepath.Join(declarationsDir(), "..", "policies")
	live, err := policy.Load(refDir, decls)
	if err != nil {
		return err
	}
	other, err := policy.New([]policy.File{{Name: "allow-all.cedar", Bytes: []byte(allowAll)}}, decls)
	if err != nil {
		return err
	}
	for name, s := range map[string]*policy.Set{"policies": live, "allow-all": other} {
		if err := os.MkdirAll(at(name), 0o755); err != nil {
			return err
		}
		for _, f := range s.Files() {
			if err := os.WriteFile(filepath.Join(at(name), f.Name), f.Bytes, 0o644); err != nil {
				return err
			}
		}
	}
	bundles := map[commit.Digest][]byte{live.Digest(): live.Bundle(), other.Digest(): other.Bundle()}
	skey, vkey, err := ledger.GenerateKey("ledger.example.com/log")
	if err != nil {
		return err
	}
	key, err := ledger.ParseKey([]byte(skey), ledger.KeyOptions{})
	if err != nil {
		return err
	}
	if err := os.WriteFile(at("ledger.vkey"), []byte(vkey+"\n"), 0o644); err != nil {
		return err
	}
	_, otherKey, err := ledger.GenerateKey("ledger.example.com/log")
	if err != nil {
		return err
	}
	if err := os.WriteFile(at("other.vkey"), []byte(otherKey+"\n"), 0o644); err != nil {
		return err
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
	var honest []ledger.Record
	add := func(c referencecalls.Call, s *policy.Set) error {
		r, err := record(c, s)
		honest = append(honest, r)
		return err
	}
	if err := add(table[0], nil); err != nil {
		return err
	}
	honest = append(honest, ledger.Record{Kind: entry.KindPolicySet, PolicySet: live.Digest()},
		ledger.Record{Kind: entry.KindPolicySet, PolicySet: other.Digest()})
	for _, c := range table {
		if err := add(c, live); err != nil {
			return err
		}
	}
	if err := add(table[5], nil); err != nil {
		return err
	}
	if honest[forgedAt].Decision != entry.Deny || fmt.Sprint(honest[forgedAt].Policies) != "[payments.deny-unknown-payee]" {
		return fmt.Errorf("entry %d is not the unknown payee's deny", forgedAt)
	}

	// write appends recs to a new ledger with the key and writes the
	// exports of the ranges.
	type export struct {
		name       string
		start, end uint64
		sets       bool
	}
	write := func(recs []ledger.Record, exports ...export) error {
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
		for _, e := range exports {
			var opts ledger.ExportOptions
			if e.sets {
				opts.PolicySet = func(_ context.Context, d commit.Digest) ([]byte, error) { return bundles[d], nil }
			}
			var buf bytes.Buffer
			if err := l.Export(ctx, &buf, e.start, e.end, opts); err != nil {
				return err
			}
			if err := os.WriteFile(at(e.name), buf.Bytes(), 0o644); err != nil {
				return err
			}
		}
		return nil
	}
	n := uint64(len(honest))
	if err := write(honest, export{"honest.ledger", 0, n, true}, export{"plain.ledger", 0, n, false}, export{"tail.ledger", 3, n, true}); err != nil {
		return err
	}
	b, err := os.ReadFile(at("honest.ledger"))
	if err != nil {
		return err
	}
	i := bytes.Index(b, []byte("\npolicy-set "))
	i += bytes.IndexByte(b[i+1:], '\n') + 2 + len(policy.DomainSeparator) + 2 // into the first file's name
	b[i] ^= 0x20                                                              // its case
	if err := os.WriteFile(at("altered.ledger"), b, 0o644); err != nil {
		return err
	}

	for name, forge := range map[string]func(r *ledger.Record){
		"lie-decision.ledger": func(r *ledger.Record) { r.Decision = entry.NeedsApproval },
		"lie-policies.ledger": func(r *ledger.Record) { r.Policies = []string{"payments.deny-non-positive"} },
		"lie-errors.ledger":   func(r *ledger.Record) { r.PolicyErrors = []string{"payments.deny-unknown-payee"} },
		"lie-set.ledger":      func(r *ledger.Record) { r.PolicySet = other.Digest() },
	} {
		recs := append([]ledger.Record(nil), honest...)
		forge(&recs[forgedAt])
		if err := write(recs, export{name, 0, n, true}); err != nil {
			return err
		}
	}

	unpublished := []ledger.Record{honest[3], honest[1], honest[4]}
	return write(unpublished, export{"unpublished.ledger", 0, 3, true})
}
