package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// An agent host launches the gateway over stdio, as an mcpServers entry
// does: the config's stdio principal acts, and the gateway's log goes to
// stderr, never into the protocol stream.
func TestGatewayStdio(t *testing.T) {
	t.Parallel()
	n := startNotes(t)
	catalog, policies := notesCatalog(t, n.pins(t))
	l := startLedger(t, catalog, policies)
	cfg, _ := writeGatewayConfig(t, l, catalog, map[string]any{"notes": map[string]any{"url": n.url}}, nil)
	cmd := exec.Command(bins.ledgerMCP, "serve", "--stdio", "--config", cfg)
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	c := mcp.NewClient(&mcp.Implementation{Name: "desktop-host", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if names := toolNames(t, s); len(names) != 3 {
		t.Fatalf("tools over stdio: %v\n%s", names, stderr)
	}
	if text, isErr := callText(t, s, "notes.write_note", map[string]any{"path": "/allowed/from-desktop.txt", "content": "hello"}); isErr {
		t.Fatalf("%s\n%s", text, stderr)
	}
	if _, err := os.Stat(filepath.Join(n.root, "allowed", "from-desktop.txt")); err != nil {
		t.Fatal(err)
	}
	var decision map[string]any
	for _, e := range l.entries(t) {
		if e["kind"] == "decision" {
			decision = e
		}
	}
	if decision["principal"] != "agent:desktop" || decision["mediator"] != "gateway" || decision["action"] != "notes.write_note" {
		t.Fatalf("recorded %v", decision)
	}
	s.Close()
	waitFor(t, "the gateway to exit once its stdin closes", func() bool { return cmd.ProcessState != nil })
	if !strings.Contains(stderr.String(), `"msg":"call forwarded"`) {
		t.Fatalf("no log line on stderr:\n%s", stderr)
	}
}
