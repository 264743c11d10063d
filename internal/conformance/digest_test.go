package conformance

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/decisionledger/ledger/commit"
)

// digestCase is one case of digest.json.
type digestCase struct {
	Name            string       `json:"name"`
	Note            string       `json:"note,omitempty"`
	Input           []byte       `json:"input_base64"`
	AllowNonInteger bool         `json:"allow_non_integer,omitempty"`
	Expect          digestExpect `json:"expect"`
}

type digestExpect struct {
	Digest    string   `json:"digest,omitempty"`
	Size      int      `json:"size,omitempty"`
	Canonical []byte   `json:"canonical_base64,omitempty"`
	Refusal   *refusal `json:"refusal,omitempty"`
}

// digestSource is a case as written by hand: the input and what it must
// give. want is the refusal code, or "" when the input is accepted; then
// canonical, when set, is the canonical form it must have.
type digestSource struct {
	name, note      string
	input           string
	allowNonInteger bool
	want, pointer   string
	key             bool
	canonical       string
}

// digestResult runs one input through the Go reference.
func digestResult(input []byte, allowNonInteger bool) digestExpect {
	d := commit.Domain{AllowNonInteger: allowNonInteger}
	c, err := d.Params(input)
	if err != nil {
		var de *commit.DomainError
		if !errors.As(err, &de) {
			panic(fmt.Sprintf("Params returned %T, not a *DomainError: %v", err, err))
		}
		return digestExpect{Refusal: &refusal{Code: string(de.Kind), Pointer: de.Pointer, Key: de.Key}}
	}
	canonical, err := d.Canonicalize(input)
	if err != nil {
		panic(fmt.Sprintf("Params accepted what Canonicalize refuses: %v", err))
	}
	return digestExpect{Digest: c.Digest.String(), Size: c.Size, Canonical: canonical}
}

// TestDigestCorpus builds testdata/conformance/digest.json from three
// sources, each holding Go to what was written by hand: the equivalence
// corpus testdata/commit/equivalence.txt (refusals and hand-computed
// digests), the RFC 8785 vectors (their published outputs), and the cases
// of digestExtras (limits at their defaults, and edges the issue lists).
func TestDigestCorpus(t *testing.T) {
	var sources []digestSource
	sources = append(sources, equivalenceSources(t)...)
	sources = append(sources, rfc8785Sources(t)...)
	sources = append(sources, digestExtras()...)

	var names []string
	var cases []any
	refused := 0
	for _, s := range sources {
		c := digestCase{Name: s.name, Note: s.note, Input: []byte(s.input), AllowNonInteger: s.allowNonInteger}
		c.Expect = digestResult(c.Input, s.allowNonInteger)
		if r := c.Expect.Refusal; r != nil {
			refused++
			if s.want != r.Code || s.pointer != r.Pointer || s.key != r.key() {
				t.Errorf("%s: Go refuses with %s at %q (key %v), the case says %q at %q (key %v)",
					s.name, r.Code, r.Pointer, r.Key, s.want, s.pointer, s.key)
			}
		} else {
			if s.want != "" {
				t.Errorf("%s: Go accepts it, the case says %s at %q", s.name, s.want, s.pointer)
			}
			if s.canonical != "" && string(c.Expect.Canonical) != s.canonical {
				t.Errorf("%s: canonical form %q, the case says %q", s.name, c.Expect.Canonical, s.canonical)
			}
		}
		names = append(names, s.name)
		cases = append(cases, c)
	}
	if len(cases) < 120 || refused < 60 || len(cases)-refused < 50 {
		t.Errorf("digest corpus too small: %d cases, %d refused", len(cases), refused)
	}
	checkCorpus(t, "digest", names, cases)
}

func (r *refusal) key() bool { return r.Key }

