package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A client that cannot follow a URL (no elicitation) waits, bounded, then
// is told the approval's id and page; once approved, 64 concurrent calls
// with the same arguments consume it once between them: one move. A call
// with other arguments is a new decision, not the approved one.
func TestGatewayApprovalWait(t *testing.T) {
	t.Parallel()
	for _, version := range []string{"2025-06-18", "2025-03-26", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			t.Parallel() // a ledgerd and a gateway of its own
			testGatewayApprovalWait(t, version)
		})
	}
}

func testGatewayApprovalWait(t *testing.T, version string) {
	s := setupNotes(t, map[string]any{"wait": "1s"})
	n, l := s.n, s.l
	g := s.gateway(t)
	agent := g.agentAt(t, version, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})

	writeFiles(t, filepath.Join(n.root, "allowed"), map[string]string{"draft.txt": "draft"})
	move := map[string]any{"source": "/allowed/draft.txt", "destination": "/allowed/final.txt"}
	text, isErr := callText(t, agent, "notes.move_note", move)
	if !isErr || !strings.Contains(text, "still pending") || !strings.Contains(text, l.url+"/approvals/sha256:") {
		t.Fatalf("unapproved move: %q (error %v)", text, isErr)
	}
	id := approvalID(t, text)
	if n.count("move_note") != 0 {
		t.Fatal("an unapproved move reached the server")
	}
	l.approve(t, id, "approve")

	// Other arguments: not the approved call.
	other := map[string]any{"source": "/allowed/draft.txt", "destination": "/elsewhere/final.txt"}
	text, isErr = callText(t, agent, "notes.move_note", other)
	if !isErr || strings.Contains(text, id) || n.count("move_note") != 0 {
		t.Fatalf("changed arguments after approval: %q (error %v); the server saw %d moves", text, isErr, n.count("move_note"))
	}

	var wg sync.WaitGroup
	var mu sync.Mutex
	moved, consumed := 0, 0
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			text, isErr := callText(t, agent, "notes.move_note", move)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case !isErr:
				moved++
			case strings.Contains(text, "approval_consumed") || strings.Contains(text, "was consumed"):
				consumed++
			default:
				t.Errorf("a retry: %q", text)
			}
		}()
	}
	wg.Wait()
	if moved != 1 || n.count("move_note") != 1 {
		t.Fatalf("64 retries: %d answered moved, the server saw %d moves; want 1", moved, n.count("move_note"))
	}
	if _, err := os.Stat(filepath.Join(n.root, "allowed", "final.txt")); err != nil {
		t.Fatal(err)
	}
	// The retries opened no approval of their own: the two requests are
	// the first call's and the one with other arguments.
	requests := 0
	for _, e := range l.entries(t) {
		if e["decision"] == "needs_approval" {
			requests++
		}
	}
	if requests != 2 {
		t.Fatalf("%d needs_approval decisions, want 2", requests)
	}
	export := l.export(t)
	l.verify(t, "approvals", export)
}

