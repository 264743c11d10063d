package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/decisionledger/ledger/config"
	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/storage/memory"
)

// docs/openapi.json describes ledgerd's HTTP API for tools. These tests
// hold it equal to the route table and check ledgerd's real answers
// against it. It is JSON rather than YAML because the module has no YAML
// library: JSON is valid OpenAPI, and every YAML 1.2 reader reads it.

const openAPIURL = "urn:ledgerd:openapi"

// openAPIDoc is docs/openapi.json, read for a test.
type openAPIDoc struct {
	t       *testing.T
	root    map[string]any
	c       *jsonschema.Compiler
	schemas map[string]*jsonschema.Schema // by JSON pointer
}

func loadOpenAPI(t *testing.T) *openAPIDoc {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "openapi.json"))
	if err != nil {
		t.Fatal(err)
	}
	d := &openAPIDoc{t: t, schemas: map[string]*jsonschema.Schema{}}
	if err := json.Unmarshal(data, &d.root); err != nil {
		t.Fatalf("docs/openapi.json: %v", err)
	}
	if d.root["openapi"] != "3.1.0" {
		t.Fatalf("docs/openapi.json: openapi %v, want 3.1.0", d.root["openapi"])
	}
	// OpenAPI 3.1 schemas are JSON Schema 2020-12; the whole document is
	// one resource, so that a schema's $ref to #/components/... resolves.
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	d.c = jsonschema.NewCompiler()
	d.c.DefaultDraft(jsonschema.Draft2020)
	if err := d.c.AddResource(openAPIURL, doc); err != nil {
		t.Fatal(err)
	}
	return d
}

// escapePointer escapes a JSON pointer token (RFC 6901).
func escapePointer(token string) string {
	return strings.ReplaceAll(strings.ReplaceAll(token, "~", "~0"), "/", "~1")
}

// lookup returns the object at pointer, following a $ref it holds, and
// the pointer it was found at.
func (d *openAPIDoc) lookup(pointer string) (map[string]any, string) {
	var v any = d.root
	for _, tok := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := v.(map[string]any)
		if !ok {
			return nil, pointer
		}
		v = m[tok]
	}
	m, _ := v.(map[string]any)
	if ref, ok := m["$ref"].(string); ok && strings.HasPrefix(ref, "#/") {
		return d.lookup(strings.TrimPrefix(ref, "#"))
	}
	return m, pointer
}

func (d *openAPIDoc) schema(pointer string) *jsonschema.Schema {
	if s, ok := d.schemas[pointer]; ok {
		return s
	}
	s, err := d.c.Compile(openAPIURL + "#" + pointer)
	if err != nil {
		d.t.Fatalf("docs/openapi.json: the schema at %s does not compile: %v", pointer, err)
	}
	d.schemas[pointer] = s
	return s
}

var methods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// openAPIPath is the OpenAPI path of a ServeMux pattern's path:
// {path...} becomes {path}, since OpenAPI has no parameter spanning
// segments, and the end anchor {$} (GET /approvals/{$}) is dropped.
func openAPIPath(pattern string) (method, path string) {
	method, path, _ = strings.Cut(pattern, " ")
	return strings.ToLower(method), strings.NewReplacer("...}", "}", "{$}", "").Replace(path)
}

// Every route is in docs/openapi.json, and everything it describes is a
// route.
func TestOpenAPIRoutes(t *testing.T) {
	d := loadOpenAPI(t)
	paths, _ := d.root["paths"].(map[string]any)
	served := map[string]bool{}
	for _, rt := range (&server{cfg: &config.Config{}, m: newMetrics()}).routeTable() {
		method, path := openAPIPath(rt.pattern)
		served[method+" "+path] = true
		if op, _ := d.lookup("/paths/" + escapePointer(path) + "/" + method); op == nil {
			t.Errorf("route %s is not in docs/openapi.json (paths[%q].%s)", rt.pattern, path, method)
		}
	}
	for path, item := range paths {
		for method := range item.(map[string]any) {
			if slices.Contains(methods, method) && !served[method+" "+path] {
				t.Errorf("docs/openapi.json describes %s %s, which ledgerd does not serve", strings.ToUpper(method), path)
			}
		}
	}
}