// readCases reads the cases of a corpus file the way another language's
// test does: plain JSON, no Go type but the case's. It skips the test
// under -update, which rewrites the files.
func readCases[C any](t *testing.T, kind string) []C {
	t.Helper()
	if *update {
		t.Skip("-update rewrites the file")
	}
	data, err := os.ReadFile(filepath.Join(corpusDir, kind+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Cases []C `json:"cases"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	return f.Cases
}

// TestDigestCorpusReader reads digest.json the way another language's test
// does, and checks every case against Go.
func TestDigestCorpusReader(t *testing.T) {
	cases := readCases[digestCase](t, "digest")
	for _, c := range cases {
		got := digestResult(c.Input, c.AllowNonInteger)
		if a, b := marshalCase(t, got), marshalCase(t, c.Expect); !bytes.Equal(a, b) {
			t.Errorf("%s: Go gives %s, the corpus says %s", c.Name, clip(a), clip(b))
		}
	}
	t.Logf("%d digest cases", len(cases))
}

// equivalenceSources turns each input of testdata/commit/equivalence.txt
// into a case. Rows with their own limits (max_depth, max_bytes) are left
// out: the corpus uses the default limits, and digestExtras covers them.
func equivalenceSources(t *testing.T) []digestSource {
	t.Helper()
	f, err := os.Open("../../testdata/commit/equivalence.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type row struct {
		verb, name, header string
		src                digestSource
		inputs             []string
		skip               bool
	}
	var rows []*row
	var cur *row
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "#"):
		case line == "":
			cur = nil
		case cur == nil:
			cur = &row{header: line}
			rows = append(rows, cur)
			var rest string
			cur.verb, rest, _ = strings.Cut(line, " ")
			cur.name, rest, _ = strings.Cut(rest, " ")
			if cur.verb == "refuse" {
				cur.src.want, rest, _ = strings.Cut(rest, " ")
				q, err := strconv.QuotedPrefix(rest)
				if err != nil {
					t.Fatalf("equivalence.txt:%d: %v", n, err)
				}
				cur.src.pointer, _ = strconv.Unquote(q)
				rest = rest[len(q):]
			}
			for _, field := range strings.Fields(rest) {
				switch {
				case field == "key":
					cur.src.key = true
				case field == "allow_non_integer":
					cur.src.allowNonInteger = true
				case strings.HasPrefix(field, "max_"):
					cur.skip = true
				case strings.HasPrefix(field, "sha256:"):
				default:
					t.Fatalf("equivalence.txt:%d: unknown header field %q", n, field)
				}
			}
		case strings.HasPrefix(line, "q "):
			s, err := strconv.Unquote(line[2:])
			if err != nil {
				t.Fatalf("equivalence.txt:%d: %v", n, err)
			}
			cur.inputs = append(cur.inputs, s)
		default:
			cur.inputs = append(cur.inputs, line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	var out []digestSource
	for _, r := range rows {
		if r.skip {
			continue
		}
		for i, in := range r.inputs {
			s := r.src
			s.input = in
			s.name = r.verb + "-" + r.name
			if len(r.inputs) > 1 {
				s.name += "-" + strconv.Itoa(i+1)
			}
			s.note = fmt.Sprintf("testdata/commit/equivalence.txt row %q", r.header)
			if len(r.inputs) > 1 {
				s.note += fmt.Sprintf(", input %d of %d", i+1, len(r.inputs))
			}
			out = append(out, s)
		}
	}
	// The hand-computed digests of "same" rows are checked by package
	// commit's TestEquivalenceCorpus; they are in the notes for readers.
	return out
}

// rfc8785Sources are the RFC 8785 vectors, in both domains. The strict
// domain refuses some by design (see commit/rfc8785_test.go); the others
// must give the published output.
func rfc8785Sources(t *testing.T) []digestSource {
	t.Helper()
	vectors := []struct {
		file                      string
		want, pointer             string
		key                       bool
		wantNonInteger, ptrNonInt string
		note                      string
	}{
		{file: "arrays", want: "not_object", wantNonInteger: "not_object", note: "a top-level array: parameters are an object"},
		{file: "french"},
		{file: "structures"},
		{file: "unicode", want: "not_nfc", pointer: "/Unnormalized Unicode", wantNonInteger: "not_nfc", ptrNonInt: "/Unnormalized Unicode",
			note: `"A\u030a" is not NFC; RFC 8785 keeps it, the strict domain refuses it`},
		{file: "values", want: "non_integer", pointer: "/numbers/0", wantNonInteger: "inexact_number", ptrNonInt: "/numbers/0",
			note: "333333333.33333329 has a fraction, and its RFC 8785 form 333333333.3333333 is another decimal value"},
		{file: "weird", want: "not_nfc", key: true, wantNonInteger: "not_nfc",
			note: `the member name "\ufb33" is a composition exclusion: its NFC form is U+05D3 U+05BC`},
	}
	var out []digestSource
	for _, v := range vectors {
		in, err := os.ReadFile(filepath.Join("../../testdata/rfc8785/input", v.file+".json"))
		if err != nil {
			t.Fatal(err)
		}
		var canonical string
		if v.want == "" {
			o, err := os.ReadFile(filepath.Join("../../testdata/rfc8785/output", v.file+".json"))
			if err != nil {
				t.Fatal(err)
			}
			canonical = string(o)
		}
		note := "RFC 8785 vector testdata/rfc8785/input/" + v.file + ".json"
		if v.note != "" {
			note += ": " + v.note
		}
		out = append(out,
			digestSource{name: "rfc8785-" + v.file, note: note, input: string(in),
				want: v.want, pointer: v.pointer, key: v.key, canonical: canonical},
			digestSource{name: "rfc8785-" + v.file + "-allow-non-integer", note: note, input: string(in), allowNonInteger: true,
				want: v.wantNonInteger, pointer: v.ptrNonInt, key: v.key, canonical: canonical})
	}
	return out
}

// nest wraps inner in depth containers: objects {"a":…} or arrays […].
func nest(depth int, object bool, inner string) string {
	open, close := "[", "]"
	if object {
		open, close = `{"a":`, "}"
	}
	return strings.Repeat(open, depth) + inner + strings.Repeat(close, depth)
}

// padded is {"a":"x"} followed by whitespace, n bytes in all. (Whitespace
// keeps the canonical form, and so the corpus file, small.)
func padded(n int) string {
	return `{"a":"x"}` + strings.Repeat(" ", n-9)
}

// digestExtras are hand-written cases beyond equivalence.txt: the default
// limits at and one beyond their bound, and the edges issue 25 lists.
func digestExtras() []digestSource {
	const maxDepth = commit.DefaultMaxDepth
	const maxBytes = commit.DefaultMaxBytes
	deepArrays := "/a" + strings.Repeat("/0", maxDepth-1)
	deepObjects := strings.Repeat("/a", maxDepth)
	return []digestSource{
		// Limits.
		{name: "depth-at-limit-arrays", note: "an object holding 63 nested arrays: depth 64, the default bound",
			input: `{"a":` + nest(maxDepth-1, false, "1") + `}`},
		{name: "depth-beyond-limit-arrays", note: "an object holding 64 nested arrays: depth 65; the pointer names the container that goes beyond",
			input: `{"a":` + nest(maxDepth, false, "1") + `}`, want: "too_deep", pointer: deepArrays},
		{name: "depth-at-limit-objects", note: "64 nested objects", input: nest(maxDepth, true, "1")},
		{name: "depth-beyond-limit-objects", note: "65 nested objects", input: nest(maxDepth+1, true, "1"), want: "too_deep", pointer: deepObjects},
		{name: "depth-beyond-limit-empty", note: "65 nested containers, the innermost empty",
			input: `{"a":` + nest(maxDepth, false, "") + `}`, want: "too_deep", pointer: deepArrays},
		{name: "size-at-limit", note: "exactly 1 MiB (1048576 bytes), the default bound; the bound counts input bytes, whitespace too",
			input: padded(maxBytes), canonical: `{"a":"x"}`},
		{name: "size-beyond-limit", note: "1 MiB and one byte, the last not JSON: the bound is checked before anything is parsed",
			input: padded(maxBytes) + "x", want: "too_large"},

		// Integers at and beyond ±(2^53−1).
		{name: "integer-max-safe", input: `{"n":9007199254740991}`, canonical: `{"n":9007199254740991}`},
		{name: "integer-min-safe", input: `{"n":-9007199254740991}`, canonical: `{"n":-9007199254740991}`},
		{name: "integer-max-safe-plus-one", input: `{"n":9007199254740992}`, want: "integer_range", pointer: "/n"},
		{name: "integer-min-safe-minus-one", input: `{"n":-9007199254740992}`, want: "integer_range", pointer: "/n"},
		{name: "integer-max-safe-plus-two", note: "not a double either: a parser that reads doubles first sees 9007199254740992",
			input: `{"n":9007199254740993}`, want: "integer_range", pointer: "/n"},
		{name: "integer-max-safe-exponent", input: `{"n":9.007199254740991e15}`, canonical: `{"n":9007199254740991}`},
		{name: "integer-beyond-safe-exponent", input: `{"n":9.007199254740992e15}`, want: "integer_range", pointer: "/n"},
		{name: "integer-beyond-safe-allowed", note: "admitting non-integers does not admit unsafe integers",
			input: `{"n":9007199254740992}`, allowNonInteger: true, want: "integer_range", pointer: "/n"},
		{name: "number-1e400", note: "an integer value far beyond any double", input: `{"n":1e400}`, want: "integer_range", pointer: "/n"},
		{name: "number-minus-1e400", input: `{"n":-1e400}`, want: "integer_range", pointer: "/n"},
		{name: "number-1e400-allowed", input: `{"n":1e400}`, allowNonInteger: true, want: "integer_range", pointer: "/n"},
		{name: "number-1e-400", note: "not an integer", input: `{"n":1e-400}`, want: "non_integer", pointer: "/n"},
		{name: "number-1e-400-allowed", note: "a double would round it to 0", input: `{"n":1e-400}`, allowNonInteger: true, want: "inexact_number", pointer: "/n"},
		{name: "integer-in-array", input: `{"l":[1,9007199254740992]}`, want: "integer_range", pointer: "/l/1"},

		// -0, 100.0 and 1e2: numbers are judged by their decimal value.
		{name: "minus-zero", note: "-0 is zero", input: `{"n":-0}`, canonical: `{"n":0}`},
		{name: "minus-zero-fraction", input: `{"n":-0.0}`, canonical: `{"n":0}`},
		{name: "minus-zero-exponent", input: `{"n":-0e-7}`, canonical: `{"n":0}`},
		{name: "minus-zero-allowed", input: `{"n":-0.0}`, allowNonInteger: true, canonical: `{"n":0}`},
		{name: "hundred-point-zero", note: "100.0 is the integer 100 (docs/commitment.md)", input: `{"n":100.0}`, canonical: `{"n":100}`},
		{name: "hundred-exponent", input: `{"n":1e2}`, canonical: `{"n":100}`},
		{name: "hundred-exponent-upper-plus", input: `{"n":1E+2}`, canonical: `{"n":100}`},
		{name: "hundred-negative-exponent", input: `{"n":10000e-2}`, canonical: `{"n":100}`},
		{name: "hundred-fraction-exponent", input: `{"n":0.001e5}`, canonical: `{"n":100}`},
		{name: "fraction-allowed", input: `{"n":0.5}`, allowNonInteger: true, canonical: `{"n":0.5}`},
		{name: "fraction-exponent-allowed", input: `{"n":25e-2}`, allowNonInteger: true, canonical: `{"n":0.25}`},
		{name: "fraction-refused", input: `{"n":0.5}`, want: "non_integer", pointer: "/n"},
		{name: "fraction-large-allowed", note: "1.5e300 has no fractional part: an integer beyond the safe range, also when non-integers are admitted",
			input: `{"n":1.5e300}`, allowNonInteger: true, want: "integer_range", pointer: "/n"},
		{name: "fraction-small-allowed", input: `{"n":1.5e-7}`, allowNonInteger: true, canonical: `{"n":1.5e-7}`},

		// NaN and Infinity in their spellings: none is JSON.
		{name: "nan-lower", input: `{"n":nan}`, want: "syntax", pointer: "/n"},
		{name: "nan-negative", input: `{"n":-NaN}`, want: "syntax", pointer: "/n"},
		{name: "infinity-positive", input: `{"n":Infinity}`, want: "syntax", pointer: "/n"},
		{name: "infinity-plus", input: `{"n":+Infinity}`, want: "syntax", pointer: "/n"},
		{name: "infinity-short", input: `{"n":inf}`, want: "syntax", pointer: "/n"},
		{name: "infinity-in-array", input: `{"l":[1,Infinity]}`, want: "syntax", pointer: "/l/1"},
		{name: "nan-string-is-text", note: "a string spelling NaN is only text", input: `{"n":"NaN"}`, canonical: `{"n":"NaN"}`},

		// Duplicate keys at every depth.
		{name: "duplicate-top", input: `{"a":1,"b":2,"a":3}`, want: "duplicate_key", pointer: "/a"},
		{name: "duplicate-depth-2", input: `{"o":{"k":1,"k":2}}`, want: "duplicate_key", pointer: "/o/k"},
		{name: "duplicate-depth-3", input: `{"o":{"p":{"k":1,"j":0,"k":1}}}`, want: "duplicate_key", pointer: "/o/p/k"},
		{name: "duplicate-in-array", input: `{"l":[{},{"k":1,"k":2}]}`, want: "duplicate_key", pointer: "/l/1/k"},
		{name: "duplicate-deep", input: nest(10, true, `{"k":1,"k":2}`), want: "duplicate_key", pointer: strings.Repeat("/a", 10) + "/k"},
		{name: "duplicate-escaped-supplementary", note: "the same name, once escaped as a surrogate pair",
			input: `{"😀":1,"\ud83d\ude00":2}`, want: "duplicate_key", pointer: "/😀"},
		{name: "duplicate-escaped-latin", input: `{"é":1,"\u00e9":2}`, want: "duplicate_key", pointer: "/é"},
		{name: "duplicate-empty-name", input: `{"":1,"":2}`, want: "duplicate_key", pointer: "/"},
		{name: "duplicate-tilde-name", input: `{"~":1,"\u007e":2}`, want: "duplicate_key", pointer: "/~0"},
		{name: "not-duplicate-nfc-variants", note: "é and e+U+0301 are different names, but the second is not NFC",
			input: `{"é":1,"e\u0301":2}`, want: "not_nfc", key: true},
		{name: "not-duplicate-case", input: `{"a":1,"A":2}`, canonical: `{"A":2,"a":1}`},

		// Non-NFC strings and member names.
		{name: "not-nfc-combining-nested", input: `{"o":{"s":["ok","e\u0301"]}}`, want: "not_nfc", pointer: "/o/s/1"},
		{name: "not-nfc-raw-combining", input: "{\"s\":\"e\u0301\"}", want: "not_nfc", pointer: "/s"},
		{name: "not-nfc-angstrom-sign", note: "U+212B ANGSTROM SIGN normalizes to U+00C5", input: `{"s":"\u212b"}`, want: "not_nfc", pointer: "/s"},
		{name: "not-nfc-hangul-jamo", note: "U+1100 U+1161 compose to U+AC00", input: `{"s":"\u1100\u1161"}`, want: "not_nfc", pointer: "/s"},
		{name: "not-nfc-nested-name", input: `{"o":{"A\u030a":1}}`, want: "not_nfc", pointer: "/o", key: true},
		{name: "not-nfc-name-in-array", input: `{"l":[{"e\u0301":1}]}`, want: "not_nfc", pointer: "/l/0", key: true},
		{name: "nfc-precomposed", input: `{"s":"\u00c5\uac00é"}`, canonical: `{"s":"Å가é"}`},
		{name: "nfc-combining-alone", note: "a combining mark with nothing to compose with is NFC", input: `{"s":"\u0301"}`, canonical: "{\"s\":\"\u0301\"}"},

		// Code points whose normalization depends on the Unicode version
		// (docs/commitment.md §2.4) are refused before NFC is judged.
		{name: "unstable-string-15", note: "U+1E08F (Unicode 15.0, ccc 230): NFC in every version, refused in every implementation",
			input: `{"s":"\u0430\ud838\udc8f"}`, want: "unstable_normalization", pointer: "/s"},
		{name: "unstable-string-17", note: "U+1ACF (after 15.0), written as itself", input: "{\"s\":\"x\u1acf\"}", want: "unstable_normalization", pointer: "/s"},
		{name: "unstable-string-escaped", input: `{"s":"x\u1ACF"}`, want: "unstable_normalization", pointer: "/s"},
		{name: "unstable-name", note: "U+0897 ARABIC PEPET in a member name", input: `{"\u0897":1}`, want: "unstable_normalization", pointer: "", key: true},
		{name: "unstable-nested", input: `{"o":{"l":[1,{"k":"\ud839\udef5"}]}}`, want: "unstable_normalization", pointer: "/o/l/1/k"},
		{name: "unstable-nested-name", note: "U+11F41 KAWI SIGN KILLER (Unicode 15.0)", input: `{"o":[{"\ud807\udf41":1}]}`, want: "unstable_normalization", pointer: "/o/0", key: true},
		{name: "unstable-nfc-only-before-17", note: "U+105D2 U+0307 is NFC to Unicode 14.0 and 15.0, which do not know U+105D2, and composes to U+105C9 in 16.0 and later",
			input: `{"s":"\ud801\uddd2\u0307"}`, want: "unstable_normalization", pointer: "/s"},
		{name: "unstable-nfc-only-in-14", note: "U+1E08F (ccc 230) before U+0316 (ccc 220) must be reordered from Unicode 15.0 on; Unicode 14.0 takes U+1E08F for a starter",
			input: `{"s":"e\ud838\udc8f\u0316"}`, want: "unstable_normalization", pointer: "/s"},
		{name: "unstable-composite", note: "U+105C9, the composite of U+105D2 U+0307: NFC in every version, still refused",
			input: `{"s":"\ud801\uddc9"}`, want: "unstable_normalization", pointer: "/s"},
		{name: "unstable-before-not-nfc", note: "a string both out of NFC and holding U+1ACF is unstable_normalization", input: `{"s":"e\u0301\u1acf"}`, want: "unstable_normalization", pointer: "/s"},
		{name: "unstable-after-not-nfc", note: "the first fault in the text is reported", input: `{"a":"e\u0301","b":"\u1acf"}`, want: "not_nfc", pointer: "/a"},
		{name: "unstable-neighbours-kept", note: "U+0898 and U+1AC1 (Unicode 14.0 marks) are judged by NFC alone",
			input: `{"s":"a\u0898\u1ac1"}`, canonical: "{\"s\":\"a\u0898\u1ac1\"}"},

		// Names are compared exactly: case and dotted capital I.
		{name: "not-duplicate-action-case", note: "duplicates are exact: Action after action is another name", input: `{"action":1,"Action":2}`, canonical: `{"Action":2,"action":1}`},
		{name: "not-duplicate-dotted-capital-i", note: "U+0130 is NFC and its own name; it lower-cases to i, which does not matter here",
			input: `{"İ":1,"i":2,"I":3}`, canonical: `{"I":3,"i":2,"İ":1}`},
		{name: "not-nfc-dotted-capital-i-decomposed", note: "I U+0307 composes to U+0130", input: `{"İ":1,"I\u0307":2}`, want: "not_nfc", pointer: "", key: true},
		{name: "duplicate-dotted-capital-i-escaped", input: `{"İ":1,"\u0130":2}`, want: "duplicate_key", pointer: "/İ"},

		// Key order: RFC 8785 sorts by UTF-16 code units, not code points.
		{name: "order-supplementary-before-private-use", note: "U+1F600 is D83D DE00 in UTF-16, before U+E000",
			input: `{"\ue000":2,"😀":1,"a":0}`, canonical: "{\"a\":0,\"😀\":1,\"\ue000\":2}"},
		{name: "order-supplementary-before-halfwidth", note: "U+10000 (D800 DC00) sorts before U+FF61",
			input: `{"｡":1,"𐀀":2}`, canonical: `{"𐀀":2,"｡":1}`},
		{name: "order-supplementary-after-bmp-letters", input: `{"😀":1,"€":2,"é":3,"z":4}`, canonical: `{"z":4,"é":3,"€":2,"😀":1}`},
		{name: "order-supplementary-among-themselves", input: `{"😀":1,"𐀀":2,"🀄":3}`, canonical: `{"𐀀":2,"🀄":3,"😀":1}`},
		{name: "order-prefix", input: `{"ab":1,"a":2,"":3}`, canonical: `{"":3,"a":2,"ab":1}`},
		{name: "order-nested", input: `{"b":{"y":1,"x":2},"a":[{"d":1,"c":2}]}`, canonical: `{"a":[{"c":2,"d":1}],"b":{"x":2,"y":1}}`},

		// Surrogates.
		{name: "surrogate-high-at-end", input: `{"s":"x\ud800"}`, want: "lone_surrogate", pointer: "/s"},
		{name: "surrogate-two-highs", input: `{"s":"\ud800\ud800"}`, want: "lone_surrogate", pointer: "/s"},
		{name: "surrogate-high-then-raw", input: `{"s":"\ud83dx"}`, want: "lone_surrogate", pointer: "/s"},
		{name: "surrogate-low-in-array", input: `{"l":["ok","\udc00"]}`, want: "lone_surrogate", pointer: "/l/1"},
		{name: "surrogate-reversed-pair", note: "low then high", input: `{"s":"\ude00\ud83d"}`, want: "lone_surrogate", pointer: "/s"},
		{name: "surrogate-pair-escaped", input: `{"s":"\ud83d\ude00"}`, canonical: `{"s":"😀"}`},
		{name: "surrogate-pair-upper-hex", input: `{"s":"\uD83D\uDE00"}`, canonical: `{"s":"😀"}`},
		{name: "surrogate-in-nested-name", input: `{"o":{"\udfff":1}}`, want: "lone_surrogate", pointer: "/o", key: true},

		// Invalid UTF-8.
		{name: "utf8-lone-continuation", input: "{\"s\":\"\x80\"}", want: "invalid_utf8", pointer: "/s"},
		{name: "utf8-truncated", input: "{\"s\":\"\xe2\x82\"}", want: "invalid_utf8", pointer: "/s"},
		{name: "utf8-overlong-nul", input: "{\"s\":\"\xc0\x80\"}", want: "invalid_utf8", pointer: "/s"},
		{name: "utf8-beyond-unicode", input: "{\"s\":\"\xf4\x90\x80\x80\"}", want: "invalid_utf8", pointer: "/s"},
		{name: "utf8-ff", input: "{\"s\":\"\xff\"}", want: "invalid_utf8", pointer: "/s"},
		{name: "utf8-encoded-low-surrogate", input: "{\"s\":\"\xed\xb0\x80\"}", want: "invalid_utf8", pointer: "/s"},
		{name: "utf8-in-nested-name", input: "{\"o\":[{\"\xfe\":1}]}", want: "invalid_utf8", pointer: "/o/0", key: true},
		{name: "utf8-outside-string", note: "a stray byte where a token belongs is a syntax error", input: "{\"s\":1\xff}", want: "syntax", pointer: ""},
		{name: "utf8-valid-four-byte", input: "{\"s\":\"\xf0\x9f\x98\x80\"}", canonical: `{"s":"😀"}`},

		// Which refusal wins when there are several (docs/conformance.md):
		// the first fault in the text, except that duplicate names are found
		// when their object closes, and not_object after the whole document.
		{name: "precedence-first-in-text", input: `{"a":"\ud800","b":"e\u0301"}`, want: "lone_surrogate", pointer: "/a"},
		{name: "precedence-syntax-after-duplicate", input: `{"a":1,"a":2,"b":NaN}`, want: "syntax", pointer: "/b"},
		{name: "precedence-inner-duplicate", input: `{"a":1,"a":{"k":1,"k":2}}`, want: "duplicate_key", pointer: "/a/k"},
		{name: "precedence-two-duplicates", note: "the first duplicated name in canonical order is named",
			input: `{"b":1,"b":2,"a":1,"a":2}`, want: "duplicate_key", pointer: "/a"},
		{name: "precedence-two-duplicates-utf16", note: "canonical order is UTF-16 order: U+1F600 before U+E000",
			input: `{"\ue000":1,"\ue000":2,"😀":1,"😀":2}`, want: "duplicate_key", pointer: "/😀"},
		{name: "precedence-syntax-before-not-object", input: `[NaN]`, want: "syntax", pointer: "/0"},
		{name: "precedence-depth-before-syntax", input: `{"a":` + nest(maxDepth, false, "NaN") + `}`, want: "too_deep", pointer: deepArrays},

		// Not an object.
		{name: "not-object-null", input: `null`, want: "not_object"},
		{name: "not-object-number", input: ` 1 `, want: "not_object"},
		{name: "not-object-true", input: "true\n", want: "not_object"},
		{name: "not-object-empty-array", input: `[]`, want: "not_object"},
		{name: "object-empty", input: " {\r\n} ", canonical: `{}`},
	}
}
