package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/mcpgate"
	"github.com/decisionledger/ledger/verify"
)

// exportedEntries verifies an export with the log's key and returns its
// entries, by index.
func exportedEntries(t *testing.T, l *ledger, export string) []*entry.Entry {
	t.Helper()
	key, err := verify.ParseKey(l.vkey)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(export)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []*entry.Entry
	var perr error
	_, err = verify.VerifyExport(f, key, verify.ExportOptions{OnEntry: func(index uint64, b []byte) {
		e, err := entry.Parse(b)
		if err != nil && perr == nil {
			perr = err
		}
		out = append(out, e)
	}})
	if err != nil || perr != nil {
		t.Fatalf("the export: %v %v", err, perr)
	}
	return out
}

// readDisclosure reads the disclosure file of commitment c from dir,
// holding it to mode 0600, and checks it against c.
func readDisclosure(t *testing.T, dir string, c commit.Commitment, d commit.Domain) *commit.Disclosure {
	t.Helper()
	path := filepath.Join(dir, strings.TrimPrefix(c.DigestText(), "v2:sha256:")+".json")
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatalf("the disclosure of %s: %v", c.DigestText(), err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s: mode %04o, want 0600", path, fi.Mode().Perm())
	}
	b, _ := os.ReadFile(path)
	x, err := commit.ParseDisclosure(b, d)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if err := x.Check(c); err != nil {
		t.Fatalf("%s against the entry's commitment: %v", path, err)
	}
	return x
}

