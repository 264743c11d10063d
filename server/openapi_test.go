package server

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/decisionledger/ledger/config"
	"github.com/decisionledger/ledger/internal/apitest"
	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/server/metrics"
	"github.com/decisionledger/ledger/storage/memory"
)

// docs/openapi.json describes ledgerd's HTTP API for tools. These tests
// hold it equal to the route table and check ledgerd's real answers
// against it. It is JSON rather than YAML because the module has no YAML
// library: JSON is valid OpenAPI, and every YAML 1.2 reader reads it.

// Every route is in docs/openapi.json, and everything it describes is a
// route.
func TestOpenAPIRoutes(t *testing.T) {
	d := apitest.LoadOpenAPI(t)
	paths, _ := d.Root["paths"].(map[string]any)
	served := map[string]bool{}
	for _, rt := range (&Server{m: metrics.New()}).routeTable() {
		method, path := apitest.Path(rt.pattern)
		served[method+" "+path] = true
		if op, _ := d.Lookup("/paths/" + apitest.EscapePointer(path) + "/" + method); op == nil {
			t.Errorf("route %s is not in docs/openapi.json (paths[%q].%s)", rt.pattern, path, method)
		}
	}
	for path, item := range paths {
		for method := range item.(map[string]any) {
			if slices.Contains(apitest.Methods, method) && !served[method+" "+path] {
				t.Errorf("docs/openapi.json describes %s %s, which ledgerd does not serve", strings.ToUpper(method), path)
			}
		}
	}
}

