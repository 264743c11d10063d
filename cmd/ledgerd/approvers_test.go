package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/decisionledger/ledger/approval/approver"
	"github.com/decisionledger/ledger/config"
)

// approverConfig writes handWrittenConfig, with extra members before its
// last, to a new directory with a key and a store, and returns its path.
func approverConfig(t *testing.T, extra string) string {
	t.Helper()
	dir := t.TempDir()
	if _, err := writeKey(filepath.Join(dir, "ledger.key"), "ledger.example.com/log"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "store"), 0o700); err != nil {
		t.Fatal(err)
	}
	_, hash := newToken()
	text := strings.Replace(handWrittenConfig, "%s", hash, 1)
	if extra != "" {
		text = strings.Replace(text, `    "idle_timeout"`, "    "+extra+",\n    \"idle_timeout\"", 1)
	}
	path := filepath.Join(dir, "prod.json")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// approverRun runs "ledgerd approver ARGS" with input on stdin.
func approverRun(t *testing.T, input string, args ...string) (code int, stderr string) {
	t.Helper()
	stdin = strings.NewReader(input)
	defer func() { stdin = os.Stdin }()
	var out, errOut bytes.Buffer
	code = run(context.Background(), append([]string{"approver"}, args...), &out, &errOut)
	if out.Len() != 0 {
		t.Errorf("ledgerd approver %s wrote on stdout: %s", strings.Join(args, " "), out.String())
	}
	return code, errOut.String()
}

// members returns the names of the top-level members of the config at
// path, in order, and the approvals member.
func members(t *testing.T, path string) ([]string, map[string]json.RawMessage) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := topMembers(b)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	var approvals map[string]json.RawMessage
	for _, m := range ms {
		names = append(names, m.key)
		if m.key == "approvals" {
			json.Unmarshal(m.value, &approvals)
		}
	}
	return names, approvals
}