// The error codes in docs/openapi.json's Error schema are those the
// handlers answer with, and docs/api.md lists each.
func TestOpenAPIErrorCodes(t *testing.T) {
	d := loadOpenAPI(t)
	errSchema, _ := d.lookup("/components/schemas/Error/properties/error/properties/code")
	var documented []string
	for _, c := range errSchema["enum"].([]any) {
		documented = append(documented, c.(string))
	}
	files, _ := filepath.Glob("*.go")
	used := map[string]bool{}
	call := regexp.MustCompile(`(?:writeError\(w|refuse\(w|pageRefuse\(w, r), [^,]+, "([a-z_]+)"`)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, _ := os.ReadFile(f)
		for _, m := range call.FindAllSubmatch(src, -1) {
			used[string(m[1])] = true
		}
	}
	api, err := os.ReadFile(filepath.Join("..", "..", "docs", "api.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range documented {
		if !used[c] {
			t.Errorf("docs/openapi.json lists code %s, which no handler answers", c)
		}
		if !bytes.Contains(api, []byte("`"+c+"`")) {
			t.Errorf("docs/api.md does not list code %s", c)
		}
		delete(used, c)
	}
	for c := range used {
		t.Errorf("handlers answer code %s, which docs/openapi.json's Error schema does not list", c)
	}
}

// answerChecker checks answers against docs/openapi.json and records
// which of its responses were seen.
type answerChecker struct {
	t    *testing.T
	d    *openAPIDoc
	mux  *http.ServeMux // the route table's patterns
	seen map[string]bool
}

// check checks resp (body already read) to req against the response
// docs/openapi.json gives for its route and status; a request no route
// serves against components/responses (NotFound, MethodNotAllowed).
func (a *answerChecker) check(req *http.Request, resp *http.Response, body []byte) {
	t := a.t
	t.Helper()
	name := req.Method + " " + req.URL.RequestURI()
	var pointer, key string
	if _, pattern := a.mux.Handler(req); pattern != "" {
		method, path := openAPIPath(pattern)
		key = fmt.Sprintf("%s %s %d", method, path, resp.StatusCode)
		pointer = fmt.Sprintf("/paths/%s/%s/responses/%d", escapePointer(path), method, resp.StatusCode)
	} else {
		switch resp.StatusCode {
		case http.StatusNotFound:
			pointer = "/components/responses/NotFound"
		case http.StatusMethodNotAllowed:
			pointer = "/components/responses/MethodNotAllowed"
		default:
			t.Errorf("%s: %d, but no route serves it", name, resp.StatusCode)
			return
		}
		key = pointer
	}
	spec, at := a.d.lookup(pointer)
	if spec == nil {
		t.Errorf("%s: answered %d, which docs/openapi.json does not describe (%s): %s", name, resp.StatusCode, pointer, body)
		return
	}
	a.seen[key] = true
	headers, _ := spec["headers"].(map[string]any)
	for h, hs := range headers {
		if required, _ := hs.(map[string]any)["required"].(bool); required && resp.Header.Get(h) == "" {
			t.Errorf("%s: %d without the header %s", name, resp.StatusCode, h)
		}
	}
	content, _ := spec["content"].(map[string]any)
	mediaType, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil {
		t.Errorf("%s: Content-Type %q: %v", name, resp.Header.Get("Content-Type"), err)
		return
	}
	media, ok := content[mediaType].(map[string]any)
	if !ok {
		t.Errorf("%s: %d is %s, but docs/openapi.json gives it as %v", name, resp.StatusCode, mediaType, slices.Collect(mapKeys(content)))
		return
	}
	if _, ok := media["schema"]; !ok || mediaType != "application/json" {
		return
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		t.Errorf("%s: %d body is not JSON: %v", name, resp.StatusCode, err)
		return
	}
	if err := a.d.schema(at + "/content/" + escapePointer(mediaType) + "/schema").Validate(v); err != nil {
		t.Errorf("%s: %d body does not match docs/openapi.json: %v\n%s", name, resp.StatusCode, err, body)
	}
}

