// Command workload is an end-to-end example of field-tier minimization
// (docs/declarations.md). It plays the two roles a deployment keeps apart:
//
//   - the workload, which holds the raw parameters of a tool call and, from
//     the action's declaration, computes the parameter commitment, the
//     minimized attributes and the applied-tiers digest — the raw
//     parameters go no further;
//   - the mediator, which decides on the minimized attributes alone and
//     appends the decision to ledgerd with package client, which verifies
//     the signed receipt it gets back; or, with --decide, asks ledgerd to
//     decide (POST /v1/decide, a ledgerd with policy_dir) and acts only on
//     allow: on deny or needs_approval it stops the call and prints why
//     (the decision and the determining policy ids).
//
// Usage:
//
//	workload --ledger URL --token-file FILE --key VKEY --declaration DECL.json
//	         [--allow LIST=VALUE]... [--decide] [--principal NAME] PARAMS.json
//
// It prints the commitment, the attributes and the receipt; with
// --decide, the ledger's decision, the policy set that made it, and
// whether the call goes ahead ("mediator: allow ... acting") or not
// ("mediator: deny by ...: not acting"). Both exit 0: a refused call is
// an answer, not an error. An auditor
// later confirms, from an export, that the entry committed to exactly
// PARAMS.json (ledger-verify params) and was minimized under DECL.json
// (ledger-verify tiers).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/decisionledger/ledger/client"
	"github.com/decisionledger/ledger/commit/declare"
	"github.com/decisionledger/ledger/entry"
)

type allowFlag map[string]map[string]bool

func (a allowFlag) String() string { return "" }
func (a allowFlag) Set(v string) error {
	list, value, ok := strings.Cut(v, "=")
	if !ok || list == "" {
		return fmt.Errorf("--allow wants LIST=VALUE")
	}
	if a[list] == nil {
		a[list] = map[string]bool{}
	}
	a[list][value] = true
	return nil
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "workload:", err)
		os.Exit(1)
	}
}

func run() error {
	ledgerURL := flag.String("ledger", "http://127.0.0.1:8080", "ledgerd's base URL")
	tokenFile := flag.String("token-file", "", "file holding the mediator's bearer token")
	vkey := flag.String("key", "", "the ledger's verifier key")
	declFile := flag.String("declaration", "", "the action's declaration")
	allow := allowFlag{}
	flag.Var(allow, "allow", "LIST=VALUE: put VALUE on the payee_known allowlist LIST (repeatable)")
	decide := flag.Bool("decide", false, "let ledgerd decide (POST /v1/decide) and act only on allow")
	principal := flag.String("principal", "agent:example-1", "the agent the call is made for")
	flag.Parse()
	if flag.NArg() != 1 || *tokenFile == "" || *vkey == "" || *declFile == "" {
		flag.Usage()
		return fmt.Errorf("needs --token-file, --key, --declaration and one parameters file")
	}

	// The workload: raw parameters in, commitment and minimized attributes
	// out.
	declText, err := os.ReadFile(*declFile)
	if err != nil {
		return err
	}
	decl, err := declare.Parse(declText)
	if err != nil {
		return err
	}
	raw, err := os.ReadFile(flag.Arg(0))
	if err != nil {
		return err
	}
	res, err := decl.Minimize(raw, declare.Options{Allowlists: allow})
	if err != nil {
		return err
	}
	fmt.Printf("workload: params_digest %s (%d bytes)\n", res.Params.Digest, res.Params.Size)
	fmt.Printf("workload: tiers_digest  %s\n", res.Tiers)
	fmt.Printf("workload: attributes    %s\n", res.Attributes)

	// The mediator: decides on the attributes and appends the decision.
	token, err := os.ReadFile(*tokenFile)
	if err != nil {
		return err
	}
	c, err := client.New(*ledgerURL, strings.TrimSpace(string(token)), *vkey)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if *decide {
		d, err := c.Decide(ctx, client.Request{
			Principal: *principal, Action: decl.Action,
			Params: res.Params, Tiers: res.Tiers, Attributes: res.Attributes,
		})
		if err != nil {
			return err
		}
		fmt.Printf("ledger:   decided %s by [%s] under policy set %s (entry %d)\n",
			d.Decision, strings.Join(d.Policies, ", "), d.PolicySet, d.Index)
		if d.Decision != entry.Allow {
			// Stop this call: nothing is executed.
			why := strings.Join(d.Policies, ", ")
			if why == "" {
				why = "no permitting policy"
			}
			fmt.Printf("mediator: %s by %s: not acting\n", d.Decision, why)
			return nil
		}
		fmt.Printf("mediator: allow: acting on %s\n", decl.Action)
		return nil
	}
	receipt, err := c.Append(ctx, client.Decision{
		Principal: *principal, Action: decl.Action, Decision: entry.Allow,
		Policies: []string{"example.allow-declared"},
		Params:   res.Params, Tiers: res.Tiers, Attributes: res.Attributes,
	})
	if err != nil {
		return err
	}
	fmt.Printf("mediator: appended entry %d (entry version %d, definition %s)\n",
		receipt.Index, receipt.Entry.Version(), receipt.Entry.Definition)
	return nil
}
