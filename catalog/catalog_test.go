package catalog

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/commit/declare"
)

var corpusDir = filepath.Join("..", "testdata", "declarations")

// The repository's declarations load, each with its file's bytes, its
// digests and its declaration; Declarations lists them by action.
func TestLoad(t *testing.T) {
	c, err := Load(corpusDir)
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(corpusDir, "*.json"))
	if len(c) != len(files) || len(c) == 0 {
		t.Fatalf("%d actions from %d files", len(c), len(files))
	}
	var names []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		d, err := declare.Parse(data)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, d.Action)
		a, ok := c[d.Action]
		if !ok {
			t.Fatalf("%s: action %s not in the catalog", f, d.Action)
		}
		tiers, _ := d.TiersDigest()
		definition, _ := d.Digest()
		if string(a.File()) != string(data) || a.TiersDigest() != tiers || a.DefinitionDigest() != definition || a.Declaration().Action != d.Action {
			t.Errorf("%s: file, digests or declaration differ from the file's", f)
		}
	}
	slices.Sort(names)
	var got []string
	for _, d := range c.Declarations() {
		got = append(got, d.Action)
	}
	if !slices.Equal(got, names) {
		t.Errorf("Declarations() = %q, want %q", got, names)
	}
}

// A catalog that does not load is refused: an empty directory, a
// declaration refused, two files for one action, an unreviewed draft.
func TestLoadRefused(t *testing.T) {
	dir := t.TempDir()
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "no declaration") {
		t.Errorf("empty catalog: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "a.json"), []byte(`{"declaration":1,"action":"a","fields":{"x":{"type":"string","tier":"sometimes"}}}`), 0o644)
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "/fields/x/tier") {
		t.Errorf("bad declaration: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "a.json"), []byte(`{"declaration":1,"action":"a","fields":{"x":{"type":"string","tier":"policy"}}}`), 0o644)
	os.WriteFile(filepath.Join(dir, "b.json"), []byte(`{"declaration":1,"action":"a","fields":{"y":{"type":"string","tier":"policy"}}}`), 0o644)
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "both declare action a") {
		t.Errorf("two files for one action: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "b.json"), []byte(`{"declaration":1,"action":"b","reviewed":false,"fields":{"y":{"type":"string","tier":"policy"}}}`), 0o644)
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "b.json")+": declare: action b: /reviewed: an unreviewed draft") {
		t.Errorf("an unreviewed declaration: %v", err)
	}
}

// A refusal of attributes names the declared field, the projection and the
// rule that failed, every fault in one answer, in one order whatever the
// validator's; a member the client made up is named by its position in
// the request as sent, and no value is repeated. (ledgerd's
// TestCatalogAttributeMessages sends the same through HTTP.)
func TestCheckAttributes(t *testing.T) {
	c, err := Load(corpusDir)
	if err != nil {
		t.Fatal(err)
	}
	request := func(action, attributes string) string {
		return fmt.Sprintf(`{"principal":"agent-1","action":%q,"decision":"allow","policies":[],`+
			`"params_digest":"sha256:%s","params_size":2,"attributes":%s}`,
			action, strings.Repeat("ab", 32), attributes)
	}
	for _, tc := range []struct {
		name, action, attributes, want string
	}{
		{"a projection outside its field", "make_payment", `{"amount_minor":1250000,"currency":"EUR","payee_known":true}`,
			"attribute /payee: required, missing (declared field payee, derived tier, projections payee_known); " +
				"attribute /payee_known: payee_known is a projection of field payee, sent inside it as /payee/payee_known (declared field payee, derived tier, projections payee_known)"},
		{"wrong types and a payload field", "make_payment", `{"memo":"SECRETMEMO","amount_minor":"SECRETAMOUNT","currency":5,"payee":"SECRETPAYEE"}`,
			"attribute /amount_minor: must be an integer (declared field amount_minor, policy tier); " +
				"attribute /currency: must be a string (declared field currency, policy tier); " +
				"attribute /memo: a payload field never crosses; leave it out (declared field memo, payload tier); " +
				"attribute /payee: must be an object holding exactly its projections (declared field payee, derived tier, projections payee_known)"},
		{"made-up members", "make_payment", `{"amount_minor":9007199254740991,"currency":"EUR","payee":{"MADEUPONE":"SECRETVALUE","payee_known":1},"MADEUPTWO":true}`,
			"attribute /payee/payee_known: must be a boolean (declared field payee, projection payee_known); " +
				"a member the declaration does not have, at index 0 of /payee (declared field payee, derived tier, projections payee_known); " +
				"an attribute the declaration does not have, at index 3 of the attributes"},
		{"projection rules", "send_email", `{"body":{"byte_size":-1},"recipient":{},"attachment_hashes":["sha256:9f86",7]}`,
			"attribute /attachment_hashes/1: must be a string (declared field attachment_hashes, policy tier); " +
				"attribute /body/byte_size: must be at least 0 (declared field body, projection byte_size); " +
				"attribute /recipient/recipient_domain: required, missing (declared field recipient, projection recipient_domain)"},
		{"a route not declared", "http_request", `{"method":"GET","url":{"endpoint_host":"example.com","route_shape":"/SECRETROUTE"}}`,
			`attribute /url/route_shape: must be one of the field's declared routes or "unmatched" (declared field url, projection route_shape)`},
		{"not an object", "make_payment", `["SECRETITEM"]`, "the attributes must be a JSON object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, ok := c[tc.action]
			if !ok {
				t.Fatalf("no action %s in %s", tc.action, corpusDir)
			}
			// The attributes reach the check canonical (their members
			// sorted); only the request keeps the order sent.
			canonical, err := commit.Canonicalize([]byte(tc.attributes))
			if err != nil {
				t.Fatal(err)
			}
			err = a.CheckAttributes(canonical, []byte(request(tc.action, tc.attributes)))
			if err == nil || err.Error() != tc.want {
				t.Errorf("got %v\nwant %q", err, tc.want)
			}
			if err != nil && (strings.Contains(err.Error(), "SECRET") || strings.Contains(err.Error(), "MADEUP")) {
				t.Errorf("the refusal repeats a value or a made-up name: %v", err)
			}
		})
	}
}

// Attributes the declaration admits pass; more than 8 faults are cut to 8
// and a count.
func TestCheckAttributesAcceptsAndBounds(t *testing.T) {
	c, err := Load(corpusDir)
	if err != nil {
		t.Fatal(err)
	}
	a := c["make_payment"]
	check := func(attributes string) error {
		canonical, err := commit.Canonicalize([]byte(attributes))
		if err != nil {
			t.Fatal(err)
		}
		return a.CheckAttributes(canonical, []byte(`{"attributes":`+attributes+`}`))
	}
	if err := check(`{"payee":{"payee_known":true},"currency":"EUR","amount_minor":1250000}`); err != nil {
		t.Errorf("declared attributes refused: %v", err)
	}
	var extra []string
	for i := range 12 {
		extra = append(extra, fmt.Sprintf(`"x%02d":1`, i))
	}
	many := `{"amount_minor":1250000,"currency":"EUR","payee":{"payee_known":true},` + strings.Join(extra, ",") + `}`
	if err := check(many); err == nil || strings.Count(err.Error(), "; ") != 8 || !strings.HasSuffix(err.Error(), "; and 4 more") {
		t.Errorf("12 unknown attributes: %v, want 8 faults and \"and 4 more\"", err)
	}
}
