package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/mcpgate"
)

// The gateway in front of a server of the test's own, through the
// binaries: an allowed write is forwarded and its outcome recorded; a
// denied write and an undeclared tool never reach the server; a move
// needs approval, which a 2026-07-28 client is sent to the page for (an
// approver approves there) and whose retry consumes it; a rug-pulled
// definition is hidden and refused. The exported log verifies with
// ledger-verify export, decisions and approvals, and no file content or
// full path appears in a ledger byte or a log line.
func TestGatewayNotes(t *testing.T) {
	t.Parallel()
	for _, version := range []string{"2026-07-28", "2025-11-25"} {
		t.Run(version, func(t *testing.T) {
			t.Parallel() // a ledgerd and a gateway of its own
			testGatewayNotes(t, version)
		})
	}
}

func testGatewayNotes(t *testing.T, version string) {
	s := setupNotes(t, map[string]any{"wait": "30s"})
	n, l := s.n, s.l
	g := s.gateway(t)

	var elicited []string
	var mu sync.Mutex
	agent := g.agentAt(t, version, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
		ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			mu.Lock()
			elicited = append(elicited, req.Params.URL)
			mu.Unlock()
			// The person opens the page and approves; the client's
			// "accept" alone would approve nothing.
			if err := l.approveErr(strings.TrimPrefix(req.Params.URL, l.url+"/approvals/"), "approve"); err != nil {
				return nil, err
			}
			return &mcp.ElicitResult{Action: "accept"}, nil
		},
	})

	names := toolNames(t, agent)
	slices.Sort(names)
	if !slices.Equal(names, []string{"notes.broken_note", "notes.move_note", "notes.write_note"}) {
		t.Fatalf("tools/list: %v, want the two declared tools only", names)
	}

	const secret = "quarterly figures: 4711 EUR to payee-0042"
	if text, isErr := callText(t, agent, "notes.write_note", map[string]any{"path": "/allowed/q3-report.txt", "content": secret}); isErr {
		t.Fatalf("allowed write refused: %s\n%s", text, g.stderr)
	}
	if b, err := os.ReadFile(filepath.Join(n.root, "allowed", "q3-report.txt")); err != nil || string(b) != secret {
		t.Fatalf("allowed write: %q %v", b, err)
	}
	// Its outcome is appended after the answer, from the gateway's queue,
	// racing the next call's decision: wait for it (the policy set, the
	// approval config, the decision, the outcome), so that the log below
	// is in the calls' order.
	waitFor(t, "the allowed write's outcome", func() bool { return len(l.entries(t)) >= 4 })

	text, isErr := callText(t, agent, "notes.write_note", map[string]any{"path": "/elsewhere/q3-copy.txt", "content": secret})
	if !isErr || !strings.Contains(text, "denied") {
		t.Fatalf("denied write: %q (error %v)", text, isErr)
	}
	if _, err := os.Stat(filepath.Join(n.root, "elsewhere", "q3-copy.txt")); !os.IsNotExist(err) {
		t.Fatalf("a denied write reached the server: %v", err)
	}
	if got := n.count("write_note"); got != 1 {
		t.Fatalf("the server saw %d writes, want 1", got)
	}

	text, isErr = callText(t, agent, "notes.delete_note", map[string]any{"path": "/allowed/q3-report.txt"})
	if !isErr || n.count("delete_note") != 0 {
		t.Fatalf("undeclared tool: %q (error %v), server saw %d", text, isErr, n.count("delete_note"))
	}

	text, isErr = callText(t, agent, "notes.move_note", map[string]any{"source": "/allowed/q3-report.txt", "destination": "/allowed/q3-final.txt"})
	if isErr {
		t.Fatalf("approved move refused: %s\n%s", text, g.stderr)
	}
	if len(elicited) != 1 || !strings.HasPrefix(elicited[0], l.url+"/approvals/sha256:") {
		t.Fatalf("elicitations: %v", elicited)
	}
	if _, err := os.Stat(filepath.Join(n.root, "allowed", "q3-final.txt")); err != nil {
		t.Fatalf("approved move did not happen: %v", err)
	}

	// The log: decision allow + its outcome, deny, needs_approval,
	// verdict, consumption, outcome.
	want := []string{"v3/policy_set", "v4/approval_config", "v3/decision:allow", "v5/outcome:succeeded", "v3/decision:deny",
		"v3/decision:needs_approval", "v4/approval", "v4/consumption", "v4/outcome:succeeded"}
	// Outcomes are recorded after the agent has its answer.
	var entries []map[string]any
	waitFor(t, "the outcomes", func() bool { entries = l.entries(t); return len(entries) >= len(want) })
	var kinds []string
	for _, e := range entries {
		k, _ := e["kind"].(string)
		if d, ok := e["decision"].(string); ok && k == "decision" {
			k += ":" + d
		}
		if r, ok := e["result"].(string); ok {
			k += ":" + r
		}
		kinds = append(kinds, fmt.Sprintf("v%v/%s", e["version"], k))
	}
	if !slices.Equal(kinds, want) {
		t.Fatalf("log:\n%v\nwant\n%v", kinds, want)
	}

	// A rug pull: the definition changes under the gateway.
	n.rugPull()
	waitFor(t, "the changed tool to leave tools/list", func() bool { return !contains(toolNames(t, agent), "notes.write_note") })
	before := n.count("write_note")
	text, isErr = callText(t, agent, "notes.write_note", map[string]any{"path": "/allowed/again.txt", "content": secret})
	if !isErr || n.count("write_note") != before {
		t.Fatalf("rug-pulled tool: %q (error %v); server saw %d more", text, isErr, n.count("write_note")-before)
	}
	if !strings.Contains(g.stderr.String(), "definition does not match its pin") {
		t.Fatalf("no log line for the pin mismatch:\n%s", g.stderr)
	}
	resp, err := http.Get(strings.TrimSuffix(g.url, "/mcp") + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(metrics), `ledger_mcp_pin_mismatch_total{tool="notes.write_note"} 1`) {
		t.Fatalf("metrics:\n%s", metrics)
	}

	export := l.export(t)
	l.verify(t, "export", export)
	l.verify(t, "decisions", export, "--policies", s.policies)
	l.verify(t, "approvals", export)

	// Nothing raw: the content and the files' names appear nowhere.
	exportBytes, _ := os.ReadFile(export)
	for _, where := range []struct{ name, text string }{
		{"the export", string(exportBytes)}, {"the gateway's log", g.stderr.String()}, {"ledgerd's log", l.stderr.String() + l.stdout.String()},
	} {
		for _, raw := range []string{secret, "q3-report.txt", "q3-copy.txt", "q3-final.txt", "/allowed/q3", "payee-0042"} {
			if strings.Contains(where.text, raw) {
				t.Errorf("%s holds %q", where.name, raw)
			}
		}
	}
	_ = time.Second
}

