package conformance

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/decisionledger/ledger/approval/preview"
)

// previewCase is one case of preview.json.
type previewCase struct {
	Name     string        `json:"name"`
	Note     string        `json:"note,omitempty"`
	Document []byte        `json:"document_base64"`
	Expect   previewExpect `json:"expect"`
}

type previewExpect struct {
	Preview   []byte   `json:"preview_base64,omitempty"`
	Digest    string   `json:"digest,omitempty"`
	Truncated *bool    `json:"truncated,omitempty"`
	Pass      int      `json:"pass,omitempty"`
	Redacted  *int     `json:"redacted,omitempty"`
	Refusal   *refusal `json:"refusal,omitempty"`
}

// previewSource is a case as written by hand: want is the refusal code,
// or "" when the document is rendered; then pass and truncated are what
// it must give, and preview, when set, the exact preview.
type previewSource struct {
	name, note    string
	doc           string
	want, pointer string
	key           bool
	preview       string
	pass          int
	truncated     bool
}

func previewResult(t *testing.T, doc []byte) previewExpect {
	t.Helper()
	p, err := preview.Render(doc)
	if err != nil {
		var ie *preview.InputError
		if !errors.As(err, &ie) {
			t.Fatalf("Render returned %v, not an *InputError", err)
		}
		return previewExpect{Refusal: &refusal{Code: string(ie.Kind), Pointer: ie.Pointer, Key: ie.Key}}
	}
	return previewExpect{Preview: p.JSON, Digest: p.Digest.String(), Truncated: &p.Truncated, Pass: p.Pass, Redacted: &p.Redacted}
}

func TestPreviewCorpus(t *testing.T) {
	var names []string
	var cases []any
	refused := 0
	for _, s := range previewSources(t) {
		c := previewCase{Name: s.name, Note: s.note, Document: []byte(s.doc)}
		c.Expect = previewResult(t, c.Document)
		switch e := c.Expect; {
		case e.Refusal != nil:
			refused++
			if e.Refusal.Code != s.want || e.Refusal.Pointer != s.pointer || e.Refusal.Key != s.key {
				t.Errorf("%s: Go refuses with %s at %q (key %v), the case says %q at %q (key %v)", s.name, e.Refusal.Code, e.Refusal.Pointer, e.Refusal.Key, s.want, s.pointer, s.key)
			}
		case s.want != "":
			t.Errorf("%s: Go renders it, the case says %s", s.name, s.want)
		case e.Pass != s.pass || *e.Truncated != s.truncated || s.preview != "" && string(e.Preview) != s.preview:
			t.Errorf("%s: pass %d truncated %v preview %.300s; the case says pass %d truncated %v preview %.300s",
				s.name, e.Pass, *e.Truncated, e.Preview, s.pass, s.truncated, s.preview)
		}
		names = append(names, s.name)
		cases = append(cases, c)
	}
	if len(cases) < 25 || refused < 5 {
		t.Errorf("preview corpus too small: %d cases, %d refused", len(cases), refused)
	}
	checkCorpus(t, "preview", names, cases)
}

// TestPreviewCorpusReader reads preview.json the way another language's
// test does, and checks every case against Go.
func TestPreviewCorpusReader(t *testing.T) {
	cases := readCases[previewCase](t, "preview")
	for _, c := range cases {
		got := previewResult(t, c.Document)
		if a, b := marshalCase(t, got), marshalCase(t, c.Expect); !bytes.Equal(a, b) {
			t.Errorf("%s: Go gives %s, the corpus says %s", c.Name, clip(a), clip(b))
		}
	}
	t.Logf("%d preview cases", len(cases))
}