// canonicalOf is the canonical form of args.
func canonicalOf(t *testing.T, args any) string {
	t.Helper()
	b, _ := json.Marshal(args)
	c, err := commit.Canonicalize(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(c)
}

// With the default config, every call is committed to with the hiding
// commitment: an allowed write's entry carries v2:sha256:, and its
// disclosure file (mode 0600, in a directory of mode 0700, named by the
// digest's hex) checks against the exported entry and opens exactly the
// call's arguments; the same write again has an unrelated digest and a
// file of its own; a denied call's entry is recorded and so keeps its
// file; a call ledgerd refuses outright (an action its catalog lacks)
// appends nothing and leaves no file. A move that needs approval is
// approved on the page and retried with the same arguments: the
// consumption presents the request's own v2 commitment, and the retry
// writes no file (the request's opens both entries); ledger-verify
// disclose checks a file as an auditor would. A move denied on the
// page and asked again is a new request, under fresh openings. The export
// verifies with ledger-verify export and approvals.
func TestGatewayHidingCommitment(t *testing.T) {
	t.Parallel()
	n := startNotes(t)
	catalog, policies := notesCatalog(t, n.pins(t))
	// ledgerd's catalog lacks broken_note, which the gateway declares:
	// ledgerd refuses its calls (unknown_action) and appends nothing.
	dir := t.TempDir()
	lcatalog, lpolicies := filepath.Join(dir, "declarations"), filepath.Join(dir, "policies")
	for _, f := range []string{"write_note.json", "move_note.json"} {
		b, _ := os.ReadFile(filepath.Join(catalog, f))
		writeFiles(t, lcatalog, map[string]string{f: string(b)})
	}
	pol, _ := os.ReadFile(filepath.Join(policies, "notes.cedar"))
	text, _, _ := strings.Cut(string(pol), `@id("notes.broken-allowed")`)
	writeFiles(t, lpolicies, map[string]string{"notes.cedar": text})
	l := startLedger(t, lcatalog, lpolicies)
	cfg, token := writeGatewayConfig(t, l, catalog, map[string]any{"notes": map[string]any{"url": n.url}}, map[string]any{"wait": "1s"})
	g := startGateway(t, cfg, token)
	agent := g.agent(t, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	disclosures := disclosureDir(cfg)
	if fi, err := os.Stat(disclosures); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the disclosures directory: %v %v, want mode 0700", fi, err)
	}

	write := map[string]any{"path": "/allowed/report.txt", "content": "figures for payee-0042"}
	for range 2 {
		if text, isErr := callText(t, agent, "notes.write_note", write); isErr {
			t.Fatalf("allowed write: %s", text)
		}
	}
	denied := map[string]any{"path": "/elsewhere/report.txt", "content": "x"}
	if text, isErr := callText(t, agent, "notes.write_note", denied); !isErr || !strings.Contains(text, "denied") {
		t.Fatalf("denied write: %q", text)
	}
	files := func() int {
		es, _ := os.ReadDir(disclosures)
		return len(es)
	}
	before := files()
	if text, isErr := callText(t, agent, "notes.broken_note", map[string]any{"path": "/allowed/x.txt"}); !isErr || !strings.Contains(text, "unknown_action") {
		t.Fatalf("a call ledgerd refuses: %q", text)
	}
	if files() != before {
		t.Fatalf("a call ledgerd refused left a disclosure file (%d files, %d before)", files(), before)
	}

	move := map[string]any{"source": "/allowed/report.txt", "destination": "/allowed/final.txt"}
	text, isErr := callText(t, agent, "notes.move_note", move)
	if !isErr || !strings.Contains(text, "still pending") {
		t.Fatalf("unapproved move: %q", text)
	}
	l.approve(t, approvalID(t, text), "approve")
	if text, isErr := callText(t, agent, "notes.move_note", move); isErr {
		t.Fatalf("the approved move, retried: %s\n%s", text, g.stderr)
	}
	if n.count("move_note") != 1 {
		t.Fatalf("%d moves, want 1", n.count("move_note"))
	}
	// A move denied on the page: the same arguments again ask anew, under
	// fresh openings (a new request, a new disclosure file).
	back := map[string]any{"source": "/allowed/final.txt", "destination": "/allowed/report.txt"}
	text, isErr = callText(t, agent, "notes.move_note", back)
	if !isErr || !strings.Contains(text, "still pending") {
		t.Fatalf("another move: %q", text)
	}
	deniedID := approvalID(t, text)
	l.approve(t, deniedID, "deny")
	text, isErr = callText(t, agent, "notes.move_note", back)
	if !isErr || !strings.Contains(text, "still pending") || strings.Contains(text, deniedID) {
		t.Fatalf("the denied move again: %q, want a new approval", text)
	}
	if n.count("move_note") != 1 {
		t.Fatalf("%d moves, want 1", n.count("move_note"))
	}

	waitFor(t, "the outcomes", func() bool {
		outcomes := 0
		for _, e := range l.entries(t) {
			if e["kind"] == "outcome" {
				outcomes++
			}
		}
		return outcomes == 3
	})
	export := l.export(t)
	l.verify(t, "export", export)
	l.verify(t, "approvals", export)
	var writes, denies, requests []*entry.Entry
	var consumption *entry.Entry
	for _, e := range exportedEntries(t, l, export) {
		switch {
		case e.Kind == entry.KindDecision && e.Decision == entry.Allow:
			writes = append(writes, e)
		case e.Kind == entry.KindDecision && e.Decision == entry.Deny:
			denies = append(denies, e)
		case e.Kind == entry.KindDecision && e.Decision == entry.NeedsApproval:
			requests = append(requests, e)
		case e.Kind == entry.KindConsumption:
			consumption = e
		}
	}
	if len(writes) != 2 || len(denies) != 1 || len(requests) != 3 || consumption == nil {
		t.Fatalf("%d allowed, %d denied, %d needing approval, consumption %v", len(writes), len(denies), len(requests), consumption != nil)
	}
	for _, e := range append(append(writes, denies...), requests...) {
		if !strings.HasPrefix(e.Params.DigestText(), "v2:sha256:") || !e.Params.Hiding {
			t.Fatalf("entry %d: params_digest %s, want the hiding commitment", e.Index, e.Params.DigestText())
		}
	}
	if writes[0].Params.Equal(writes[1].Params) {
		t.Fatal("two identical calls have the same commitment")
	}
	for _, e := range writes {
		x := readDisclosure(t, disclosures, e.Params, commit.Domain{})
		if got, _ := x.Params(); string(got) != canonicalOf(t, write) {
			t.Fatalf("entry %d's disclosure opens %s, not the call's arguments", e.Index, got)
		}
	}
	// As an auditor checks it: ledger-verify disclose, with the
	// declaration to recompute the path's projection.
	out, err := exec.Command(bins.ledgerVerif, "disclose", "--key", l.vkey, "--export", export, "--index", fmt.Sprint(writes[0].Index),
		"--declaration", filepath.Join(catalog, "write_note.json"), filepath.Join(disclosures, mcpgate.DisclosureFile(writes[0].Params))).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "disclosed: entry "+fmt.Sprint(writes[0].Index)+" opens 2 of 2 fields") ||
		!regexp.MustCompile(`(?m)^  path +derived +resource_dir: recorded and recomputed agree$`).Match(out) {
		t.Fatalf("ledger-verify disclose: %v\n%s", err, out)
	}
	readDisclosure(t, disclosures, denies[0].Params, commit.Domain{})
	x := readDisclosure(t, disclosures, requests[0].Params, commit.Domain{})
	if !consumption.Params.Equal(requests[0].Params) {
		t.Fatalf("the consumption presents %s, the request %s", consumption.Params.DigestText(), requests[0].Params.DigestText())
	}
	if err := x.Check(consumption.Params); err != nil {
		t.Fatalf("the request's disclosure against the consumption: %v", err)
	}
	if requests[1].Params.Equal(requests[2].Params) {
		t.Fatal("the denied move and its repetition have the same commitment")
	}
	for _, e := range requests[1:] {
		readDisclosure(t, disclosures, e.Params, commit.Domain{})
	}
	if files() != 6 {
		t.Fatalf("%d disclosure files, want 6: one per decision recorded", files())
	}
	if _, err := os.Stat(filepath.Join(disclosures, mcpgate.DisclosureFile(requests[0].Params))); err != nil {
		t.Fatal(err)
	}
}