func mapKeys(m map[string]any) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// do sends a request to s and checks the answer, which must have status
// want.
func (a *answerChecker) do(s *testServer, want int, method, path, body string, header ...string) *http.Response {
	a.t.Helper()
	req, _ := http.NewRequest(method, s.url+path, strings.NewReader(body))
	if method == "GET" {
		req.Body, req.ContentLength = nil, 0
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != want {
		a.t.Errorf("%s %s: %d %s, want %d", method, path, resp.StatusCode, b, want)
	}
	a.check(req, resp, b)
	return resp
}

// notExercised are the responses docs/openapi.json describes that
// TestOpenAPIAnswers cannot bring about, and why.
var notExercised = map[string]string{
	"get /v1/checkpoint 404": "ledger.Open signs a checkpoint; only a store opened otherwise has none",
	"get /checkpoint 404":    "as GET /v1/checkpoint",
	// Only an instance of several on PostgreSQL that does not sequence
	// forwards these, and answers 503 when it cannot (cluster_test.go).
	"get /v1/approvals/{id} 503":    "a follower's forwarding",
	"get /v1/policies 503":          "a follower's forwarding",
	"get /v1/policies/{digest} 503": "a follower's forwarding",
	"get /approvals/ 503":           "a follower's forwarding",
	"post /approvals/sign-out 503":  "a follower's forwarding",
	"get /approvals/{id} 503":       "a follower's forwarding",
	// The same code answers every append (appendAndAnswer).
	"post /v1/approvals/{id}/consume 500":  "as POST /v1/entries with a damaged store",
	"post /v1/approvals/{id}/outcome 500":  "as POST /v1/entries with a damaged store",
	"post /v1/entries/{index}/outcome 500": "as POST /v1/entries with a damaged store",
}

// entryLostStore has lost its entries once lost is set: it reports them
// as damage.
type entryLostStore struct {
	ledger.Store
	lost atomic.Bool
}

func (s *entryLostStore) Entry(ctx context.Context, index uint64) ([]byte, error) {
	if s.lost.Load() {
		return nil, fmt.Errorf("%w: entry %d is lost", ledger.ErrCorrupt, index)
	}
	return s.Store.Entry(ctx, index)
}

// ledgerd's answers, every status docs/openapi.json gives of every
// endpoint, match what it says: status, content type, required headers
// and, for JSON, the schema.
func TestOpenAPIAnswers(t *testing.T) {
	d := loadOpenAPI(t)
	mux := http.NewServeMux()
	for _, rt := range (&server{cfg: &config.Config{}, m: newMetrics()}).routeTable() {
		mux.Handle(rt.pattern, rt.handler)
	}
	a := &answerChecker{t: t, d: d, mux: mux, seen: map[string]bool{}}
	auth := func(s *testServer) []string { return []string{"Authorization", "Bearer " + s.token} }

	// A ledger with the repository's catalog, appended to with docs/api.md's example.
	s := startServerWith(t, func(c *config.Config) { c.CatalogDir = corpusDir })
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "api.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, _ := strings.Cut(string(doc), "## Append")
	_, block, _ := strings.Cut(after, "```json\n")
	example, _, _ := strings.Cut(block, "```")
	a.do(s, 201, "POST", "/v1/entries", example, auth(s)...)
	a.do(s, 201, "POST", "/v1/entries", example, append(auth(s), "Idempotency-Key", "key-1")...)
	a.do(s, 200, "POST", "/v1/entries", example, append(auth(s), "Idempotency-Key", "key-1")...)
	a.do(s, 409, "POST", "/v1/entries", strings.Replace(example, `"needs_approval"`, `"deny"`, 1), append(auth(s), "Idempotency-Key", "key-1")...)
	a.do(s, 400, "POST", "/v1/entries", example[:40], auth(s)...)
	a.do(s, 401, "POST", "/v1/entries", example)
	a.do(s, 413, "POST", "/v1/entries", example+strings.Repeat(" ", 300<<10), auth(s)...)
	a.do(s, 422, "POST", "/v1/entries", strings.Replace(example, `"make_payment"`, `"pay_everyone"`, 1), auth(s)...)
	func() { // ?wait=checkpoint: stand in for the periodic checkpoints, off in tests
		done := make(chan struct{})
		defer close(done)
		go func() {
			for {
				select {
				case <-done:
					return
				case <-time.After(20 * time.Millisecond):
					s.l.Publish(context.Background())
				}
			}
		}()
		a.do(s, 201, "POST", "/v1/entries?wait=checkpoint", example, auth(s)...)
	}()
	if _, err := s.l.Publish(context.Background()); err != nil {
		t.Fatal(err)
	}
	size := s.l.Size()
	zeros := strings.Repeat("00", 32)
	for _, c := range []struct {
		status int
		path   string
	}{
		{200, "/v1/checkpoint"},
		{200, "/v1/checkpoints/0"},
		{200, fmt.Sprintf("/v1/checkpoints/%d", size)},
		{400, "/v1/checkpoints/x"},
		{404, fmt.Sprintf("/v1/checkpoints/%d", size+1)},
		{200, "/checkpoint"},
		{200, "/v1/entries/0"},
		{400, "/v1/entries/x"},
		{404, "/v1/entries/999"},
		{200, fmt.Sprintf("/v1/export?start=0&end=%d&consistency_from=1", size)},
		{400, "/v1/export?start=0"},
		{200, "/v1/proofs/0"},
		{400, "/v1/proofs/x"},
		{404, "/v1/proofs/999"},
		{200, "/v1/inclusion?index=1"},
		{400, "/v1/inclusion?index=999"},
		{404, "/v1/inclusion?leaf_hash=" + zeros},
		{200, "/v1/consistency?size1=1"},
		{400, "/v1/consistency"},
		{200, "/v1/actions"},
		{200, "/v1/actions/make_payment"},
		{404, "/v1/actions/pay_everyone"},
		{200, "/healthz"},
		{200, "/readyz"},
		{200, "/metrics"},
		{200, fmt.Sprintf("/tile/0/000.p/%d", size)},
		{200, fmt.Sprintf("/tile/entries/000.p/%d", size)},
		{404, "/tile/0/001"},
		{404, "/v1/nothing-here"},
		{405, "/v1/entries"},
	} {
		a.do(s, c.status, "GET", c.path, "")
	}
	a.do(s, 405, "DELETE", "/v1/entries/0", "")

	// A ledger that decides, with the reference policies, and one that
	// does not.
	pol := policyServer(t, referencePolicies)
	decide := payment(t)
	a.do(pol, 201, "POST", "/v1/decide", decide, auth(pol)...)
	a.do(pol, 201, "POST", "/v1/decide", decide, append(auth(pol), "Idempotency-Key", "d-1")...)
	a.do(pol, 200, "POST", "/v1/decide", decide, append(auth(pol), "Idempotency-Key", "d-1")...)
	a.do(pol, 409, "POST", "/v1/decide", strings.Replace(decide, `"agent-1"`, `"agent-2"`, 1), append(auth(pol), "Idempotency-Key", "d-1")...)
	a.do(pol, 400, "POST", "/v1/decide", strings.Replace(decide, `{`, `{"decision":"allow",`, 1), auth(pol)...)
	a.do(pol, 401, "POST", "/v1/decide", decide)
	a.do(pol, 413, "POST", "/v1/decide", decide+strings.Repeat(" ", 300<<10), auth(pol)...)
	a.do(pol, 422, "POST", "/v1/decide", strings.Replace(decide, `"make_payment"`, `"pay_everyone"`, 1), auth(pol)...)
	a.do(s, 404, "POST", "/v1/decide", decide, auth(s)...)
	a.do(pol, 200, "GET", "/v1/entries/0", "") // a publication
	a.do(pol, 200, "GET", "/v1/policies", "")
	a.do(s, 200, "GET", "/v1/policies", "")
	a.do(pol, 200, "GET", "/v1/policies/"+pol.srv.pol.currentDigest(), "")
	a.do(pol, 400, "GET", "/v1/policies/sha256:x", "")
	a.do(pol, 404, "GET", "/v1/policies/sha256:"+zeros, "")

	// A new ledger without a catalog.
	empty := startServer(t)
	a.do(empty, 404, "GET", "/v1/export?start=0&end=0", "")
	a.do(empty, 404, "GET", "/v1/actions", "")

	// Protected reads, without a token.
	protected := startServerWith(t, func(c *config.Config) { c.ReaderTokensSHA256 = []string{strings.Repeat("ab", 32)} })
	for _, rt := range (&server{cfg: protected.cfg, m: newMetrics()}).routeTable() {
		if _, ok := rt.handler.(readGuard); ok {
			method, path := concretePath(rt.pattern)
			a.do(protected, 401, method, path, "")
		}
	}

	// A rate limit.
	limited := startServerWith(t, func(c *config.Config) { c.Mediators[0].RatePerSecond, c.Mediators[0].Burst = 0.001, 1 })
	a.do(limited, 201, "POST", "/v1/entries", appendBody(1), auth(limited)...)
	a.do(limited, 429, "POST", "/v1/entries", appendBody(2), auth(limited)...)
	limitedDecide := startServerWith(t, func(c *config.Config) {
		c.Mediators[0].RatePerSecond, c.Mediators[0].Burst = 0.001, 1
		c.CatalogDir, c.PolicyDir = corpusDir, referencePolicies
	})
	a.do(limitedDecide, 201, "POST", "/v1/decide", decide, auth(limitedDecide)...)
	a.do(limitedDecide, 429, "POST", "/v1/decide", decide, auth(limitedDecide)...)

	// A body that stops coming.
	slow := startServerWith(t, func(c *config.Config) { c.BodyTimeout = "200ms" })
	conn := dialRaw(t, slow.url)
	conn.send(t, partialAppend("Bearer "+slow.token))
	resp, body, err := conn.response(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", slow.url+"/v1/entries", nil)
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Errorf("a partial body: %d %s, want 408", resp.StatusCode, body)
	}
	a.check(req, resp, []byte(body))
	slowDecide := startServerWith(t, func(c *config.Config) {
		c.BodyTimeout, c.CatalogDir, c.PolicyDir = "200ms", corpusDir, referencePolicies
	})
	conn = dialRaw(t, slowDecide.url)
	conn.send(t, partialPost("/v1/decide", "Bearer "+slowDecide.token))
	if resp, body, err = conn.response(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	req, _ = http.NewRequest("POST", slowDecide.url+"/v1/decide", nil)
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Errorf("a partial decide body: %d %s, want 408", resp.StatusCode, body)
	}
	a.check(req, resp, []byte(body))

	// A store that fails.
	store := memory.New()
	broken := startServerOn(t, nil, store)
	for i := range 3 {
		a.do(broken, 201, "POST", "/v1/entries", appendBody(i), auth(broken)...)
	}
	if _, err := broken.l.Publish(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Sizes the log signed no checkpoint for: 0 and 3 have one, 2 none.
	for _, path := range []string{"/v1/export?start=0&end=1&tree_size=2", "/v1/proofs/0?tree_size=2", "/v1/inclusion?index=0&tree_size=2", "/v1/consistency?size1=1&tree_size=2"} {
		a.do(broken, 404, "GET", path, "")
	}
	a.do(broken, 200, "GET", "/v1/export?start=0&end=0&tree_size=3", "")
	a.do(broken, 200, "GET", "/v1/proofs/0?tree_size=3", "")
	a.do(broken, 400, "GET", "/v1/proofs/0?tree_size=4", "")
	store.Close()
	for _, path := range []string{"/v1/checkpoints/3", "/v1/entries/1", "/v1/proofs/1", "/v1/inclusion?index=1", "/v1/consistency?size1=1", "/tile/0/000.p/3"} {
		a.do(broken, 500, "GET", path, "")
	}
	a.do(broken, 503, "POST", "/v1/entries", appendBody(4), auth(broken)...)
	a.do(broken, 503, "GET", "/readyz", "")
	decideStore := memory.New()
	brokenDecide := startServerOn(t, func(c *config.Config) { c.CatalogDir, c.PolicyDir = corpusDir, referencePolicies }, decideStore)
	a.do(brokenDecide, 201, "POST", "/v1/decide", decide, auth(brokenDecide)...)
	decideStore.Close()
	a.do(brokenDecide, 503, "POST", "/v1/decide", decide, auth(brokenDecide)...)

	// A damaged store: the entry an Idempotency-Key names cannot be read.
	for _, c := range []struct {
		path, body string
		change     func(*config.Config)
	}{
		{"/v1/entries", appendBody(0), nil},
		{"/v1/decide", decide, func(c *config.Config) { c.CatalogDir, c.PolicyDir = corpusDir, referencePolicies }},
	} {
		store := &entryLostStore{Store: memory.New()}
		damaged := startServerOn(t, c.change, store)
		retry := append(auth(damaged), "Idempotency-Key", "key-1")
		a.do(damaged, 201, "POST", c.path, c.body, retry...)
		store.lost.Store(true)
		a.do(damaged, 500, "POST", c.path, c.body, retry...)
	}

	// The mediators' approval endpoints (approvals_mediator_test.go).
	openAPIApprovalAnswers(t, a)
	openAPIDecisionOutcomeAnswers(t, a) // outcomes_test.go

	pageAnswers(t, a) // the approver's page (approvals_page_test.go)

	// Every response docs/openapi.json describes was seen.
	paths, _ := d.root["paths"].(map[string]any)
	for path, item := range paths {
		for method, op := range item.(map[string]any) {
			if !slices.Contains(methods, method) {
				continue
			}
			responses, _ := op.(map[string]any)["responses"].(map[string]any)
			for status := range responses {
				key := method + " " + path + " " + status
				if _, excused := notExercised[key]; !a.seen[key] && !excused {
					t.Errorf("docs/openapi.json describes %s, which no answer here exercised", key)
				}
			}
		}
	}
	for _, p := range []string{"/components/responses/NotFound", "/components/responses/MethodNotAllowed"} {
		if !a.seen[p] {
			t.Errorf("%s not exercised", p)
		}
	}
}