func previewSources(t *testing.T) []previewSource {
	t.Helper()
	email, err := os.ReadFile("../../testdata/previews/send_email.json")
	if err != nil {
		t.Fatal(err)
	}
	var fields101, items53 strings.Builder
	for i := range 101 {
		fmt.Fprintf(&fields101, `"f%03d":%d,`, i, i)
	}
	for i := range 53 {
		fmt.Fprintf(&items53, `%d,`, i)
	}
	// Pass 2: 40 strings of 300 characters; pass 1 writes 12 KB.
	var pass2 strings.Builder
	for i := range 40 {
		fmt.Fprintf(&pass2, `%s"%s"`, map[bool]string{true: ",", false: ""}[i > 0], strings.Repeat("v", 300))
	}
	// Pass 3: 40 members of 300 characters; pass 2 keeps all 40 at 256.
	var pass3 strings.Builder
	for i := range 40 {
		fmt.Fprintf(&pass3, `%s"m%02d":"%s"`, map[bool]string{true: ",", false: ""}[i > 0], i, strings.Repeat("u", 300))
	}
	// Pass 4: 15 objects of 15 strings of 100; pass 3 writes 15 × 15 × 64.
	var pass4 strings.Builder
	for i := range 15 {
		fmt.Fprintf(&pass4, `%s"o%02d":{`, map[bool]string{true: ",", false: ""}[i > 0], i)
		for j := range 15 {
			fmt.Fprintf(&pass4, `%s"k%02d":"%s"`, map[bool]string{true: ",", false: ""}[j > 0], j, strings.Repeat("w", 100))
		}
		pass4.WriteString("}")
	}
	token := "ghp_" + "Q1w2E3r4T5y6U7i8O9p0AsDfGhJkLzXcVbNm"

	return []previewSource{
		{name: "doc-example", note: "the worked example of docs/approvals.md",
			doc:     `{"to": "alice@example.com", "amount_minor": 1250, "password": "hunter2"}`,
			preview: `{"amount_minor":1250,"password":"[REDACTED]","to":"alice@example.com"}`, pass: 1},
		{name: "send-email", note: "testdata/previews/send_email.json", doc: string(email), pass: 1,
			preview: `{"attachments":["invoice-4711.pdf"],"body":"Hello Bob, the invoice is attached.","smtp_password":"[REDACTED]","subject":"Invoice 4711 for March","summary":"Send an email with one attachment to an address outside the company","to":"Bob.Smith@Example.ORG"}`},
		{name: "scalar-string", note: "a preview document may be any JSON value", doc: `"just text"`, preview: `"just text"`, pass: 1},
		{name: "scalar-null", doc: `null`, preview: `null`, pass: 1},
		{name: "canonical-order", doc: `{"b":[true,false,null,-7],"a":"x","😀":1,"\ue000":2}`, preview: "{\"a\":\"x\",\"b\":[true,false,null,-7],\"😀\":1,\"\ue000\":2}", pass: 1},

		// Redaction by name, any value type.
		{name: "name-any-type", doc: `{"password":{"a":[1,2,{"b":null}]},"token":12345,"secret":null,"pin":true}`,
			preview: `{"password":"[REDACTED]","pin":"[REDACTED]","secret":"[REDACTED]","token":"[REDACTED]"}`, pass: 1},
		{name: "name-words", doc: `{"access_token":"v","authToken":"v","X-API-Key":"v","session_id":"v","max_tokens":5,"author":"v","oauth_provider":"v"}`,
			preview: `{"X-API-Key":"[REDACTED]","access_token":"[REDACTED]","authToken":"[REDACTED]","author":"v","max_tokens":5,"oauth_provider":"v","session_id":"[REDACTED]"}`, pass: 1},
		{name: "name-nested", doc: `{"config":{"db":{"Passphrase":"v","host":"db.example.com"}}}`,
			preview: `{"config":{"db":{"Passphrase":"[REDACTED]","host":"db.example.com"}}}`, pass: 1},
		{name: "name-false-positive", note: "secretary_name holds secret: a documented false positive", doc: `{"secretary_name":"Ada"}`,
			preview: `{"secretary_name":"[REDACTED]"}`, pass: 1},
		{name: "name-pin-exact", doc: `{"PIN":"1234","pinned":true,"spin":1}`, preview: `{"PIN":"[REDACTED]","pinned":true,"spin":1}`, pass: 1},
		{name: "name-case-mapping", note: "names are folded with Unicode simple case mapping (Go's unicode.ToLower, one code point to one): U+0130 folds to i, so PİN is a pin; U+017F (long s) has no lower case, so ſession is not session",
			doc: `{"PİN":"1234","ſession":"kept","AUTH":"x"}`, pass: 1},

		// Redaction by shape, inside strings and member names.
		{name: "shape-bearer", doc: `{"note":"Authorization: Bearer abcDEF123456ghiJKL"}`, preview: `{"note":"Authorization: Bearer [REDACTED]"}`, pass: 1},
		{name: "shape-bearer-non-ascii", note: "the scheme word is matched in ASCII case only: BEARER goes, Beareſ (long s) does not; a token that ends in a non-ASCII letter",
			doc: `{"a":"BEARER abcDEF123456ghiJKL","b":"Beareſ abcDEF123456ghiJKL","c":"Bearer abcDEF123456ghiJKLé"}`, pass: 1},
		{name: "shape-bearer-token-long-s", note: "the token class is matched in any case, as Go's (?i) does: U+017F (long s) and U+212A (Kelvin sign) are letters of it, so the whole token goes",
			doc: `{"a":"Bearer abcDEFſ123456ghiJKL","b":"Bearer ſſſſſſſſſſſſſſſſ"}`, preview: `{"a":"Bearer [REDACTED]","b":"Bearer [REDACTED]"}`, pass: 1},
		{name: "shape-basic-long-s", note: "the scheme word is matched in ASCII case only: Baſic (long s) is not Basic, and its credential stays",
			doc: `{"note":"Baſic dXNlcjpwYXNzd29yZA=="}`, preview: `{"note":"Baſic dXNlcjpwYXNzd29yZA=="}`, pass: 1},
		{name: "shape-basic", doc: `{"note":"header Basic dXNlcjpwYXNzd29yZA=="}`, preview: `{"note":"header Basic [REDACTED]"}`, pass: 1},
		{name: "shape-pem", doc: `{"note":"key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIBOgIBAAJBAKj34GkxFhD90vcNLYLInFEX6Ppy1tPf9Cnzj4p4WGeKLs1Pt8Qu\n-----END RSA PRIVATE KEY-----\nend"}`,
			preview: `{"note":"key:\n[REDACTED]\nend"}`, pass: 1},
		{name: "shape-jwt", doc: `{"note":"t=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk;"}`, preview: `{"note":"t=[REDACTED];"}`, pass: 1},
		{name: "shape-aws", doc: `{"note":"id AKIAIOSFODNN7EXAMPLE here"}`, preview: `{"note":"id [REDACTED] here"}`, pass: 1},
		{name: "shape-url-password", doc: `{"dsn":"postgres://app:Sup3rS3cret@db.example.net:5432/prod"}`, preview: `{"dsn":"postgres://app:[REDACTED]@db.example.net:5432/prod"}`, pass: 1},
		{name: "shape-high-entropy", doc: `{"note":"ref 9fQx2LmZ7pW4vK8sT1yB3nR6cH0dJ5gA end"}`, preview: `{"note":"ref [REDACTED] end"}`, pass: 1},
		{name: "shape-kept", note: "hex digests, UUIDs, URL paths and 31 mixed characters stay visible",
			doc:     `["sha256:e19d67a48f4991a8c6d703eadcc9b39f8cc56e0e1fb9bbdd667daf2ad2f2d0a8","123e4567-e89b-12d3-a456-426614174000","https://example.com/Reports/2026/Q4/SummaryFinalVersion.pdf","9fQx2LmZ7pW4vK8sT1yB3nR6cH0dJ5g"]`,
			preview: `["sha256:e19d67a48f4991a8c6d703eadcc9b39f8cc56e0e1fb9bbdd667daf2ad2f2d0a8","123e4567-e89b-12d3-a456-426614174000","https://example.com/Reports/2026/Q4/SummaryFinalVersion.pdf","9fQx2LmZ7pW4vK8sT1yB3nR6cH0dJ5g"]`, pass: 1},
		{name: "shape-member-names", note: "shaped names become numbered markers in canonical order, skipping names the object has",
			doc:     `{"AKIAIOSFODNN7EXAMPLE":1,"` + token + `":2,"[REDACTED 2]":3,"a":4}`,
			preview: `{"[REDACTED 2]":3,"[REDACTED 3]":2,"[REDACTED]":1,"a":4}`, pass: 1},

		// Bounding: each marker, each pass, the fallback.
		{name: "clip-string", doc: `"` + strings.Repeat("é", 1003) + `"`, preview: `"` + strings.Repeat("é", 1000) + `…[+3 chars]"`, pass: 1, truncated: true},
		{name: "clip-string-supplementary", note: "characters are code points, not UTF-16 units",
			doc: `"` + strings.Repeat("😂", 1001) + `"`, preview: `"` + strings.Repeat("😂", 1000) + `…[+1 chars]"`, pass: 1, truncated: true},
		{name: "clip-list", doc: `[` + strings.TrimSuffix(items53.String(), ",") + `]`,
			preview: `[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34,35,36,37,38,39,40,41,42,43,44,45,46,47,48,49,"[+3 items]"]`, pass: 1, truncated: true},
		{name: "clip-fields", doc: `{` + fields101.String() + `"zz":0}`,
			preview: `{` + fields101.String()[:strings.Index(fields101.String(), `"f100"`)] + `"…":"[+2 fields]"}`, pass: 1, truncated: true},
		{name: "clip-fields-marker-taken", doc: `{"…":1,` + strings.ReplaceAll(fields101.String(), `"f`, `"g`) + `"zz":0}`, pass: 1, truncated: true},
		{name: "clip-depth", doc: strings.Repeat(`{"a":`, 9) + "1" + strings.Repeat("}", 9),
			preview: strings.Repeat(`{"a":`, 8) + `"[depth limit]"` + strings.Repeat("}", 8), pass: 1, truncated: true},
		{name: "clip-depth-empty", doc: `[[[[[[[[[]]]]]]]]]`, preview: `[[[[[[[["[depth limit]"]]]]]]]]`, pass: 1, truncated: true},
		{name: "clip-marker-whole", note: "a cut that would fall inside [REDACTED] falls just before it",
			doc:     `{"log":"` + strings.Repeat("b", 994) + " " + token + " " + strings.Repeat("c", 100) + `"}`,
			preview: `{"log":"` + strings.Repeat("b", 994) + ` …[+111 chars]"}`, pass: 1, truncated: true},
		{name: "clip-then-redact", note: "a clipped fragment is redacted again: dXNlcjpwYXNzd29yZ is not base64, its first 16 characters are (user:passwor)",
			doc:     `{"log":"` + strings.Repeat("x", 977) + ` Basic dXNlcjpwYXNzd29yZ yyyy"}`,
			preview: `{"log":"` + strings.Repeat("x", 977) + ` Basic [REDACTED]…[+6 chars]"}`, pass: 1, truncated: true},
		{name: "redact-before-clip", note: "redaction sees the whole string: a token past the cut is counted",
			doc:     `{"log":"` + strings.Repeat("b", 1200) + " " + token + `"}`,
			preview: `{"log":"` + strings.Repeat("b", 1000) + `…[+211 chars]"}`, pass: 1, truncated: true},
		{name: "pass-2", doc: `[` + pass2.String() + `]`, pass: 2, truncated: true},
		{name: "pass-3", doc: `{` + pass3.String() + `}`, pass: 3, truncated: true},
		{name: "pass-4", doc: `{` + pass4.String() + `}`, pass: 4, truncated: true},
		{name: "fallback", doc: `{"` + strings.Repeat("n", 9000) + `":1}`, preview: `{"bytes":9006,"…":"[too large]"}`, pass: 5, truncated: true},

		// Refused documents: the strict domain, with shaped names masked in the pointer.
		{name: "refuse-non-integer", doc: `{"a":{"b":1.5}}`, want: "non_integer", pointer: "/a/b"},
		{name: "refuse-not-nfc", doc: `{"note":"e\u0301"}`, want: "not_nfc", pointer: "/note"},
		{name: "refuse-invalid-utf8", doc: "{\"note\":\"\xff\"}", want: "invalid_utf8", pointer: "/note"},
		{name: "refuse-duplicate", doc: `{"k":1,"k":2}`, want: "duplicate_key", pointer: "/k"},
		{name: "refuse-syntax", doc: `{"note":"x"`, want: "syntax", pointer: ""},
		{name: "refuse-integer-range", doc: `[9007199254740993]`, want: "integer_range", pointer: "/0"},
		{name: "refuse-shaped-name-masked", doc: `{"AKIAIOSFODNN7EXAMPLE":{"x":0.5}}`, want: "non_integer", pointer: "/[REDACTED]/x"},
		{name: "refuse-name-not-nfc", doc: `{"o":{"e\u0301":1}}`, want: "not_nfc", pointer: "/o", key: true},
		{name: "refuse-unstable-normalization", note: "U+105D2 U+0307 is NFC to Unicode 14.0 and 15.0, not to 17.0: refused before any redaction, so no preview depends on the Unicode version",
			doc: `{"note":"\ud801\uddd2\u0307"}`, want: "unstable_normalization", pointer: "/note"},
		{name: "refuse-name-unstable-normalization", doc: `{"o":{"x\u1acf":1}}`, want: "unstable_normalization", pointer: "/o", key: true},
		{name: "refuse-unstable-normalization-shaped-name", note: "a shaped name is masked in the pointer", doc: `{"AKIAIOSFODNN7EXAMPLE":"\u0897"}`, want: "unstable_normalization", pointer: "/[REDACTED]"},
		{name: "refuse-too-deep", doc: strings.Repeat("[", 65) + strings.Repeat("]", 65), want: "too_deep", pointer: "/0" + strings.Repeat("/0", 63)},
	}
}