// The error codes in docs/openapi.json's Error schema are those the
// handlers answer with (this package's, the approver's page's, and a
// cluster's in package daemon), and docs/api.md lists each.
func TestOpenAPIErrorCodes(t *testing.T) {
	d := apitest.LoadOpenAPI(t)
	errSchema, _ := d.Lookup("/components/schemas/Error/properties/error/properties/code")
	var documented []string
	for _, c := range errSchema["enum"].([]any) {
		documented = append(documented, c.(string))
	}
	files, _ := filepath.Glob("*.go")
	page, _ := filepath.Glob(filepath.Join("approverpage", "*.go"))
	daemon, _ := filepath.Glob(filepath.Join("..", "daemon", "*.go"))
	files = append(append(files, page...), daemon...)
	used := map[string]bool{}
	call := regexp.MustCompile(`(?:WriteError\(w|refuse\(w|pageRefuse\(w, r), [^,]+, "([a-z_]+)"`)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, _ := os.ReadFile(f)
		for _, m := range call.FindAllSubmatch(src, -1) {
			used[string(m[1])] = true
		}
	}
	api, err := os.ReadFile(filepath.Join("..", "docs", "api.md"))
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
	d := apitest.LoadOpenAPI(t)
	mux := http.NewServeMux()
	for _, rt := range (&Server{m: metrics.New()}).routeTable() {
		mux.Handle(rt.pattern, rt.handler)
	}
	a := &apitest.AnswerChecker{T: t, D: d, Mux: mux, Seen: map[string]bool{}}
	auth := func(s *testServer) []string { return []string{"Authorization", "Bearer " + s.token} }

	// A ledger with the repository's catalog, appended to with docs/api.md's example.
	s := startServerWith(t, func(c *config.Config) { c.CatalogDir = apitest.CorpusDir })
	doc, err := os.ReadFile(filepath.Join("..", "docs", "api.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, _ := strings.Cut(string(doc), "## Append")
	_, block, _ := strings.Cut(after, "```json\n")
	example, _, _ := strings.Cut(block, "```")
	a.Do(s.url, 201, "POST", "/v1/entries", example, auth(s)...)
	a.Do(s.url, 201, "POST", "/v1/entries", example, append(auth(s), "Idempotency-Key", "key-1")...)
	a.Do(s.url, 200, "POST", "/v1/entries", example, append(auth(s), "Idempotency-Key", "key-1")...)
	a.Do(s.url, 409, "POST", "/v1/entries", strings.Replace(example, `"needs_approval"`, `"deny"`, 1), append(auth(s), "Idempotency-Key", "key-1")...)
	a.Do(s.url, 400, "POST", "/v1/entries", example[:40], auth(s)...)
	a.Do(s.url, 401, "POST", "/v1/entries", example)
	a.Do(s.url, 413, "POST", "/v1/entries", example+strings.Repeat(" ", 300<<10), auth(s)...)
	a.Do(s.url, 422, "POST", "/v1/entries", strings.Replace(example, `"make_payment"`, `"pay_everyone"`, 1), auth(s)...)
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
		a.Do(s.url, 201, "POST", "/v1/entries?wait=checkpoint", example, auth(s)...)
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
		a.Do(s.url, c.status, "GET", c.path, "")
	}
	a.Do(s.url, 405, "DELETE", "/v1/entries/0", "")

	// A ledger that decides, with the reference policies, and one that
	// does not.
	pol := policyServer(t, apitest.ReferencePolicies)
	decide := apitest.Payment(t)
	a.Do(pol.url, 201, "POST", "/v1/decide", decide, auth(pol)...)
	a.Do(pol.url, 201, "POST", "/v1/decide", decide, append(auth(pol), "Idempotency-Key", "d-1")...)
	a.Do(pol.url, 200, "POST", "/v1/decide", decide, append(auth(pol), "Idempotency-Key", "d-1")...)
	a.Do(pol.url, 409, "POST", "/v1/decide", strings.Replace(decide, `"agent-1"`, `"agent-2"`, 1), append(auth(pol), "Idempotency-Key", "d-1")...)
	a.Do(pol.url, 400, "POST", "/v1/decide", strings.Replace(decide, `{`, `{"decision":"allow",`, 1), auth(pol)...)
	a.Do(pol.url, 401, "POST", "/v1/decide", decide)
	a.Do(pol.url, 413, "POST", "/v1/decide", decide+strings.Repeat(" ", 300<<10), auth(pol)...)
	a.Do(pol.url, 422, "POST", "/v1/decide", strings.Replace(decide, `"make_payment"`, `"pay_everyone"`, 1), auth(pol)...)
	a.Do(s.url, 404, "POST", "/v1/decide", decide, auth(s)...)
	a.Do(pol.url, 200, "GET", "/v1/entries/0", "") // a publication
	a.Do(pol.url, 200, "GET", "/v1/policies", "")
	a.Do(s.url, 200, "GET", "/v1/policies", "")
	a.Do(pol.url, 200, "GET", "/v1/policies/"+pol.srv.pol.CurrentDigest(), "")
	a.Do(pol.url, 400, "GET", "/v1/policies/sha256:x", "")
	a.Do(pol.url, 404, "GET", "/v1/policies/sha256:"+zeros, "")

	// A new ledger without a catalog.
	empty := startServer(t)
	a.Do(empty.url, 404, "GET", "/v1/export?start=0&end=0", "")
	a.Do(empty.url, 404, "GET", "/v1/actions", "")

	// Protected reads, without a token.
	protected := startServerWith(t, func(c *config.Config) { c.ReaderTokensSHA256 = []string{strings.Repeat("ab", 32)} })
	for _, rt := range (&Server{tilesPrefix: protected.cfg.TilesPrefix, m: metrics.New()}).routeTable() {
		if _, ok := rt.handler.(readGuard); ok {
			method, path := concretePath(rt.pattern)
			a.Do(protected.url, 401, method, path, "")
		}
	}

	// A rate limit.
	limited := startServerWith(t, func(c *config.Config) { c.Mediators[0].RatePerSecond, c.Mediators[0].Burst = 0.001, 1 })
	a.Do(limited.url, 201, "POST", "/v1/entries", apitest.AppendBody(1), auth(limited)...)
	a.Do(limited.url, 429, "POST", "/v1/entries", apitest.AppendBody(2), auth(limited)...)
	limitedDecide := startServerWith(t, func(c *config.Config) {
		c.Mediators[0].RatePerSecond, c.Mediators[0].Burst = 0.001, 1
		c.CatalogDir, c.PolicyDir = apitest.CorpusDir, apitest.ReferencePolicies
	})
	a.Do(limitedDecide.url, 201, "POST", "/v1/decide", decide, auth(limitedDecide)...)
	a.Do(limitedDecide.url, 429, "POST", "/v1/decide", decide, auth(limitedDecide)...)

	// A body that stops coming.
	slow := startServerWith(t, func(c *config.Config) { c.BodyTimeout = "200ms" })
	conn := dialRaw(t, slow.url)
	conn.send(t, apitest.PartialAppend("Bearer "+slow.token))
	resp, body, err := conn.response(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", slow.url+"/v1/entries", nil)
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Errorf("a partial body: %d %s, want 408", resp.StatusCode, body)
	}
	a.Check(req, resp, []byte(body))
	slowDecide := startServerWith(t, func(c *config.Config) {
		c.BodyTimeout, c.CatalogDir, c.PolicyDir = "200ms", apitest.CorpusDir, apitest.ReferencePolicies
	})
	conn = dialRaw(t, slowDecide.url)
	conn.send(t, apitest.PartialPost("/v1/decide", "Bearer "+slowDecide.token))
	if resp, body, err = conn.response(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	req, _ = http.NewRequest("POST", slowDecide.url+"/v1/decide", nil)
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Errorf("a partial decide body: %d %s, want 408", resp.StatusCode, body)
	}
	a.Check(req, resp, []byte(body))

	// A store that fails.
	store := memory.New()
	broken := startServerOn(t, nil, store)
	for i := range 3 {
		a.Do(broken.url, 201, "POST", "/v1/entries", apitest.AppendBody(i), auth(broken)...)
	}
	if _, err := broken.l.Publish(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Sizes the log signed no checkpoint for: 0 and 3 have one, 2 none.
	for _, path := range []string{"/v1/export?start=0&end=1&tree_size=2", "/v1/proofs/0?tree_size=2", "/v1/inclusion?index=0&tree_size=2", "/v1/consistency?size1=1&tree_size=2"} {
		a.Do(broken.url, 404, "GET", path, "")
	}
	a.Do(broken.url, 200, "GET", "/v1/export?start=0&end=0&tree_size=3", "")
	a.Do(broken.url, 200, "GET", "/v1/proofs/0?tree_size=3", "")
	a.Do(broken.url, 400, "GET", "/v1/proofs/0?tree_size=4", "")
	store.Close()
	for _, path := range []string{"/v1/checkpoints/3", "/v1/entries/1", "/v1/proofs/1", "/v1/inclusion?index=1", "/v1/consistency?size1=1", "/tile/0/000.p/3"} {
		a.Do(broken.url, 500, "GET", path, "")
	}
	a.Do(broken.url, 503, "POST", "/v1/entries", apitest.AppendBody(4), auth(broken)...)
	a.Do(broken.url, 503, "GET", "/readyz", "")
	decideStore := memory.New()
	brokenDecide := startServerOn(t, func(c *config.Config) { c.CatalogDir, c.PolicyDir = apitest.CorpusDir, apitest.ReferencePolicies }, decideStore)
	a.Do(brokenDecide.url, 201, "POST", "/v1/decide", decide, auth(brokenDecide)...)
	decideStore.Close()
	a.Do(brokenDecide.url, 503, "POST", "/v1/decide", decide, auth(brokenDecide)...)

	// A damaged store: the entry an Idempotency-Key names cannot be read.
	for _, c := range []struct {
		path, body string
		change     func(*config.Config)
	}{
		{"/v1/entries", apitest.AppendBody(0), nil},
		{"/v1/decide", decide, func(c *config.Config) { c.CatalogDir, c.PolicyDir = apitest.CorpusDir, apitest.ReferencePolicies }},
	} {
		store := &entryLostStore{Store: memory.New()}
		damaged := startServerOn(t, c.change, store)
		retry := append(auth(damaged), "Idempotency-Key", "key-1")
		a.Do(damaged.url, 201, "POST", c.path, c.body, retry...)
		store.lost.Store(true)
		a.Do(damaged.url, 500, "POST", c.path, c.body, retry...)
	}

	// The mediators' approval endpoints (approvals_mediator_test.go).
	openAPIApprovalAnswers(t, a)
	openAPIDecisionOutcomeAnswers(t, a) // outcomes_test.go

	pageAnswers(t, a) // the approver's page (approvals_page_test.go)

	// Every response docs/openapi.json describes was seen.
	paths, _ := d.Root["paths"].(map[string]any)
	for path, item := range paths {
		for method, op := range item.(map[string]any) {
			if !slices.Contains(apitest.Methods, method) {
				continue
			}
			responses, _ := op.(map[string]any)["responses"].(map[string]any)
			for status := range responses {
				key := method + " " + path + " " + status
				if _, excused := notExercised[key]; !a.Seen[key] && !excused {
					t.Errorf("docs/openapi.json describes %s, which no answer here exercised", key)
				}
			}
		}
	}
	for _, p := range []string{"/components/responses/NotFound", "/components/responses/MethodNotAllowed"} {
		if !a.Seen[p] {
			t.Errorf("%s not exercised", p)
		}
	}
}
