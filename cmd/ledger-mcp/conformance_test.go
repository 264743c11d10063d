package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/decisionledger/ledger/commit/declare"
	"github.com/decisionledger/ledger/internal/npmtest"
	"github.com/decisionledger/ledger/mcpgate"
)

// reviewedCatalog writes, for every tool the server at url lists, the
// draft declaration ledger-mcp declare would write, marked reviewed
// (every field payload), and a policy that allows every action: the
// gateway then stands in front of the server as transparently as it can,
// for the conformance suite.
func reviewedCatalog(t *testing.T, server, url string) (catalog, policies string, declared []string) {
	t.Helper()
	dir := t.TempDir()
	catalog, policies = filepath.Join(dir, "declarations"), filepath.Join(dir, "policies")
	os.MkdirAll(catalog, 0o755)
	c := mcp.NewClient(&mcp.Implementation{Name: "catalog", Version: "1"}, nil)
	s, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for tool, err := range s.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		digest, err := mcpgate.ToolDigest(tool)
		if err != nil {
			t.Logf("%s: no digest: %v", tool.Name, err)
			continue
		}
		schema, _ := json.Marshal(tool.InputSchema)
		draft, _, err := declare.DraftFromInputSchema(server, tool.Name, tool.Description, schema, digest)
		if err != nil {
			t.Logf("%s: not declarable: %v", tool.Name, err)
			continue
		}
		var m map[string]any
		json.Unmarshal(draft, &m)
		delete(m, "reviewed")
		b, _ := json.Marshal(m)
		os.WriteFile(filepath.Join(catalog, server+"."+tool.Name+".json"), b, 0o644)
		declared = append(declared, server+"."+tool.Name)
	}
	writeFiles(t, policies, map[string]string{"all.cedar": "@id(\"allow-all\")\npermit (principal, action, resource);\n"})
	return catalog, policies, declared
}

// The official conformance suite, server mode over streamable HTTP:
// every scenario server-everything passes when reached directly passes
// through the gateway, with an allow-all reviewed catalog of its tools.
func TestConformanceThroughGateway(t *testing.T) {
	t.Parallel()
	binaries(t)
	direct := npmtest.StartEverything(t)
	wantPassed, _ := npmtest.Conformance(t, direct)
	if len(wantPassed) == 0 {
		t.Fatal("server-everything passes no scenario directly")
	}
	catalog, policies, declared := reviewedCatalog(t, "everything", direct)
	t.Logf("declared %d tools: %v", len(declared), declared)
	l := startLedger(t, catalog, policies)
	cfg, token := writeGatewayConfig(t, l, catalog, map[string]any{"everything": map[string]any{"url": direct,
		"forward": []string{"resources", "prompts", "completions"}}}, nil)
	// The suite's client sends no token.
	var m map[string]any
	b, _ := os.ReadFile(cfg)
	json.Unmarshal(b, &m)
	m["http"].(map[string]any)["unauthenticated_principal"] = "agent:conformance"
	b, _ = json.Marshal(m)
	os.WriteFile(cfg, b, 0o600)
	g := startGateway(t, cfg, token)

	passed, failed := npmtest.Conformance(t, g.url)
	t.Logf("directly: %d passed %v", len(wantPassed), wantPassed)
	t.Logf("through the gateway: passed %v, failed %v", passed, failed)
	var lost []string
	for _, s := range wantPassed {
		if !slices.Contains(passed, s) {
			lost = append(lost, s)
		}
	}
	if len(lost) > 0 {
		t.Errorf("scenarios passed directly but not through the gateway: %s\ngateway log:\n%s", strings.Join(lost, ", "), g.stderr)
	}
	export := l.export(t)
	l.verify(t, "export", export)
	l.verify(t, "decisions", export, "--policies", policies)
}
