package declare

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The reference corpus: the declarations in testdata/declarations and, for
// each, one call. Every expected value below is a literal written by hand;
// the digests were computed outside Go, with
//
//	printf 'ledger/v1/tiers\n%s' "$TABLE" | sha256sum
//	printf 'ledger/v1/params\n%s' "$PARAMS" | sha256sum
//
// over the literal table and the call's parameters (written in canonical
// form here), so a bug in the generator, the canonical writer or the digest
// fails the test instead of being copied into it.
var corpus = []struct {
	action       string
	table        string // canonical tier table
	tiersDigest  string
	params       string // the call, canonical
	paramsDigest string
	paramsSize   int
	attributes   string // the minimized attributes, canonical
}{
	{
		action:       "send_email",
		table:        `{"action":"send_email","fields":[{"name":"attachment_hashes","projections":[],"tier":"policy"},{"name":"body","projections":["byte_size"],"tier":"derived"},{"name":"recipient","projections":["recipient_domain"],"tier":"derived"},{"name":"subject","projections":[],"tier":"payload"}]}`,
		tiersDigest:  "sha256:18824ccc509c09ce6759b05c85686d44b4a45bf16240fabda33221d05fcf3e98",
		params:       `{"attachment_hashes":["sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"],"body":"Hello Bob, the invoice is attached.","recipient":"Bob.Smith@Example.ORG","subject":"Invoice 4711 for March"}`,
		paramsDigest: "sha256:e3dd1acbd9f73cc6e2fa2a2cbabc9a6228e9c42b70f46f3cd0a99b85388e24ee",
		paramsSize:   213,
		attributes:   `{"attachment_hashes":["sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"],"body":{"byte_size":35},"recipient":{"recipient_domain":"example.org"}}`,
	},
	{
		action:       "make_payment",
		table:        `{"action":"make_payment","fields":[{"name":"amount_minor","projections":[],"tier":"policy"},{"name":"currency","projections":[],"tier":"policy"},{"name":"memo","projections":[],"tier":"payload"},{"name":"payee","projections":["payee_known"],"tier":"derived"}]}`,
		tiersDigest:  "sha256:6f294a5bf29ccd98b4131a675345d1ebbf587c719e1fdb0d9ac8300a8a458589",
		params:       `{"amount_minor":125000,"currency":"EUR","memo":"Thanks for the quick delivery","payee":"DE89370400440532013000"}`,
		paramsDigest: "sha256:b933a36d66261508102fe7c6cb74b128f7a685aacbf30c91ae372b971f0bbe15",
		paramsSize:   112,
		attributes:   `{"amount_minor":125000,"currency":"EUR","payee":{"payee_known":true}}`,
	},
	{
		action:       "http_request",
		table:        `{"action":"http_request","fields":[{"name":"body","projections":["byte_size"],"tier":"derived"},{"name":"method","projections":[],"tier":"policy"},{"name":"url","projections":["endpoint_host","route_shape"],"tier":"derived"}]}`,
		tiersDigest:  "sha256:74f5d937950ac41a6ddc6fa4143153a0780e9b2bd547c4ed8523d36c35394f22",
		params:       `{"body":"{\"status\":\"paid\"}","method":"POST","url":"https://api.example.com/v1/invoices/inv-88231?token=abc"}`,
		paramsDigest: "sha256:ef3111545b4e5b3459e01fe2c400f9ea67de69c57ff93aa9591b550a19acddce",
		paramsSize:   112,
		attributes:   `{"body":{"byte_size":17},"method":"POST","url":{"endpoint_host":"api.example.com","route_shape":"/v1/invoices/{id}"}}`,
	},
	{
		action:       "read_record",
		table:        `{"action":"read_record","fields":[{"name":"purpose","projections":[],"tier":"policy"},{"name":"resource_path","projections":["resource_dir"],"tier":"derived"}]}`,
		tiersDigest:  "sha256:b63b6ffd8e6a585e88102a640901ebadd0fed95fa4ddd3ede04b186da1caa81a",
		params:       `{"purpose":"treatment","resource_path":"/records/2026/11/patient-4711.json"}`,
		paramsDigest: "sha256:b0af0dcebd04f8212da3e7b588f3eabf6429337e71806b629b04601aee55f9c0",
		paramsSize:   76,
		attributes:   `{"purpose":"treatment","resource_path":{"resource_dir":"/records/2026/11"}}`,
	},
	{
		action:       "upload_file",
		table:        `{"action":"upload_file","fields":[{"name":"content","projections":[],"tier":"payload"},{"name":"content_type","projections":[],"tier":"policy"},{"name":"destination_url","projections":["endpoint_host"],"tier":"derived"},{"name":"labels","projections":["count"],"tier":"derived"},{"name":"local_path","projections":["resource_dir"],"tier":"derived"},{"name":"size_bytes","projections":[],"tier":"policy"}]}`,
		tiersDigest:  "sha256:846a83d0c30f6b26533a7697d0e4d4e2d41017c5d434855521afa7440d499074",
		params:       `{"content":"aGVsbG8gd29ybGQ=","content_type":"text/plain","destination_url":"https://files.example.net/upload","local_path":"/home/agent/reports/q3-summary.txt","size_bytes":11}`,
		paramsDigest: "sha256:2bd0b3fc6e19d0ede32af6774d09501ed6188e6ae370b96cda0435758182eae8",
		paramsSize:   177,
		attributes:   `{"content_type":"text/plain","destination_url":{"endpoint_host":"files.example.net"},"local_path":{"resource_dir":"/home/agent/reports"},"size_bytes":11}`,
	},
}

