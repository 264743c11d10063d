package conformance

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/decisionledger/ledger/commit"
)

// hidingCase is one case of hiding.json: a commitment with fixed openings
// ("commit"), a derived opening ("derive"), or a disclosure checked against
// a commitment ("disclose").
type hidingCase struct {
	Name string `json:"name"`
	Note string `json:"note,omitempty"`
	Kind string `json:"kind"`

	// commit
	Params   []byte            `json:"params_base64,omitempty"`
	Openings map[string]string `json:"openings,omitempty"`

	// derive
	Secret  string `json:"secret_hex,omitempty"`
	CallKey string `json:"call_key,omitempty"`
	Field   string `json:"field,omitempty"`

	// disclose
	Disclosure   []byte `json:"disclosure_base64,omitempty"`
	ParamsDigest string `json:"params_digest,omitempty"`
	ParamsSize   int    `json:"params_size,omitempty"`

	Expect hidingExpect `json:"expect"`
}

type hidingExpect struct {
	// commit
	Digest      string            `json:"digest,omitempty"`
	Size        *int              `json:"size,omitempty"`
	Commitments map[string]string `json:"commitments,omitempty"`
	Disclosure  []byte            `json:"disclosure_base64,omitempty"`
	// derive
	Opening string `json:"opening,omitempty"`
	// disclose
	Disclosed []string `json:"disclosed,omitempty"`
	Hidden    []string `json:"hidden,omitempty"`
	// Params is the canonical parameters a whole disclosure gives back.
	Params []byte `json:"params_base64,omitempty"`

	Refusal *hidingRefusal `json:"refusal,omitempty"`
}

// hidingRefusal is a refusal with the field it names, if any.
type hidingRefusal struct {
	Code    string `json:"code"`
	Pointer string `json:"pointer"`
	Field   string `json:"field,omitempty"`
	Key     bool   `json:"key,omitempty"`
}

// corpusOpening is the fixed opening of a field in a commit case: a
// function of the case and field names, so that the cases read the same
// in every language and change only when a case does.
func corpusOpening(caseName, field string) string {
	sum := sha256.Sum256([]byte("ledger corpus opening\n" + caseName + "\n" + field))
	return hex.EncodeToString(sum[:])
}

type mapOpenings map[string]string

func (m mapOpenings) Opening(field string) (commit.Opening, error) {
	var o commit.Opening
	h, ok := m[field]
	if !ok {
		return o, fmt.Errorf("the case has no opening for %q", field)
	}
	if _, err := hex.Decode(o[:], []byte(h)); err != nil {
		return o, err
	}
	return o, nil
}

// hidingResult runs one case through the Go reference.
func hidingResult(t *testing.T, c *hidingCase) hidingExpect {
	t.Helper()
	switch c.Kind {
	case "commit":
		cm, x, err := commit.Hide(c.Params, mapOpenings(c.Openings))
		if err != nil {
			var de *commit.DomainError
			if !errors.As(err, &de) {
				t.Fatalf("%s: %v", c.Name, err)
			}
			return hidingExpect{Refusal: &hidingRefusal{Code: string(de.Kind), Pointer: de.Pointer, Key: de.Key}}
		}
		file, _ := x.MarshalJSON()
		var parsed struct {
			Fields map[string]struct {
				Commitment string `json:"commitment"`
			} `json:"fields"`
		}
		if err := json.Unmarshal(file, &parsed); err != nil {
			t.Fatal(err)
		}
		commitments := map[string]string{}
		for name, f := range parsed.Fields {
			commitments[name] = f.Commitment
		}
		return hidingExpect{Digest: cm.DigestText(), Size: &cm.Size, Commitments: commitments, Disclosure: file}
	case "derive":
		secret, err := hex.DecodeString(c.Secret)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		src, err := commit.DerivedOpenings(secret, c.CallKey)
		switch {
		case errors.Is(err, commit.ErrShortSecret):
			return hidingExpect{Refusal: &hidingRefusal{Code: "short_secret"}}
		case errors.Is(err, commit.ErrEmptyCallKey):
			return hidingExpect{Refusal: &hidingRefusal{Code: "empty_call_key"}}
		case err != nil:
			t.Fatalf("%s: %v", c.Name, err)
		}
		o, err := src.Opening(c.Field)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		return hidingExpect{Opening: hex.EncodeToString(o[:])}
	case "disclose":
		refused := func(err error) hidingExpect {
			var de *commit.DisclosureError
			if !errors.As(err, &de) {
				t.Fatalf("%s: %T %v", c.Name, err, err)
			}
			return hidingExpect{Refusal: &hidingRefusal{Code: string(de.Kind), Pointer: de.Pointer, Field: de.Field}}
		}
		x, err := commit.ParseDisclosure(c.Disclosure, commit.Domain{})
		if err != nil {
			return refused(err)
		}
		d, hiding, err := commit.ParseParamsDigest(c.ParamsDigest)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		if err := x.Check(commit.Commitment{Digest: d, Size: c.ParamsSize, Hiding: hiding}); err != nil {
			return refused(err)
		}
		e := hidingExpect{Disclosed: x.Disclosed(), Hidden: x.Hidden()}
		e.Params, _ = x.Params()
		return e
	}
	t.Fatalf("%s: kind %q", c.Name, c.Kind)
	return hidingExpect{}
}

