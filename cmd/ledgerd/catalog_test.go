package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/decisionledger/ledger/commit/declare"
	"github.com/decisionledger/ledger/entry"
)

var corpusDir = filepath.Join("..", "..", "testdata", "declarations")

func loadDeclaration(t *testing.T, action string) (*declare.Declaration, []byte) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(corpusDir, action+".json"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := declare.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	return d, data
}

// syncBuffer is a log sink safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func appendRequestBody(action string, res declare.Result, attributes string) string {
	if attributes == "" {
		attributes = string(res.Attributes)
	}
	return fmt.Sprintf(`{"principal":"agent-1","action":%q,"decision":"allow","policies":["p.one"],`+
		`"params_digest":"%s","params_size":%d,"tiers_digest":"%s","attributes":%s}`,
		action, res.Params.Digest, res.Params.Size, res.Tiers, attributes)
}

// With a catalog, ledgerd appends only declared actions with their
// declared attributes and applied-tiers digest, records the definition
// digest in a version 2 entry, and refuses the rest with typed errors,
// counted, appending nothing and repeating no value.
func TestCatalog(t *testing.T) {
	logs := &syncBuffer{}
	testLogs = logs
	defer func() { testLogs = nil }()
	s := startServerWith(t, func(c *Config) { c.CatalogDir = corpusDir })
	d, file := loadDeclaration(t, "send_email")
	const params = `{"recipient":"Bob.Smith@Example.ORG","subject":"Invoice QUARTERLYSECRET","body":"Hello BODYSECRET","attachment_hashes":[]}`
	res, err := d.Minimize([]byte(params), declare.Options{})
	if err != nil {
		t.Fatal(err)
	}
	definition, _ := d.Digest()

	resp, body := s.post(t, s.token, appendRequestBody("send_email", res, ""))
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("declared append: %d %s", resp.StatusCode, body)
	}
	var receipt struct {
		Entry json.RawMessage `json:"entry"`
	}
	if err := json.Unmarshal(body, &receipt); err != nil {
		t.Fatal(err)
	}
	e, err := entry.Parse(receipt.Entry)
	if err != nil {
		t.Fatal(err)
	}
	if e.Version() != entry.Version2 || e.Definition != definition || e.Tiers != res.Tiers {
		t.Errorf("entry version %d, definition %v, tiers %v; want 2, %v, %v", e.Version(), e.Definition, e.Tiers, definition, res.Tiers)
	}

	raw := strings.Replace(string(res.Attributes), `{"recipient_domain":"example.org"}`, `"bob.smith@example.org"`, 1)
	for _, c := range []struct {
		name, body, code string
	}{
		{"undeclared action", strings.Replace(appendRequestBody("send_email", res, ""), `"send_email"`, `"delete_everything"`, 1), "unknown_action"},
		{"a payload field", appendRequestBody("send_email", res, strings.Replace(string(res.Attributes), `}}`, `},"subject":"Invoice QUARTERLYSECRET"}`, 1)), "attributes_not_declared"},
		{"a raw derived value", appendRequestBody("send_email", res, raw), "attributes_not_declared"},
		{"an extra projection", appendRequestBody("send_email", res, strings.Replace(string(res.Attributes), `"example.org"`, `"example.org","local_part":"bob.smith"`, 1)), "attributes_not_declared"},
		{"an unknown attribute", appendRequestBody("send_email", res, strings.Replace(string(res.Attributes), `{"att`, `{"LEAKYNAME":"x","att`, 1)), "attributes_not_declared"},
		{"another tier table", strings.Replace(appendRequestBody("send_email", res, ""), res.Tiers.String(), "sha256:"+strings.Repeat("ab", 32), 1), "tiers_mismatch"},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, body := s.post(t, s.token, c.body)
			if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(string(body), `"code":"`+c.code+`"`) {
				t.Fatalf("got %d %s; want 422 %s", resp.StatusCode, body, c.code)
			}
			for _, secret := range []string{"bob.smith", "QUARTERLYSECRET", "LEAKYNAME", "delete_everything"} {
				if strings.Contains(string(body), secret) {
					t.Errorf("the refusal repeats %q: %s", secret, body)
				}
			}
		})
	}
	if size := s.l.Size(); size != 1 {
		t.Errorf("size %d after the refusals, want 1", size)
	}
	metrics := get(t, s.url+"/metrics")
	for _, want := range []string{`ledgerd_rejects_total{code="tiers_mismatch"} 1`, `ledgerd_rejects_total{code="attributes_not_declared"} 4`, `ledgerd_rejects_total{code="unknown_action"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	for _, secret := range []string{"bob.smith", "Bob.Smith", "QUARTERLYSECRET", "BODYSECRET", "LEAKYNAME"} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the logs hold %q", secret)
		}
	}

	// The catalog is public to readers, byte for byte.
	if got := get(t, s.url+"/v1/actions/send_email"); got != string(file) {
		t.Errorf("GET /v1/actions/send_email differs from the file")
	}
	if list := get(t, s.url+"/v1/actions"); !strings.Contains(list, `"action":"send_email","tiers_digest":"`+res.Tiers.String()+`","definition_digest":"`+definition.String()+`"`) {
		t.Errorf("GET /v1/actions = %s", list)
	}
}

// A config naming a catalog that does not load is refused at start.
func TestCatalogRefused(t *testing.T) {
	dir := t.TempDir()
	if _, err := loadCatalog(dir); err == nil || !strings.Contains(err.Error(), "no declaration") {
		t.Errorf("empty catalog: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "a.json"), []byte(`{"declaration":1,"action":"a","fields":{"x":{"type":"string","tier":"sometimes"}}}`), 0o644)
	if _, err := loadCatalog(dir); err == nil || !strings.Contains(err.Error(), "/fields/x/tier") {
		t.Errorf("bad declaration: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "a.json"), []byte(`{"declaration":1,"action":"a","fields":{"x":{"type":"string","tier":"policy"}}}`), 0o644)
	os.WriteFile(filepath.Join(dir, "b.json"), []byte(`{"declaration":1,"action":"a","fields":{"y":{"type":"string","tier":"policy"}}}`), 0o644)
	if _, err := loadCatalog(dir); err == nil || !strings.Contains(err.Error(), "both declare action a") {
		t.Errorf("two files for one action: %v", err)
	}
}
