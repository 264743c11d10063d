package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/decisionledger/ledger/commit/declare"
	"github.com/decisionledger/ledger/config"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/internal/apitest"
)

func loadDeclaration(t *testing.T, action string) (*declare.Declaration, []byte) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(apitest.CorpusDir, action+".json"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := declare.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	return d, data
}

// With a catalog, ledgerd appends only declared actions with their
// declared attributes and applied-tiers digest, records the definition
// digest in a version 2 entry, and refuses the rest with typed errors,
// counted, appending nothing and repeating no value.
func TestCatalog(t *testing.T) {
	logs := &apitest.LockedBuffer{}
	testLogs = logs
	defer func() { testLogs = nil }()
	s := startServerWith(t, func(c *config.Config) { c.CatalogDir = apitest.CorpusDir })
	d, file := loadDeclaration(t, "send_email")
	const params = `{"recipient":"Bob.Smith@Example.ORG","subject":"Invoice QUARTERLYSECRET","body":"Hello BODYSECRET","attachment_hashes":[]}`
	res, err := d.Minimize([]byte(params), declare.Options{})
	if err != nil {
		t.Fatal(err)
	}
	definition, _ := d.Digest()

	resp, body := s.post(t, s.token, apitest.AppendRequestBody("send_email", res, ""))
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
		{"undeclared action", strings.Replace(apitest.AppendRequestBody("send_email", res, ""), `"send_email"`, `"delete_everything"`, 1), "unknown_action"},
		{"a payload field", apitest.AppendRequestBody("send_email", res, strings.Replace(string(res.Attributes), `}}`, `},"subject":"Invoice QUARTERLYSECRET"}`, 1)), "attributes_not_declared"},
		{"a raw derived value", apitest.AppendRequestBody("send_email", res, raw), "attributes_not_declared"},
		{"an extra projection", apitest.AppendRequestBody("send_email", res, strings.Replace(string(res.Attributes), `"example.org"`, `"example.org","local_part":"bob.smith"`, 1)), "attributes_not_declared"},
		{"an unknown attribute", apitest.AppendRequestBody("send_email", res, strings.Replace(string(res.Attributes), `{"att`, `{"LEAKYNAME":"x","att`, 1)), "attributes_not_declared"},
		{"another tier table", strings.Replace(apitest.AppendRequestBody("send_email", res, ""), res.Tiers.String(), "sha256:"+strings.Repeat("ab", 32), 1), "tiers_mismatch"},
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
	metrics := apitest.Get(t, s.url+"/metrics")
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
	if got := apitest.Get(t, s.url+"/v1/actions/send_email"); got != string(file) {
		t.Errorf("GET /v1/actions/send_email differs from the file")
	}
	if list := apitest.Get(t, s.url+"/v1/actions"); !strings.Contains(list, `"action":"send_email","tiers_digest":"`+res.Tiers.String()+`","definition_digest":"`+definition.String()+`"`) {
		t.Errorf("GET /v1/actions = %s", list)
	}
}

// A refusal of attributes names the declared field, the projection and the
// rule that failed, every fault in one answer, in one order whatever the
// validator's; a member the client made up is named by its position, and
// no value is repeated.
func TestCatalogAttributeMessages(t *testing.T) {
	s := startServerWith(t, func(c *config.Config) { c.CatalogDir = apitest.CorpusDir })
	body := func(action, attributes string) string {
		d, _ := loadDeclaration(t, action)
		tiers, err := d.TiersDigest()
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf(`{"principal":"agent-1","action":%q,"decision":"allow","policies":[],`+
			`"params_digest":"sha256:%s","params_size":2,"tiers_digest":"%s","attributes":%s}`,
			action, strings.Repeat("ab", 32), tiers, attributes)
	}
	for _, c := range []struct {
		name, action, attributes, want string
	}{
		{"a projection outside its field", "make_payment", `{"amount_minor":1250000,"currency":"EUR","payee_known":true}`,
			"attributes of make_payment: attribute /payee: required, missing (declared field payee, derived tier, projections payee_known); " +
				"attribute /payee_known: payee_known is a projection of field payee, sent inside it as /payee/payee_known (declared field payee, derived tier, projections payee_known)"},
		{"wrong types and a payload field", "make_payment", `{"memo":"SECRETMEMO","amount_minor":"SECRETAMOUNT","currency":5,"payee":"SECRETPAYEE"}`,
			"attributes of make_payment: attribute /amount_minor: must be an integer (declared field amount_minor, policy tier); " +
				"attribute /currency: must be a string (declared field currency, policy tier); " +
				"attribute /memo: a payload field never crosses; leave it out (declared field memo, payload tier); " +
				"attribute /payee: must be an object holding exactly its projections (declared field payee, derived tier, projections payee_known)"},
		{"made-up members", "make_payment", `{"amount_minor":9007199254740991,"currency":"EUR","payee":{"MADEUPONE":"SECRETVALUE","payee_known":1},"MADEUPTWO":true}`,
			"attributes of make_payment: attribute /payee/payee_known: must be a boolean (declared field payee, projection payee_known); " +
				"a member the declaration does not have, at index 0 of /payee (declared field payee, derived tier, projections payee_known); " +
				"an attribute the declaration does not have, at index 3 of the attributes"},
		{"projection rules", "send_email", `{"body":{"byte_size":-1},"recipient":{},"attachment_hashes":["sha256:9f86",7]}`,
			"attributes of send_email: attribute /attachment_hashes/1: must be a string (declared field attachment_hashes, policy tier); " +
				"attribute /body/byte_size: must be at least 0 (declared field body, projection byte_size); " +
				"attribute /recipient/recipient_domain: required, missing (declared field recipient, projection recipient_domain)"},
		{"a route not declared", "http_request", `{"method":"GET","url":{"endpoint_host":"example.com","route_shape":"/SECRETROUTE"}}`,
			`attributes of http_request: attribute /url/route_shape: must be one of the field's declared routes or "unmatched" (declared field url, projection route_shape)`},
		{"not an object", "make_payment", `["SECRETITEM"]`, "attributes of make_payment: the attributes must be a JSON object"},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, b := s.post(t, s.token, body(c.action, c.attributes))
			var e struct{ Error apiError }
			json.Unmarshal(b, &e)
			if resp.StatusCode != http.StatusUnprocessableEntity || e.Error.Code != "attributes_not_declared" || e.Error.Message != c.want {
				t.Errorf("got %d %s\nwant 422 attributes_not_declared %q", resp.StatusCode, b, c.want)
			}
			if strings.Contains(string(b), "SECRET") || strings.Contains(string(b), "MADEUP") {
				t.Errorf("the refusal repeats a value or a made-up name: %s", b)
			}
		})
	}
}

// The append example of docs/api.md is accepted by the repository's
// make_payment declaration, when ledgerd runs with that catalog.
func TestAPIExampleAppendWithCatalog(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "api.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, _ := strings.Cut(string(doc), "## Append")
	_, block, _ := strings.Cut(after, "```json\n")
	example, _, found := strings.Cut(block, "```")
	if !found {
		t.Fatal("docs/api.md has no append example")
	}
	s := startServerWith(t, func(c *config.Config) { c.CatalogDir = apitest.CorpusDir })
	if resp, b := s.post(t, s.token, example); resp.StatusCode != http.StatusCreated {
		t.Errorf("docs/api.md's append example: %d %s", resp.StatusCode, b)
	}
}