// hidingSources are the cases as written by hand, without their results.
func hidingSources(t *testing.T) []hidingCase {
	var cases []hidingCase
	commitCase := func(name, note, params string) {
		c := hidingCase{Name: name, Note: note, Kind: "commit", Params: []byte(params), Openings: map[string]string{}}
		if o, err := (commit.Domain{}).Object([]byte(params)); err == nil {
			for i := range o.Len() {
				c.Openings[o.Name(i)] = corpusOpening(name, o.Name(i))
			}
		}
		cases = append(cases, c)
	}
	read := func(path string) string {
		b, err := os.ReadFile(filepath.Join("../..", path))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	commitCase("commit-make-payment", "testdata/calls/make_payment.json", read("testdata/calls/make_payment.json"))
	commitCase("commit-send-email", "testdata/calls/send_email.json", read("testdata/calls/send_email.json"))
	commitCase("commit-worked-example", "testdata/commit/example-payment.json (docs/commitment.md §4)", read("testdata/commit/example-payment.json"))
	commitCase("commit-params-1k", "testdata/commit/params-1k.json, the benchmark's input", read("testdata/commit/params-1k.json"))
	commitCase("commit-empty", "no field: the map is {} and the size 2", `{}`)
	commitCase("commit-null-value", "null is a value, committed like any other", `{"a":null}`)
	commitCase("commit-nested", "a nested object is committed with its field, in canonical form", `{"o":{"z":1,"a":[true,{"k":"v"}]}}`)
	commitCase("commit-number-spellings", "1e2 and 100.0 are the integer 100 (docs/commitment.md §2.2)", `{"a":1e2,"b":100.0}`)
	commitCase("commit-name-escapes", "names with characters JCS escapes, and a slash", `{"a\"b":1,"c\\d":2,"e/f":3,"\u0001":4}`)
	commitCase("commit-name-order", "U+1F602 sorts before U+E000 (UTF-16 order), in the map as in JCS", `{"\ue000":1,"\ud83d\ude02":2,"a":3}`)
	commitCase("commit-unicode-value", "a value beyond the BMP and one JCS writes as itself", `{"s":"caf\u00e9 \ud83d\ude02 \u2028"}`)
	for _, r := range []struct{ name, params string }{
		{"refuse-not-object", `[1]`},
		{"refuse-duplicate", `{"a":1,"a":2}`},
		{"refuse-duplicate-nested", `{"a":{"k":1,"k":2}}`},
		{"refuse-not-nfc", `{"a":"e\u0301"}`},
		{"refuse-unstable-normalization", `{"a":"\ud801\uddd2\u0307"}`},
		{"refuse-unstable-normalization-name", `{"\u1acf":1}`},
		{"refuse-integer-range", `{"a":9007199254740992}`},
		{"refuse-non-integer", `{"a":1.5}`},
		{"refuse-lone-surrogate", `{"a":"\ud800"}`},
		{"refuse-syntax", `{"a":NaN}`},
	} {
		commitCase("commit-"+r.name, "the strict domain's refusal, as version 1 gives it", r.params)
	}

	secret := strings.Repeat("07", 32)
	for _, d := range []struct{ name, secret, key, field string }{
		{"derive-payee", secret, "call-0001", "payee"},
		{"derive-memo", secret, "call-0001", "memo"},
		{"derive-other-call", secret, "call-0002", "payee"},
		{"derive-long-secret", strings.Repeat("ab", 64), "call-0001", "payee"},
		{"derive-unicode", secret, "caf\u00e9-\U0001F602", "na\"me"},
		{"derive-short-secret", strings.Repeat("07", 31), "call-0001", "payee"},
		{"derive-empty-call-key", secret, "", "payee"},
	} {
		cases = append(cases, hidingCase{Name: d.name, Kind: "derive", Secret: d.secret, CallKey: d.key, Field: d.field})
	}

	// Disclosures of make_payment's committed call.
	base := cases[0]
	cm, x, err := commit.Hide(base.Params, mapOpenings(base.Openings))
	if err != nil {
		t.Fatal(err)
	}
	_, other, err := commit.Hide(base.Params, mapOpenings{"amount_minor": corpusOpening("other", "amount_minor"), "currency": corpusOpening("other", "currency"), "memo": corpusOpening("other", "memo"), "payee": corpusOpening("other", "payee")})
	if err != nil {
		t.Fatal(err)
	}
	disclose := func(name, note string, file []byte, c commit.Commitment) {
		cases = append(cases, hidingCase{Name: name, Note: note, Kind: "disclose", Disclosure: file, ParamsDigest: c.DigestText(), ParamsSize: c.Size})
	}
	fields := x.Fields()
	for mask := 0; mask < 1<<len(fields); mask++ {
		var names []string
		for i, f := range fields {
			if mask&(1<<i) != 0 {
				names = append(names, f)
			}
		}
		y, _ := x.Only(names...)
		file, _ := y.MarshalJSON()
		label := strings.ReplaceAll(strings.Join(names, "-"), "_", "-")
		if label == "" {
			label = "none"
		}
		disclose("disclose-"+label, "commit-make-payment, disclosing these fields", file, cm)
	}
	whole, _ := x.MarshalJSON()
	edit := func(name, note, old, new string, c commit.Commitment) {
		file := strings.Replace(string(whole), old, new, 1)
		if file == string(whole) {
			t.Fatalf("%s: the edit changes nothing", name)
		}
		disclose(name, note, []byte(file), c)
	}
	var payee struct {
		Fields map[string]struct{ Commitment, Opening string } `json:"fields"`
	}
	json.Unmarshal(whole, &payee)
	var otherPayee struct {
		Fields map[string]struct{ Commitment, Opening string } `json:"fields"`
	}
	otherFile, _ := other.MarshalJSON()
	json.Unmarshal(otherFile, &otherPayee)
	p, op := payee.Fields["payee"], otherPayee.Fields["payee"]
	flipped := []byte(p.Opening)
	if flipped[0] == '0' {
		flipped[0] = '1'
	} else {
		flipped[0] = '0'
	}
	edit("disclose-changed-value", "the payee's value changed: field_mismatch names the field", `"value":"payee-0001"`, `"value":"payee-0002"`, cm)
	edit("disclose-changed-opening", "one hex digit of the payee's opening changed", `"opening":"`+p.Opening, `"opening":"`+string(flipped), cm)
	edit("disclose-opening-of-another-call", "the payee's opening taken from another call with the same parameters", p.Opening, op.Opening, cm)
	{
		// The payee's commitment and opening from another call, and the
		// file's own digest recomputed to match, as a forger would.
		file := strings.Replace(string(whole), `"payee":{"commitment":"`+p.Commitment+`","opening":"`+p.Opening, `"payee":{"commitment":"`+op.Commitment+`","opening":"`+op.Opening, 1)
		var f struct {
			Fields map[string]struct{ Commitment string } `json:"fields"`
		}
		json.Unmarshal([]byte(file), &f)
		m := []byte(commit.HidingDomainSeparator)
		for _, name := range slices.Sorted(maps.Keys(f.Fields)) { // ASCII names: byte order is UTF-16 order
			c, _ := hex.DecodeString(f.Fields[name].Commitment)
			m = append(fmt.Appendf(m, "%q", name), c...)
		}
		sum := sha256.Sum256(m)
		file = strings.Replace(file, cm.DigestText(), "v2:sha256:"+hex.EncodeToString(sum[:]), 1)
		disclose("disclose-field-of-another-call", "the payee's commitment and opening taken from another call, the file's digest made to match: the map no longer hashes to the entry's", []byte(file), cm)
	}
	disclose("disclose-another-entry", "a whole disclosure checked against another entry's commitment", otherFile, cm)
	disclose("disclose-version-1-entry", "an entry with a version 1 digest has nothing to open", whole, commit.Commitment{Digest: cm.Digest, Size: cm.Size})
	edit("disclose-unknown-member", "", `{"disclosure":2`, `{"disclosure":2,"extra":1`, cm)
	edit("disclose-format-1", "", `"disclosure":2`, `"disclosure":1`, cm)
	edit("disclose-opening-without-value", "", `,"value":42000`, ``, cm)
	edit("disclose-short-commitment", "", `"commitment":"`+p.Commitment, `"commitment":"`+p.Commitment[1:], cm)
	edit("disclose-wrong-size", "the file's own size disagrees with its map", fmt.Sprintf(`"params_size":%d`, cm.Size), fmt.Sprintf(`"params_size":%d`, cm.Size+1), cm)
	edit("disclose-duplicate-field", "", `"fields":{`, `"fields":{"payee":{"commitment":"`+p.Commitment+`"},`, cm)
	edit("disclose-value-outside-domain", "a disclosed value the strict domain refuses", `"value":42000`, `"value":1.5`, cm)
	{
		// The same members, spaced and in another order.
		var f map[string]json.RawMessage
		json.Unmarshal(whole, &f)
		spaced := fmt.Sprintf("{\n  \"params_size\" : %s,\n  \"params_digest\": %s,\n  \"fields\": %s,\n  \"disclosure\": 2\n}\n", f["params_size"], f["params_digest"], strings.ReplaceAll(string(f["fields"]), `","`, `", "`))
		disclose("disclose-spaced", "a reader accepts any spacing and member order", []byte(spaced), cm)
	}
	return cases
}

// TestHidingCorpus builds testdata/conformance/hiding.json and holds the
// hand-written expectations: each commit case opens with its own
// disclosure, each disclosure verdict is the one its name says.
func TestHidingCorpus(t *testing.T) {
	sources := hidingSources(t)
	var names []string
	var cases []any
	counts := map[string]int{}
	for i := range sources {
		c := &sources[i]
		c.Expect = hidingResult(t, c)
		counts[c.Kind]++
		r := c.Expect.Refusal
		refusedByName := strings.Contains(c.Name, "refuse") || strings.Contains(c.Name, "short-secret") || strings.Contains(c.Name, "empty-call-key")
		switch c.Kind {
		case "commit", "derive":
			if (r != nil) != refusedByName {
				t.Errorf("%s: refusal %+v", c.Name, r)
			}
		case "disclose":
			want := map[string]string{
				"disclose-changed-value": "field_mismatch payee", "disclose-changed-opening": "field_mismatch payee",
				"disclose-opening-of-another-call": "field_mismatch payee", "disclose-field-of-another-call": "commitment_mismatch ",
				"disclose-another-entry": "commitment_mismatch ", "disclose-version-1-entry": "not_hiding ",
			}[c.Name]
			switch {
			case want != "" && (r == nil || r.Code+" "+r.Field != want):
				t.Errorf("%s: %+v, want %s", c.Name, r, want)
			case want == "" && strings.HasPrefix(c.Note, "commit-make-payment") && (r != nil || len(c.Expect.Disclosed)+len(c.Expect.Hidden) != 4):
				t.Errorf("%s: %+v", c.Name, c.Expect)
			case want == "" && !strings.HasPrefix(c.Note, "commit-make-payment") && c.Name != "disclose-spaced" && (r == nil || r.Code != "malformed"):
				t.Errorf("%s: %+v, want malformed", c.Name, r)
			}
		}
		names = append(names, c.Name)
		cases = append(cases, *c)
	}
	if counts["commit"] < 15 || counts["derive"] < 5 || counts["disclose"] < 25 {
		t.Errorf("hiding corpus too small: %v", counts)
	}
	checkCorpus(t, "hiding", names, cases)
}

// TestHidingCorpusReader reads hiding.json the way another language's
// test does and checks every case against Go; a commit case's disclosure
// must also open its commitment.
func TestHidingCorpusReader(t *testing.T) {
	cases := readCases[hidingCase](t, "hiding")
	for i := range cases {
		c := &cases[i]
		got := hidingResult(t, c)
		if a, b := marshalCase(t, got), marshalCase(t, c.Expect); !bytes.Equal(a, b) {
			t.Errorf("%s: Go gives %s, the corpus says %s", c.Name, clip(a), clip(b))
		}
		if c.Kind == "commit" && c.Expect.Refusal == nil {
			x, err := commit.ParseDisclosure(c.Expect.Disclosure, commit.Domain{})
			if err != nil {
				t.Fatalf("%s: %v", c.Name, err)
			}
			d, _, _ := commit.ParseParamsDigest(c.Expect.Digest)
			if err := x.Check(commit.Commitment{Digest: d, Size: *c.Expect.Size, Hiding: true}); err != nil {
				t.Errorf("%s: the case's disclosure does not open it: %v", c.Name, err)
			}
			if got := slices.Sorted(maps.Keys(c.Expect.Commitments)); !slices.Equal(got, slices.Sorted(maps.Keys(c.Openings))) {
				t.Errorf("%s: commitments for %v, openings for %v", c.Name, got, slices.Sorted(maps.Keys(c.Openings)))
			}
		}
	}
	t.Logf("%d hiding cases", len(cases))
}
