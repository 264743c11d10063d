package main

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"pgregory.net/rapid"

	"github.com/decisionledger/ledger/commit"
)

// recorder is a reverse proxy in front of ledgerd that keeps every
// request body the gateway sends.
type recorder struct {
	mu     sync.Mutex
	bodies []string
}

func (r *recorder) start(t *testing.T, target string) string {
	u, _ := url.Parse(target)
	proxy := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.bodies = append(r.bodies, req.Method+" "+req.URL.Path+" "+string(b))
		r.mu.Unlock()
		req.Body = io.NopCloser(bytes.NewReader(b))
		proxy.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// The leak guard over the gateway's output. Calls drawn by rapid carry
// secrets (ten upper-case letters: nothing the gateway or the ledger
// writes of its own has six in a row, once signatures are set aside) in
// what never crosses: a note's content (payload) and its file name (the
// last path segment, which resource_dir drops). Calls are allowed,
// denied, refused for their arguments, or need approval. No six-letter
// window of a secret may appear in the gateway's log, ledgerd's log, the
// log's entries (signatures removed), the gateway's metrics, or any
// request the gateway sent to ledgerd, but for the preview member of a
// decide, which carries the redacted call to the approver by design
// (docs/mcp.md §3) — and the guard checks that it finds the secrets
// there, so that it cannot pass by looking at nothing.
//
// With approvals.preview "attributes" no preview is sent, and the requests
// to ledgerd hold no secret at all.
//
// The openings of the calls' hiding commitments, read from the
// disclosure files, appear nowhere of the above either, nor in an answer
// the agent was given (in hex, base64 or base64url); the guard checks
// that it read openings, and that the files hold the secrets (where they
// belong).
func TestGatewayLeakGuard(t *testing.T) {
	t.Parallel()
	for _, preview := range []string{"arguments", "attributes"} {
		t.Run(preview, func(t *testing.T) {
			t.Parallel() // a ledgerd and a gateway of its own
			testLeakGuard(t, preview)
		})
	}
}

func testLeakGuard(t *testing.T, preview string) {
	n := startNotes(t)
	catalog, policies := notesCatalog(t, n.pins(t))
	l := startLedger(t, catalog, policies)
	rec := &recorder{}
	proxied := *l
	proxied.url = rec.start(t, l.url)
	cfg, token := writeGatewayConfig(t, &proxied, catalog, map[string]any{"notes": map[string]any{"url": n.url}}, map[string]any{"wait": "1ms", "preview": preview})
	g := startGateway(t, cfg, token)
	agent := g.agent(t, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})

	var secrets, answers []string
	calls := 0
	rapid.Check(t, func(rt *rapid.T) {
		secret := rapid.StringOfN(rapid.RuneFrom([]rune("ABCDEFGHIJKLMNOPQRSTUVWXYZ")), 10, 10, -1).Draw(rt, "secret")
		secrets = append(secrets, secret)
		dir := rapid.SampledFrom([]string{"/allowed", "/elsewhere", "/allowed/sub", "/allowed/../x"}).Draw(rt, "dir")
		name := secret + ".txt"
		var tool string
		var args map[string]any
		switch rapid.IntRange(0, 2).Draw(rt, "kind") {
		case 0, 1:
			tool, args = "notes.write_note", map[string]any{"path": dir + "/" + name, "content": "note: " + secret}
		default:
			tool, args = "notes.move_note", map[string]any{"source": dir + "/" + name, "destination": "/allowed/" + strings.ToLower(secret) + ".txt"}
		}
		text, _ := callText(t, agent, tool, args)
		answers = append(answers, text)
		calls++
	})
	if calls < 50 {
		t.Fatalf("%d calls", calls)
	}

	var entries strings.Builder
	for _, e := range l.entries(t) {
		delete(e, "sig")
		b, _ := json.Marshal(e)
		entries.Write(b)
	}
	resp, err := http.Get(strings.TrimSuffix(g.url, "/mcp") + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var requests, previews strings.Builder
	rec.mu.Lock()
	for _, b := range rec.bodies {
		method, rest, _ := strings.Cut(b, " ")
		path, body, _ := strings.Cut(rest, " ")
		var m map[string]json.RawMessage
		if method == "POST" && path == "/v1/decide" && json.Unmarshal([]byte(body), &m) == nil {
			previews.Write(m["preview"])
			delete(m, "preview")
			nb, _ := json.Marshal(m)
			body = string(nb)
		}
		requests.WriteString(method + " " + path + " " + body + "\n")
	}
	rec.mu.Unlock()

	leaks := func(where, text string) int {
		found := 0
		for _, s := range secrets {
			for i := 0; i+6 <= len(s); i++ {
				if strings.Contains(text, s[i:i+6]) {
					t.Errorf("%s holds %q, of a secret", where, s[i:i+6])
					found++
					break
				}
			}
		}
		return found
	}
	leaks("the gateway's log", g.stderr.String())
	leaks("ledgerd's log", l.stderr.String()+l.stdout.String())
	leaks("the log's entries", entries.String())
	leaks("the gateway's metrics", string(metrics))
	leaks("the requests to ledgerd", requests.String())

	// No opening anywhere but in its disclosure file.
	files, _ := filepath.Glob(filepath.Join(disclosureDir(cfg), "*.json"))
	var openings []string
	inFiles := 0
	for _, f := range files {
		b, _ := os.ReadFile(f)
		for _, s := range secrets {
			if strings.Contains(string(b), s) {
				inFiles++
				break
			}
		}
		x, err := commit.ParseDisclosure(b, commit.Domain{})
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, name := range x.Fields() {
			o, err := x.Opening(name)
			if err != nil {
				t.Fatalf("%s: %s: %v", f, name, err)
			}
			openings = append(openings, hex.EncodeToString(o[:]), base64.StdEncoding.EncodeToString(o[:]), base64.RawURLEncoding.EncodeToString(o[:]))
		}
	}
	if len(openings) == 0 || inFiles == 0 {
		t.Fatalf("%d disclosure files, %d openings, secrets in %d: the opening guard is looking at nothing", len(files), len(openings)/3, inFiles)
	}
	everywhere := strings.Join([]string{g.stderr.String(), l.stderr.String(), l.stdout.String(), entries.String(), string(metrics),
		requests.String(), previews.String(), strings.Join(answers, "\n")}, "\n")
	forms := []string{"hex", "base64", "base64url"}
	for i, o := range openings {
		if strings.Contains(everywhere, o) {
			t.Errorf("opening %d, in %s, is outside its disclosure file", i/3, forms[i%3])
		}
	}
	t.Logf("%d disclosure files, %d openings looked for", len(files), len(openings)/3)
	if preview == "attributes" {
		if previews.Len() != 0 {
			t.Fatalf("previews sent: %.200s", previews.String())
		}
		return
	}
	// The guard looks where it should: the previews hold the secrets.
	found := 0
	for _, s := range secrets {
		if strings.Contains(previews.String(), s) {
			found++
		}
	}
	if found == 0 {
		t.Fatal("no secret found in the previews: the guard is looking at nothing")
	}
	t.Logf("%d calls, %d requests to ledgerd, secrets in %d of the previews", calls, len(rec.bodies), found)
}
