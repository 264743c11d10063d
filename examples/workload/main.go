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
// With --decide and --wait-approval DURATION, a needs_approval decision
// of a ledger with approvals on (docs/approvals.md) is not the end: the
// workload prints the approval's id and the approver's page
// (LEDGER/approvals/ID), waits up to DURATION for a person's verdict
// (client.WaitApproval, which verifies the signed verdict entry), and on
// approve consumes the approval with the request's exact terms, performs
// the (simulated) action once, and reports its outcome (succeeded, with
// a new operation id "op-..."); on deny, expiry or no verdict in time it
// stops and says why. --preview FILE sends FILE's JSON as the preview the
// approver is shown (redacted and bounded by the ledger); without it the
// ledger shows a default one made from the recorded request.
//
// With --disclosure FILE the workload commits with the hiding commitment
// (docs/commitment.md §7): each field under a secret opening, written with
// the values to FILE (mode 0600, never overwritten) before anything is
// sent; the ledger sees a v2:sha256: digest that no dictionary can test.
// An auditor given FILE (or a part: ledger-verify disclose) checks it;
// deleting FILE erases the parameters for good.
//
// Usage:
//
//	workload [--url URL] --token-file FILE --key VKEY --declaration DECL.json
//	         [--allow LIST=VALUE]... [--decide [--wait-approval DURATION] [--preview FILE]]
//	         [--disclosure FILE] [--principal NAME] PARAMS.json
//
// --url defaults to the LEDGER_URL environment variable, else
// http://127.0.0.1:8080. For example, with a ledgerd whose config has
// policy_dir and approvals:
//
//	workload --url http://127.0.0.1:8080 --token-file token --key "$VKEY" \
//	         --declaration send_email.json --decide --wait-approval 10m mail.json
//
// It prints the commitment, the attributes and the receipt; with
// --decide, the ledger's decision, the policy set that made it, and
// whether the call goes ahead ("mediator: allow ... acting") or not
// ("mediator: deny by ...: not acting"); with --wait-approval, each step
// of the approval ("mediator: approved by NAME: acting on ACTION", the
// consumption and outcome entries, or "... not acting"). All exit 0: a
// refused call is an answer, not an error. An auditor
// later confirms, from an export, that the entry committed to exactly
// PARAMS.json (ledger-verify params) and was minimized under DECL.json
// (ledger-verify tiers).
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/decisionledger/ledger/client"
	"github.com/decisionledger/ledger/commit"
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

// defaultLedgerURL is --url's default: the LEDGER_URL environment
// variable, as for ledgerctl, else a ledgerd started without a config.
func defaultLedgerURL() string {
	if u := strings.TrimSpace(os.Getenv("LEDGER_URL")); u != "" {
		return u
	}
	return "http://127.0.0.1:8080"
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "workload:", err)
		os.Exit(1)
	}
}

func run() (err error) {
	ledgerURL := flag.String("url", defaultLedgerURL(), "ledgerd's base URL (default: the LEDGER_URL environment variable, else http://127.0.0.1:8080)")
	tokenFile := flag.String("token-file", "", "file holding the mediator's bearer token")
	vkey := flag.String("key", "", "the ledger's verifier key")
	declFile := flag.String("declaration", "", "the action's declaration")
	allow := allowFlag{}
	flag.Var(allow, "allow", "LIST=VALUE: put VALUE on the payee_known allowlist LIST (repeatable)")
	decide := flag.Bool("decide", false, "let ledgerd decide (POST /v1/decide) and act only on allow")
	principal := flag.String("principal", "agent:example-1", "the agent the call is made for")
	waitApproval := flag.Duration("wait-approval", 0, "with --decide: on needs_approval, wait this long for a verdict, then act on approve (default: do not wait)")
	previewFile := flag.String("preview", "", "with --decide: a JSON file to show the approver as the preview")
	disclosureFile := flag.String("disclosure", "", "commit with the hiding commitment, writing the openings and values to this new file (mode 0600)")
	flag.Parse()
	if flag.NArg() != 1 || *tokenFile == "" || *vkey == "" || *declFile == "" {
		flag.Usage()
		return fmt.Errorf("needs --token-file, --key, --declaration and one parameters file")
	}
	if !*decide && (*waitApproval != 0 || *previewFile != "") {
		flag.Usage()
		return fmt.Errorf("--wait-approval and --preview need --decide")
	}
	if *waitApproval < 0 {
		return fmt.Errorf("--wait-approval %s: a duration, at least 0", *waitApproval)
	}
	var previewDoc json.RawMessage
	if *previewFile != "" {
		if previewDoc, err = os.ReadFile(*previewFile); err != nil {
			return err
		}
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
	opts := declare.Options{Allowlists: allow}
	if *disclosureFile != "" {
		opts.Openings = commit.RandomOpenings()
	}
	res, err := decl.Minimize(raw, opts)
	if err != nil {
		return err
	}
	if res.Disclosure != nil {
		// Kept before anything is sent: a decision recorded without its
		// openings could never be checked.
		if err := writeDisclosure(*disclosureFile, res.Disclosure); err != nil {
			return err
		}
		fmt.Printf("workload: disclosure    %s (the openings; deleting it erases the parameters)\n", *disclosureFile)
	}
	fmt.Printf("workload: params_digest %s (%d bytes)\n", res.Params.DigestText(), res.Params.Size)
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
			Params: res.Params, Tiers: res.Tiers, Attributes: res.Attributes, Preview: previewDoc,
		})
		if err != nil {
			return err
		}
		fmt.Printf("ledger:   decided %s by [%s] under policy set %s (entry %d)\n",
			d.Decision, strings.Join(d.Policies, ", "), d.PolicySet, d.Index)
		if a := d.Approval; a != nil {
			fmt.Printf("ledger:   approval %s pending until %s (preview %s)\n",
				a.ID, a.PendingDeadline.Format(time.RFC3339), a.PreviewDigest)
			fmt.Printf("approver: %s/approvals/%s\n", strings.TrimSuffix(*ledgerURL, "/"), a.ID)
		}
		if d.Decision == entry.NeedsApproval && *waitApproval > 0 {
			return approve(c, d, client.Terms{Action: decl.Action, Principal: *principal, Params: res.Params}, *waitApproval)
		}
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