// A 2026-07-28 client that runs its own retry loop: the request state
// binds the retry to the arguments, and is used once.
func TestGatewayRequestState(t *testing.T) {
	t.Parallel()
	s := setupNotes(t, map[string]any{"wait": "5s"})
	n, l := s.n, s.l
	g := s.gateway(t)
	agent := g.agent(t, &mcp.ClientOptions{
		Capabilities:   &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
	})
	t.Logf("negotiated %s", agent.InitializeResult().ProtocolVersion)
	writeFiles(t, filepath.Join(n.root, "allowed"), map[string]string{"a.txt": "a"})
	move := map[string]any{"source": "/allowed/a.txt", "destination": "/allowed/b.txt"}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := agent.CallTool(ctx, &mcp.CallToolParams{Name: "notes.move_note", Arguments: move})
	if err != nil || !res.NeedsInput() || res.RequestState == "" {
		t.Fatalf("first call: %+v %v", res, err)
	}
	el, ok := res.InputRequests["approval"].(*mcp.ElicitParams)
	if !ok || el.Mode != "url" {
		t.Fatalf("input requests: %+v", res.InputRequests)
	}
	l.approve(t, strings.TrimPrefix(el.URL, l.url+"/approvals/"), "approve")
	accept := mcp.InputResponseMap{"approval": &mcp.ElicitResult{Action: "accept"}}

	retry := func(args any, state string) (string, bool) {
		res, err := agent.CallTool(ctx, &mcp.CallToolParams{Name: "notes.move_note", Arguments: args, RequestState: state, InputResponses: accept})
		if err != nil {
			return err.Error(), true
		}
		var b strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				b.WriteString(tc.Text)
			}
		}
		return b.String(), res.IsError
	}
	for _, c := range []struct {
		args  any
		state string
		want  string
	}{
		{map[string]any{"source": "/allowed/a.txt", "destination": "/elsewhere/b.txt"}, res.RequestState, "arguments differ"},
		{move, res.RequestState[:len(res.RequestState)-2] + "AA", "not one this gateway made"},
		{move, "eyJ2IjoxfQ.AAAA", "not one this gateway made"},
	} {
		if text, isErr := retry(c.args, c.state); !isErr || !strings.Contains(text, c.want) {
			t.Errorf("retry %v: %q, want a refusal %q", c.args, text, c.want)
		}
	}
	if n.count("move_note") != 0 {
		t.Fatal("a refused retry reached the server")
	}
	if text, isErr := retry(move, res.RequestState); isErr {
		t.Fatalf("the retry: %s", text)
	}
	if text, isErr := retry(move, res.RequestState); !isErr || !strings.Contains(text, "used already") {
		t.Fatalf("the state again: %q", text)
	}
	if n.count("move_note") != 1 {
		t.Fatalf("%d moves", n.count("move_note"))
	}

	// Declined in the client: answered at once, not forwarded.
	back := map[string]any{"source": "/allowed/b.txt", "destination": "/allowed/a.txt"}
	res, err = agent.CallTool(ctx, &mcp.CallToolParams{Name: "notes.move_note", Arguments: back})
	if err != nil || !res.NeedsInput() {
		t.Fatalf("another move: %+v %v", res, err)
	}
	res, err = agent.CallTool(ctx, &mcp.CallToolParams{Name: "notes.move_note", Arguments: back, RequestState: res.RequestState,
		InputResponses: mcp.InputResponseMap{"approval": &mcp.ElicitResult{Action: "decline"}}})
	if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "declined") || n.count("move_note") != 1 {
		t.Fatalf("declined: %+v %v", res, err)
	}
}

// With ledgerd stopped, every call is refused and none is forwarded.
func TestGatewayLedgerDown(t *testing.T) {
	t.Parallel()
	s := setupNotes(t, nil)
	n, l := s.n, s.l
	g := s.gateway(t)
	agent := g.agent(t, nil)
	l.stop(t)
	// At once: each is refused only after the gateway's client gave up
	// on the ledger (5 tries, 1.5 s).
	var wg sync.WaitGroup
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"notes.write_note", map[string]any{"path": "/allowed/x.txt", "content": "x"}},
		{"notes.write_note", map[string]any{"path": "/elsewhere/x.txt", "content": "x"}},
		{"notes.move_note", map[string]any{"source": "/allowed/x.txt", "destination": "/allowed/y.txt"}},
	} {
		wg.Go(func() {
			text, isErr := callText(t, agent, c.tool, c.args)
			if !isErr || !strings.Contains(text, "not forwarded") || !strings.Contains(text, "ledger") {
				t.Errorf("%s with ledgerd stopped: %q (error %v)", c.tool, text, isErr)
			}
		})
	}
	wg.Wait()
	if n.count("write_note")+n.count("move_note") != 0 {
		t.Fatal("a call reached the server with the ledger down")
	}
}
