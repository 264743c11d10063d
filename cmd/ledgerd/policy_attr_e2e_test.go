package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/internal/apitest"
)

// A forbid guarded by has on an attribute the declarations do not declare
// (a typo of amount_minor; send_email's payload field subject) never
// fires, so ledgerd refuses it: at start (exit 1, naming the attribute's
// file:line:col and the nearest declared name) and on a reload (SIGHUP,
// how a new set is published): refused, logged, nothing published, the
// set in force still decides.
func TestDaemonRefusesUndeclaredAttribute(t *testing.T) {
	t.Parallel() // a process of its own on its own directory and port
	if testing.Short() {
		t.Skip("builds and runs ledgerd")
	}
	const typo = `@id("payments.deny-large")
forbid (principal, action == Action::"make_payment", resource)
when { context has amount && context.amount > 100000 };
`
	const subject = `@id("email.deny-invoice-subject")
forbid (principal, action == Action::"send_email", resource)
when { context has subject && context.subject like "*LITERAL-subject-4471*" };
`
	bin := buildLedgerd(t)
	dir := t.TempDir()
	d := startDaemon(t, bin, dir)
	d.cmd.Process.Kill()
	d.cmd.Wait()
	catalogDir, _ := filepath.Abs(apitest.CorpusDir)
	policyDir := apitest.CopyPolicies(t)
	setConfig(t, dir, map[string]any{"catalog_dir": catalogDir, "policy_dir": policyDir})

	// At start.
	os.WriteFile(filepath.Join(policyDir, "typo.cedar"), []byte(typo), 0o600)
	// A ledgerd that accepted the set would serve: it is killed at the
	// deadline, and the test fails.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "serve", "--data", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 ||
		!strings.Contains(string(out), `typo.cedar:3:20: policy "payments.deny-large"`) || !strings.Contains(string(out), `"amount_minor"`) {
		t.Errorf("a start with a has on an undeclared attribute: %v, want exit 1 naming typo.cedar:3:20 and amount_minor\n%s", err, out)
	}
	os.Remove(filepath.Join(policyDir, "typo.cedar"))

	// On a reload.
	tokenBytes, err := os.ReadFile(filepath.Join(dir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	token := string(tokenBytes)
	d = startDaemon(t, bin, dir)
	url := "http://" + d.addr
	var before struct {
		Current  string   `json:"current"`
		Archived []string `json:"archived"`
	}
	apitest.GetJSON(t, url+"/v1/policies", &before)
	os.WriteFile(filepath.Join(policyDir, "subject.cedar"), []byte(subject), 0o600)
	d.cmd.Process.Signal(syscall.SIGHUP)
	apitest.WaitFor(t, "the refusal in the log", func() bool { return strings.Contains(d.stderr.String(), "policy reload refused") })
	line := logLine(d.stderr.String(), "policy reload refused")
	if !strings.Contains(line, "subject.cedar:3:20") || !strings.Contains(line, "payload field") || strings.Contains(line, "LITERAL-subject") {
		t.Errorf("the refusal does not name subject.cedar:3:20 as a payload field, or quotes the policy's literal: %s", line)
	}
	var after struct {
		Current  string   `json:"current"`
		Archived []string `json:"archived"`
	}
	apitest.GetJSON(t, url+"/v1/policies", &after)
	if after.Current != before.Current || !slices.Equal(after.Archived, before.Archived) {
		t.Errorf("after a refused reload: %+v, before %+v", after, before)
	}
	if pubs := daemonPublications(t, url); len(pubs) != 1 || len(pubs[before.Current]) != 1 {
		t.Errorf("publications %v, want only the set in force", pubs)
	}
	if status, got, answer := apitest.DecideOn(t, url, token, apitest.Payment(t)); status != 201 || got.PolicySet != before.Current || got.Decision != entry.Allow {
		t.Errorf("after a refused reload: %d %s, want allow with the set in force", status, answer)
	}
}