// add makes the approvals member, adds approvers with their hashed
// password, and keeps every other member; remove takes one away.
func TestApproverAddRemove(t *testing.T) {
	path := approverConfig(t, "")
	const pw = "a long enough passphrase"
	code, stderr := approverRun(t, pw+"\n", "add", "alice", "--actions", "send_email,refund", "--principals", "agent:billing", "--config", path)
	if code != 0 || !strings.Contains(stderr, "restart ledgerd") || !strings.Contains(stderr, "had no approvals member") {
		t.Fatalf("approver add: exit %d: %s", code, stderr)
	}
	if strings.Contains(stderr, pw) {
		t.Error("approver add repeated the password")
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Approvals == nil || len(cfg.Approvals.Approvers) != 1 {
		t.Fatalf("after add, approvals are %+v", cfg.Approvals)
	}
	a := cfg.Approvals.Approvers[0]
	if a.Name != "alice" || strings.Join(a.Actions, ",") != "send_email,refund" || strings.Join(a.Principals, ",") != "agent:billing" {
		t.Errorf("after add, alice is %+v", a)
	}
	if ok, err := approver.VerifyPassword(a.PasswordHash, pw); !ok || err != nil {
		t.Errorf("alice's hash does not verify her password: %v", err)
	}
	if cfg.Mediators[0].RatePerSecond != 50 || cfg.MaxBodyBytes != 65536 || len(cfg.ReaderTokensSHA256) != 1 {
		t.Errorf("after add, the rest of the config changed: %+v", cfg)
	}
	names, _ := members(t, path)
	if strings.Join(names, ",") != "store_dir,key_file,mediators,max_body_bytes,reader_tokens_sha256,idle_timeout,approvals" {
		t.Errorf("after add, the members are %v", names)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("after add, the config has mode %v", st.Mode().Perm())
	}
	raw, _ := os.ReadFile(path)
	if bytes.Contains(raw, []byte(pw)) {
		t.Error("the config holds the password")
	}

	// The name exists: refused, nothing changed.
	before, _ := os.ReadFile(path)
	if code, stderr := approverRun(t, pw+"\n", "add", "alice", "--actions", "*", "--config", path); code != 1 || !strings.Contains(stderr, "exists") {
		t.Errorf("a second alice: exit %d: %s", code, stderr)
	}
	if code, _ := approverRun(t, pw+"\n", "add", "bob", "--actions", "*", "--config", path); code != 0 {
		t.Fatalf("approver add bob: exit %d", code)
	}
	if code, stderr := approverRun(t, "", "remove", "alice", "--config", path); code != 0 || !strings.Contains(stderr, "removed approver \"alice\"") {
		t.Fatalf("approver remove alice: exit %d: %s", code, stderr)
	}
	cfg, err = config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Approvals.Approvers) != 1 || cfg.Approvals.Approvers[0].Name != "bob" || cfg.Approvals.Approvers[0].Actions[0] != "*" {
		t.Errorf("after remove, the approvers are %+v", cfg.Approvals.Approvers)
	}
	if code, stderr := approverRun(t, "", "remove", "alice", "--config", path); code != 1 || !strings.Contains(stderr, "no approver") {
		t.Errorf("removing alice twice: exit %d: %s", code, stderr)
	}
	if bytes.Equal(before, must(os.ReadFile(path))) {
		t.Error("add bob and remove alice changed nothing")
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// An existing approvals member keeps its other members.
func TestApproverAddKeepsApprovals(t *testing.T) {
	path := approverConfig(t, `"approvals": {"pending_ttl": "2h", "trusted_origins": ["https://ledger.example.com"]}`)
	if code, stderr := approverRun(t, "a long enough passphrase\r\n", "add", "carol", "--data", filepath.Dir(path), "--config", path); code != 2 {
		t.Errorf("--data with --config: exit %d: %s", code, stderr)
	}
	if code, stderr := approverRun(t, "a long enough passphrase\r\n", "add", "carol", "--actions", "refund", "--config", path); code != 0 || strings.Contains(stderr, "had no approvals member") {
		t.Fatalf("approver add: exit %d: %s", code, stderr)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if a := cfg.Approvals; a.PendingTTL != "2h" || len(a.TrustedOrigins) != 1 || len(a.Approvers) != 1 || a.Approvers[0].Principals != nil {
		t.Errorf("approvals after add: %+v", a)
	}
	if ok, _ := approver.VerifyPassword(cfg.Approvals.Approvers[0].PasswordHash, "a long enough passphrase"); !ok {
		t.Error("the password's CRLF was not taken off")
	}
	_, approvals := members(t, path)
	if len(approvals) != 3 {
		t.Errorf("approvals has members %v", approvals)
	}
}

// Bad usage exits 2, a bad password 1; neither changes the config.
func TestApproverRefusals(t *testing.T) {
	path := approverConfig(t, "")
	before, _ := os.ReadFile(path)
	for _, c := range []struct {
		input string
		args  []string
		code  int
		want  string
	}{
		{"", nil, 2, "add or remove?"},
		{"", []string{"rename", "x"}, 2, "unknown command"},
		{"a long enough passphrase\n", []string{"add", "alice", "--config", path}, 2, "--actions is required"},
		{"a long enough passphrase\n", []string{"add", "--actions", "x", "--config", path}, 2, "missing argument"},
		{"short\n", []string{"add", "alice", "--actions", "send_email", "--config", path}, 1, "shorter than 12"},
		{"", []string{"add", "alice", "--actions", "send_email", "--config", path}, 1, "no password"},
		{"a long enough passphrase\n", []string{"add", "alice", "--actions", "send_email", "--principals", "*", "--config", path}, 2, "not a wildcard"},
		{"a long enough passphrase\n", []string{"add", "al\u0007ice", "--actions", "send_email", "--config", path}, 2, "name"},
		{"a long enough passphrase\n", []string{"add", "alice", "--actions", "send_email,", "--config", path}, 2, "actions[1]"},
		{"", []string{"remove", "alice", "--config", path}, 1, "no approver"},
		{"a long enough passphrase\n", []string{"add", "alice", "--actions", "x", "--data", t.TempDir()}, 1, "has no ledgerd.json"},
	} {
		code, stderr := approverRun(t, c.input, c.args...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("approver %s: exit %d: %s; want %d and %q", strings.Join(c.args, " "), code, stderr, c.code, c.want)
		}
		if strings.Contains(stderr, "a long enough passphrase") {
			t.Errorf("approver %s repeated the password", strings.Join(c.args, " "))
		}
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Errorf("refusals changed the config:\n%s", after)
	}
}
