package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/commit/declare"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/storage/memory"
)

// writeHidingFixture writes an export whose entries carry hiding
// (version 2) commitments, for testdata/script/disclose.txtar:
//
//	export.ledger, ledger.vkey      entries 0-3 make_payment, 4 make_payment
//	                                with a dishonest payee_known, 5 send_email,
//	                                6 make_payment with a version 1 digest
//	disclosures/<hex>.json          every v2 entry's whole disclosure, by digest
//	disclosures-erased/             the same without entry 2's (erased)
//	entry-N.json                    entry N's whole disclosure
//	entry-0-payee.json              entry 0's, only the payee disclosed
//	entry-0-changed.json            entry 0's with the payee's value changed
//	params-N.json                   entry N's raw parameters
//	make_payment.json, send_email.json, allowlists.json
func writeHidingFixture(dir string) error {
	ctx := context.Background()
	at := func(name string) string { return filepath.Join(dir, name) }
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
	l, err := ledger.Open(ctx, memory.New(), key, ledger.Options{CheckpointInterval: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	defer l.Close()
	decls := map[string]*declare.Declaration{}
	for _, action := range []string{"make_payment", "send_email"} {
		b, err := os.ReadFile(filepath.Join(declarationsDir(), action+".json"))
		if err != nil {
			return err
		}
		if decls[action], err = declare.Parse(b); err != nil {
			return err
		}
		if err := os.WriteFile(at(action+".json"), b, 0o644); err != nil {
			return err
		}
	}
	payees := []string{"payee-0000", "payee-0001", "payee-0002", "payee-0003"}
	lists, _ := json.Marshal(map[string][]string{"payees": payees})
	if err := os.WriteFile(at("allowlists.json"), lists, 0o644); err != nil {
		return err
	}
	allow := map[string]map[string]bool{"payees": {}}
	for _, p := range payees {
		allow["payees"][p] = true
	}
	for _, d := range []string{"disclosures", "disclosures-erased"} {
		if err := os.MkdirAll(at(d), 0o700); err != nil {
			return err
		}
	}
	type call struct {
		action, params string
		v1             bool
		lie            bool // record payee_known true for a payee not on the list
	}
	calls := []call{
		{action: "make_payment", params: `{"amount_minor":4200,"currency":"EUR","memo":"invoice 0","payee":"payee-0000"}`},
		{action: "make_payment", params: `{"amount_minor":4201,"currency":"EUR","memo":"invoice 1","payee":"payee-0001"}`},
		{action: "make_payment", params: `{"amount_minor":4202,"currency":"EUR","memo":"invoice 2","payee":"payee-0002"}`},
		{action: "make_payment", params: `{"amount_minor":4203,"currency":"EUR","payee":"payee-9999"}`},
		{action: "make_payment", params: `{"amount_minor":4204,"currency":"EUR","memo":"invoice 4","payee":"payee-4444"}`, lie: true},
		{action: "send_email", params: `{"recipient":"billing@example.org","subject":"Invoice 5","body":"Hello, the invoice is attached."}`},
		{action: "make_payment", params: `{"amount_minor":4206,"currency":"EUR","payee":"payee-0003"}`, v1: true},
	}
	for i, c := range calls {
		opts := declare.Options{Allowlists: allow, Openings: commit.RandomOpenings()}
		if c.v1 {
			opts.Openings = nil
		}
		res, err := decls[c.action].Minimize([]byte(c.params), opts)
		if err != nil {
			return err
		}
		attrs := res.Attributes
		if c.lie {
			attrs = []byte(strings.Replace(string(attrs), `"payee_known":false`, `"payee_known":true`, 1))
		}
		if _, err := l.Append(ctx, ledger.Record{
			Mediator: "mediator-1", Principal: "agent-1", Action: c.action,
			Decision: entry.Allow, Policies: []string{"payments.limit"},
			Params: res.Params, Tiers: res.Tiers, Attributes: attrs,
		}); err != nil {
			return err
		}
		if err := os.WriteFile(at(fmt.Sprintf("params-%d.json", i)), []byte(c.params), 0o644); err != nil {
			return err
		}
		if res.Disclosure == nil {
			continue
		}
		whole, _ := res.Disclosure.MarshalJSON()
		name := hex.EncodeToString(res.Params.Digest[:]) + ".json"
		if err := os.WriteFile(at(fmt.Sprintf("entry-%d.json", i)), whole, 0o600); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(at("disclosures"), name), whole, 0o600); err != nil {
			return err
		}
		if i != 2 {
			if err := os.WriteFile(filepath.Join(at("disclosures-erased"), name), whole, 0o600); err != nil {
				return err
			}
		}
		if i == 0 {
			payee, err := res.Disclosure.Only("payee")
			if err != nil {
				return err
			}
			b, _ := payee.MarshalJSON()
			if err := os.WriteFile(at("entry-0-payee.json"), b, 0o600); err != nil {
				return err
			}
			changed := strings.Replace(string(whole), `"value":"payee-0000"`, `"value":"payee-0001"`, 1)
			if err := os.WriteFile(at("entry-0-changed.json"), []byte(changed), 0o600); err != nil {
				return err
			}
		}
	}
	if _, err := l.Publish(ctx); err != nil {
		return err
	}
	f, err := os.Create(at("export.ledger"))
	if err != nil {
		return err
	}
	defer f.Close()
	return l.Export(ctx, f, 0, uint64(len(calls)), ledger.ExportOptions{})
}