// corpusAllowlists are the workload's lists for the corpus calls.
var corpusAllowlists = map[string]map[string]bool{"payees": {"DE89370400440532013000": true}}

func loadCorpus(t testing.TB, action string) *Declaration {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "declarations", action+".json"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestCorpus(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "testdata", "declarations", "*.json"))
	if err != nil || len(files) != len(corpus) {
		t.Fatalf("%d declaration files, %d corpus cases (%v): every declaration needs its case", len(files), len(corpus), err)
	}
	fields, payloads := 0, 0
	for _, c := range corpus {
		t.Run(c.action, func(t *testing.T) {
			d := loadCorpus(t, c.action)
			fields += len(d.Fields)
			for _, f := range d.Fields {
				if f.Tier == "payload" {
					payloads++
				}
			}
			table, err := d.TierTable().Canonical()
			if err != nil || string(table) != c.table {
				t.Errorf("tier table = %s, %v\nwant %s", table, err, c.table)
			}
			if got, err := d.TiersDigest(); err != nil || got.String() != c.tiersDigest {
				t.Errorf("tiers digest = %v, %v; want %s", got, err, c.tiersDigest)
			}
			// The same call pretty-printed, members in another order.
			for _, params := range []string{c.params, respell(c.params)} {
				res, err := d.Minimize([]byte(params), Options{Allowlists: corpusAllowlists})
				if err != nil {
					t.Fatal(err)
				}
				if string(res.Attributes) != c.attributes {
					t.Errorf("attributes = %s\nwant %s", res.Attributes, c.attributes)
				}
				if res.Params.Digest.String() != c.paramsDigest || res.Params.Size != c.paramsSize {
					t.Errorf("params = %v %d; want %s %d", res.Params.Digest, res.Params.Size, c.paramsDigest, c.paramsSize)
				}
				if res.Tiers.String() != c.tiersDigest {
					t.Errorf("result tiers = %v; want %s", res.Tiers, c.tiersDigest)
				}
			}
		})
	}
	if fields < 19 || payloads < 2 {
		t.Errorf("the corpus declares %d fields and %d payload fields; it needs at least 19 and 2", fields, payloads)
	}
}

// respell writes a canonical object's top-level members in reverse order
// with whitespace: the same parameters to the digest.
func respell(canonical string) string {
	body := strings.TrimSuffix(strings.TrimPrefix(canonical, "{"), "}")
	var members []string
	depth, inString, escaped, start := 0, false, false, 0
	for i, r := range body {
		switch {
		case escaped:
			escaped = false
		case r == '\\':
			escaped = true
		case r == '"':
			inString = !inString
		case inString:
		case r == '{' || r == '[':
			depth++
		case r == '}' || r == ']':
			depth--
		case r == ',' && depth == 0:
			members = append(members, body[start:i])
			start = i + 1
		}
	}
	members = append(members, body[start:])
	for i, j := 0, len(members)-1; i < j; i, j = i+1, j-1 {
		members[i], members[j] = members[j], members[i]
	}
	return "{\n  " + strings.Join(members, ",\n  ") + "\n}\n"
}