// approve completes a needs_approval decision d: it waits up to wait for
// the verdict, and on approve consumes the approval on terms t, acts, and
// reports the outcome. A call that does not go ahead is an answer, not
// an error.
func approve(c *client.Client, d *client.Decided, t client.Terms, wait time.Duration) error {
	a := d.Approval
	if a == nil {
		fmt.Println("mediator: needs_approval, but the ledger opened no approval (approvals are off): not acting")
		return nil
	}
	fmt.Printf("mediator: waiting up to %s for a verdict\n", wait)
	wctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	st, err := c.WaitApproval(wctx, a.ID, min(time.Second, max(wait/20, 50*time.Millisecond)))
	if errors.Is(err, context.DeadlineExceeded) {
		fmt.Printf("mediator: no verdict within %s: not acting\n", wait)
		return nil
	}
	if err != nil {
		return err
	}
	switch {
	case st.State == client.StateApproved:
		// st.VerdictEntry is the ledger's signed verdict on this approval;
		// its preview digest says the approver saw the preview named at
		// the decision.
		if st.VerdictEntry.PreviewDigest != a.PreviewDigest {
			return fmt.Errorf("%w: the verdict (entry %d) approves preview %s, not the approval's %s",
				client.ErrUnverified, st.VerdictIndex, st.VerdictEntry.PreviewDigest, a.PreviewDigest)
		}
		fmt.Printf("ledger:   approved by %s (entry %d)\n", st.VerdictEntry.Approver, st.VerdictIndex)
	case st.Verdict == entry.Reject:
		fmt.Printf("mediator: denied by %s (entry %d): not acting\n", st.VerdictEntry.Approver, st.VerdictIndex)
		return nil
	case st.State == client.StateExpired:
		fmt.Printf("mediator: the approval expired (pending deadline %s): not acting\n", st.PendingDeadline.Format(time.RFC3339))
		return nil
	default:
		fmt.Printf("mediator: the approval is %s (consumption entry %d): not acting\n", st.State, st.Consumption)
		return nil
	}

	ctx, cancel2 := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel2()
	consumed, err := c.Consume(ctx, a.ID, t)
	var refused *client.Error
	if errors.As(err, &refused) {
		why := refused.Code
		if refused.Term != "" {
			why += " (" + refused.Term + ")"
		}
		fmt.Printf("mediator: the ledger refused the consumption: %s: not acting\n", why)
		return nil
	}
	if err != nil {
		return err
	}
	fmt.Printf("ledger:   consumed approval %s (entry %d)\n", a.ID, consumed.Index)

	// The act itself, simulated: one operation, with the downstream
	// system's id for it.
	fmt.Printf("mediator: approved by %s: acting on %s\n", st.VerdictEntry.Approver, t.Action)
	op := make([]byte, 8)
	rand.Read(op)
	operationID := "op-" + hex.EncodeToString(op)

	r, err := c.Outcome(ctx, a.ID, consumed.Index, entry.Succeeded, operationID)
	if err != nil {
		return err
	}
	fmt.Printf("ledger:   outcome %s, operation %s (entry %d)\n", r.Entry.Result, r.Entry.OperationID, r.Index)
	return nil
}

// writeDisclosure writes the disclosure file, mode 0600, refusing to
// replace an existing file (another call's openings), and syncs it.
func writeDisclosure(path string, x *commit.Disclosure) error {
	b, err := x.MarshalJSON()
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("the disclosure file: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("the disclosure file: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("the disclosure file: %w", err)
	}
	return f.Close()
}
