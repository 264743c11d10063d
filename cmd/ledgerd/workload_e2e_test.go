package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/decisionledger/ledger/internal/apitest"
)

// TestWorkloadDecide runs examples/workload --decide against the real
// ledgerd with the reference catalog and policies: it acts on allow
// only, and on needs_approval or deny stops the call and prints the
// decision and the determining policy ids. Its append mode still works
// against the same ledger.
func TestWorkloadDecide(t *testing.T) {
	t.Parallel() // a process of its own on its own directory and port
	if testing.Short() {
		t.Skip("builds and runs the binaries")
	}
	bin := buildLedgerd(t)
	workload := built(t, "../../examples/workload")
	dir := t.TempDir()
	d := startDaemon(t, bin, dir)
	d.cmd.Process.Kill()
	d.cmd.Wait()
	catalog, _ := filepath.Abs(apitest.CorpusDir)
	policies, _ := filepath.Abs(apitest.ReferencePolicies)
	setConfig(t, dir, map[string]any{"catalog_dir": catalog, "policy_dir": policies})
	d = startDaemon(t, bin, dir)
	defer func() { d.cmd.Process.Kill(); d.cmd.Wait() }()
	url := "http://" + d.addr

	run := func(decl, params string, args ...string) string {
		t.Helper()
		file := filepath.Join(t.TempDir(), "params.json")
		os.WriteFile(file, []byte(params), 0o600)
		args = append([]string{"--url", url, "--token-file", filepath.Join(dir, "token"), "--key", d.vkey,
			"--declaration", filepath.Join(catalog, decl+".json")}, append(args, file)...)
		out, err := exec.Command(workload, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("workload %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	for _, c := range []struct {
		name, decl, params string
		args               []string
		want               []string
	}{
		{"external mail", "send_email", `{"recipient":"carol@example.org","subject":"Q3","body":"figures"}`, []string{"--decide"},
			[]string{"ledger:   decided needs_approval by [email.approval-external] under policy set sha256:", "mediator: needs_approval by email.approval-external: not acting"}},
		{"known payee", "make_payment", `{"amount_minor":5000,"currency":"EUR","payee":"payee-0001"}`, []string{"--decide", "--allow", "payees=payee-0001"},
			[]string{"ledger:   decided allow by [payments.allow-known-payee]", "mediator: allow: acting on make_payment"}},
		{"unknown payee", "make_payment", `{"amount_minor":5000,"currency":"EUR","payee":"payee-9999"}`, []string{"--decide", "--allow", "payees=payee-0001"},
			[]string{"ledger:   decided deny by [payments.deny-unknown-payee]", "mediator: deny by payments.deny-unknown-payee: not acting"}},
		{"another currency", "make_payment", `{"amount_minor":5000,"currency":"GBP","payee":"payee-0001"}`, []string{"--decide", "--allow", "payees=payee-0001"},
			[]string{"ledger:   decided deny by []", "mediator: deny by no permitting policy: not acting"}},
		{"append mode", "send_email", `{"recipient":"bob@example.com","subject":"Q3","body":"figures"}`, nil,
			[]string{"mediator: appended entry"}},
	} {
		out := run(c.decl, c.params, c.args...)
		for _, want := range c.want {
			if !strings.Contains(out, want) {
				t.Errorf("%s: the output lacks %q:\n%s", c.name, want, out)
			}
		}
		if strings.Contains(out, "acting on") != strings.Contains(c.want[len(c.want)-1], "acting on") {
			t.Errorf("%s: acted, or did not, against the decision:\n%s", c.name, out)
		}
	}
}