// A protocol error the upstream answers reaches the agent as it was
// given, and the call's outcome is recorded failed.
func TestGatewayUpstreamError(t *testing.T) {
	t.Parallel()
	s := setupNotes(t, nil)
	l := s.l
	g := s.gateway(t)
	agent := g.agent(t, nil)
	_, err := agent.CallTool(context.Background(), &mcp.CallToolParams{Name: "notes.broken_note", Arguments: map[string]any{"path": "/a/b.txt"}})
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) || rpcErr.Code != -32001 || rpcErr.Message != "the disk is full" {
		t.Fatalf("agent got %v, want the upstream's error -32001", err)
	}
	waitFor(t, "the failed outcome", func() bool {
		es := l.entries(t)
		last := es[len(es)-1]
		return last["kind"] == "outcome" && last["result"] == "failed"
	})
	if strings.Contains(g.stderr.String(), "the disk is full") {
		t.Fatal("the upstream's error text is in the gateway's log")
	}
}

// Non-integer numbers are refused unless allow_non_integer admits them;
// then an auditor checks the call's parameters with ledger-verify params
// --allow-non-integer (under "commitment": "v1", whose digest that
// command recomputes), or, under the hiding commitment, reads the call's
// disclosure in the domain that admits them (and only in that one).
func TestGatewayNonInteger(t *testing.T) {
	t.Parallel()
	n := startNotes(t)
	catalog, policies := notesCatalog(t, n.pins(t))
	l := startLedger(t, catalog, policies)
	args := map[string]any{"path": "/allowed/ratio.txt", "content": "c", "ratio": 0.7}
	for _, allow := range []bool{false, true} {
		cfg, token := writeGatewayConfig(t, l, catalog, map[string]any{"notes": map[string]any{"url": n.url}}, nil)
		editConfig(t, cfg, func(m map[string]any) {
			m["allow_non_integer"] = allow
			m["commitment"] = "v1"
			delete(m, "disclosures")
		})
		g := startGateway(t, cfg, token)
		text, isErr := callText(t, g.agent(t, nil), "notes.write_note", args)
		if isErr == allow {
			t.Fatalf("allow_non_integer %v: %q (error %v)", allow, text, isErr)
		}
		if !allow && !strings.Contains(text, "not_integer") && !strings.Contains(text, "strict domain") {
			t.Fatalf("refusal: %q", text)
		}
		g.stop(t)
	}
	export := l.export(t)
	var index int
	for i, e := range l.entries(t) {
		if e["kind"] == "decision" {
			index = i
		}
	}
	candidate := filepath.Join(t.TempDir(), "call.json")
	b, _ := json.Marshal(args)
	os.WriteFile(candidate, b, 0o600)
	run := func(extra ...string) (string, error) {
		out, err := exec.Command(bins.ledgerVerif, append([]string{"params", "--key", l.vkey, "--export", export, "--index", fmt.Sprint(index)}, append(extra, candidate)...)...).CombinedOutput()
		return string(out), err
	}
	if out, err := run("--allow-non-integer"); err != nil || !strings.HasPrefix(out, "match:") {
		t.Fatalf("params --allow-non-integer: %v\n%s", err, out)
	}
	if out, err := run(); err == nil || !strings.HasPrefix(out, "refused:") {
		t.Fatalf("params without --allow-non-integer: %v\n%s", err, out)
	}

	// The hiding commitment: the disclosure holds 0.7, admitted only by
	// the domain that admits non-integers.
	cfg, token := writeGatewayConfig(t, l, catalog, map[string]any{"notes": map[string]any{"url": n.url}}, nil)
	editConfig(t, cfg, func(m map[string]any) { m["allow_non_integer"] = true })
	g := startGateway(t, cfg, token)
	if text, isErr := callText(t, g.agent(t, nil), "notes.write_note", args); isErr {
		t.Fatalf("hiding, allow_non_integer: %s", text)
	}
	g.stop(t)
	entries := exportedEntries(t, l, l.export(t))
	last := entries[len(entries)-1]
	for _, e := range entries {
		if e.Kind == entry.KindDecision {
			last = e
		}
	}
	x := readDisclosure(t, disclosureDir(cfg), last.Params, commit.Domain{AllowNonInteger: true})
	if v, _ := x.Value("ratio"); string(v) != "0.7" {
		t.Fatalf("the disclosed ratio is %s", v)
	}
	b, _ = os.ReadFile(filepath.Join(disclosureDir(cfg), mcpgate.DisclosureFile(last.Params)))
	var de *commit.DomainError
	if _, err := commit.ParseDisclosure(b, commit.Domain{}); !errors.As(err, &de) || de.Kind != commit.ErrNonInteger {
		t.Fatalf("the disclosure read in the integers-only domain: %v", err)
	}
}