// A 2026-07-28 client retrying with its request state after the gateway
// restarted: the state verifies (a state_key_file), but the openings of
// the call that opened the approval are gone with the old process, so the
// retry cannot present the request's commitment. It is refused, told to
// ask again, and nothing is consumed or forwarded; calling again without
// the state opens a new approval.
func TestGatewayHidingRestart(t *testing.T) {
	t.Parallel()
	n := startNotes(t)
	catalog, policies := notesCatalog(t, n.pins(t))
	l := startLedger(t, catalog, policies)
	cfg, token := writeGatewayConfig(t, l, catalog, map[string]any{"notes": map[string]any{"url": n.url}}, map[string]any{"wait": "5s", "state_key_file": "state.key"})
	os.WriteFile(filepath.Join(filepath.Dir(cfg), "state.key"), []byte(strings.Repeat("5a", 32)+"\n"), 0o600)
	opts := &mcp.ClientOptions{
		Capabilities:   &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
	}
	writeFiles(t, filepath.Join(n.root, "allowed"), map[string]string{"a.txt": "a"})
	move := map[string]any{"source": "/allowed/a.txt", "destination": "/allowed/b.txt"}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	g := startGateway(t, cfg, token)
	res, err := g.agent(t, opts).CallTool(ctx, &mcp.CallToolParams{Name: "notes.move_note", Arguments: move})
	if err != nil || !res.NeedsInput() || res.RequestState == "" {
		t.Fatalf("first call: %+v %v", res, err)
	}
	el := res.InputRequests["approval"].(*mcp.ElicitParams)
	id := strings.TrimPrefix(el.URL, l.url+"/approvals/")
	l.approve(t, id, "approve")
	g.stop(t)

	g = startGateway(t, cfg, token)
	agent := g.agent(t, opts)
	accept := mcp.InputResponseMap{"approval": &mcp.ElicitResult{Action: "accept"}}
	res, err = agent.CallTool(ctx, &mcp.CallToolParams{Name: "notes.move_note", Arguments: move, RequestState: res.RequestState, InputResponses: accept})
	if err != nil || !res.IsError {
		t.Fatalf("the retry after a restart: %+v %v", res, err)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	if !strings.Contains(text, "no longer holds the openings") || !strings.Contains(text, "ask for a new approval") || !strings.Contains(text, id) {
		t.Fatalf("the retry after a restart: %q", text)
	}
	if n.count("move_note") != 0 {
		t.Fatal("the retry reached the server")
	}
	for _, e := range l.entries(t) {
		if e["kind"] == "consumption" {
			t.Fatal("the retry consumed the approval")
		}
	}
	res, err = agent.CallTool(ctx, &mcp.CallToolParams{Name: "notes.move_note", Arguments: move})
	if err != nil || !res.NeedsInput() || !strings.Contains(res.InputRequests["approval"].(*mcp.ElicitParams).URL, "/approvals/sha256:") ||
		strings.HasSuffix(res.InputRequests["approval"].(*mcp.ElicitParams).URL, id) {
		t.Fatalf("calling again: %+v %v, want a new approval", res, err)
	}
}

// "commitment": "v1" commits with version 1: the entry's params_digest is
// sha256:<hex>, and no disclosure is written. "disclosures": "none" commits
// with the hiding commitment and writes none either.
func TestGatewayV1Commitment(t *testing.T) {
	t.Parallel()
	s := setupNotes(t, nil)
	editConfig(t, s.cfg, func(cfg map[string]any) {
		cfg["commitment"] = "v1"
		delete(cfg, "disclosures")
	})
	g := s.gateway(t)
	if text, isErr := callText(t, g.agent(t, nil), "notes.write_note", map[string]any{"path": "/allowed/a.txt", "content": "a"}); isErr {
		t.Fatalf("allowed write: %s", text)
	}
	var digests []string
	for _, e := range s.l.entries(t) {
		if e["kind"] == "decision" {
			digests = append(digests, e["params_digest"].(string))
		}
	}
	if len(digests) != 1 || !strings.HasPrefix(digests[0], "sha256:") {
		t.Fatalf("params digests %v, want one sha256:", digests)
	}
	if _, err := os.Stat(disclosureDir(s.cfg)); !os.IsNotExist(err) {
		t.Fatalf("the disclosures directory with v1: %v", err)
	}
	g.stop(t)

	// "disclosures": "none": hiding commitments, and no file anywhere.
	editConfig(t, s.cfg, func(cfg map[string]any) {
		delete(cfg, "commitment")
		cfg["disclosures"] = "none"
	})
	before, _ := os.ReadDir(filepath.Dir(s.cfg))
	g = s.gateway(t)
	if text, isErr := callText(t, g.agent(t, nil), "notes.write_note", map[string]any{"path": "/allowed/b.txt", "content": "b"}); isErr {
		t.Fatalf("allowed write, no disclosures: %s", text)
	}
	digests = nil
	for _, e := range s.l.entries(t) {
		if e["kind"] == "decision" {
			digests = append(digests, e["params_digest"].(string))
		}
	}
	if len(digests) != 2 || !strings.HasPrefix(digests[1], "v2:sha256:") {
		t.Fatalf("params digests %v, want the second v2:sha256:", digests)
	}
	if after, _ := os.ReadDir(filepath.Dir(s.cfg)); len(after) != len(before) {
		t.Fatalf("with disclosures none, the config's directory went from %d to %d files", len(before), len(after))
	}
}
