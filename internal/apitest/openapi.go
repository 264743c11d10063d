package apitest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// docs/openapi.json is checked as OpenAPI 3.1 with a JSON Schema
// library: JSON is valid OpenAPI, and every YAML 1.2 reader reads it.

const openAPIURL = "urn:ledgerd:openapi"

// OpenAPI is docs/openapi.json, read for a test.
type OpenAPI struct {
	T       testing.TB
	Root    map[string]any
	c       *jsonschema.Compiler
	schemas map[string]*jsonschema.Schema // by JSON pointer
}

// LoadOpenAPI reads the repository's docs/openapi.json.
func LoadOpenAPI(t testing.TB) *OpenAPI {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(Root(), "docs", "openapi.json"))
	if err != nil {
		t.Fatal(err)
	}
	d := &OpenAPI{T: t, schemas: map[string]*jsonschema.Schema{}}
	if err := json.Unmarshal(data, &d.Root); err != nil {
		t.Fatalf("docs/openapi.json: %v", err)
	}
	if d.Root["openapi"] != "3.1.0" {
		t.Fatalf("docs/openapi.json: openapi %v, want 3.1.0", d.Root["openapi"])
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

// EscapePointer escapes a JSON pointer token (RFC 6901).
func EscapePointer(token string) string {
	return strings.ReplaceAll(strings.ReplaceAll(token, "~", "~0"), "/", "~1")
}

// Lookup returns the object at pointer, following a $ref it holds, and
// the pointer it was found at.
func (d *OpenAPI) Lookup(pointer string) (map[string]any, string) {
	var v any = d.Root
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
		return d.Lookup(strings.TrimPrefix(ref, "#"))
	}
	return m, pointer
}

// Schema is the schema at pointer, compiled.
func (d *OpenAPI) Schema(pointer string) *jsonschema.Schema {
	if s, ok := d.schemas[pointer]; ok {
		return s
	}
	s, err := d.c.Compile(openAPIURL + "#" + pointer)
	if err != nil {
		d.T.Fatalf("docs/openapi.json: the schema at %s does not compile: %v", pointer, err)
	}
	d.schemas[pointer] = s
	return s
}

// Methods are the operations of an OpenAPI path item.
var Methods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// Path is the OpenAPI path of a ServeMux pattern's path: {path...}
// becomes {path}, since OpenAPI has no parameter spanning segments, and
// the end anchor {$} (GET /approvals/{$}) is dropped.
func Path(pattern string) (method, path string) {
	method, path, _ = strings.Cut(pattern, " ")
	return strings.ToLower(method), strings.NewReplacer("...}", "}", "{$}", "").Replace(path)
}

// AnswerChecker checks answers against docs/openapi.json and records
// which of its responses were seen.
type AnswerChecker struct {
	T    testing.TB
	D    *OpenAPI
	Mux  *http.ServeMux // the route table's patterns
	Seen map[string]bool
}

// NewAnswerChecker checks answers against d, their routes the patterns
// of the server's route table (server.RoutePatterns).
func NewAnswerChecker(t testing.TB, d *OpenAPI, patterns []string) *AnswerChecker {
	mux := http.NewServeMux()
	for _, p := range patterns {
		mux.Handle(p, http.NotFoundHandler())
	}
	return &AnswerChecker{T: t, D: d, Mux: mux, Seen: map[string]bool{}}
}

// Check checks resp (body already read) to req against the response
// docs/openapi.json gives for its route and status; a request no route
// serves against components/responses (NotFound, MethodNotAllowed).
func (a *AnswerChecker) Check(req *http.Request, resp *http.Response, body []byte) {
	t := a.T
	t.Helper()
	name := req.Method + " " + req.URL.RequestURI()
	var pointer, key string
	if _, pattern := a.Mux.Handler(req); pattern != "" {
		method, path := Path(pattern)
		key = fmt.Sprintf("%s %s %d", method, path, resp.StatusCode)
		pointer = fmt.Sprintf("/paths/%s/%s/responses/%d", EscapePointer(path), method, resp.StatusCode)
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
	spec, at := a.D.Lookup(pointer)
	if spec == nil {
		t.Errorf("%s: answered %d, which docs/openapi.json does not describe (%s): %s", name, resp.StatusCode, pointer, body)
		return
	}
	a.Seen[key] = true
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
	if err := a.D.Schema(at + "/content/" + EscapePointer(mediaType) + "/schema").Validate(v); err != nil {
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

// Do sends a request to the server at base and checks the answer, which
// must have status want.
func (a *AnswerChecker) Do(base string, want int, method, path, body string, header ...string) *http.Response {
	a.T.Helper()
	req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
	if method == "GET" {
		req.Body, req.ContentLength = nil, 0
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.T.Fatalf("%s %s: %v", method, path, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != want {
		a.T.Errorf("%s %s: %d %s, want %d", method, path, resp.StatusCode, b, want)
	}
	a.Check(req, resp, b)
	return resp
}
