package entry

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// validEncodings are signed entries of every version and kind, and ones
// parseFast leaves to parseStrict (escapes in an identifier), with
// attributes that hold escapes, nesting and non-ASCII text.
func validEncodings(t testing.TB) [][]byte {
	t.Helper()
	out := [][]byte{readExample(t)}
	add := func(e *Entry, priv ed25519.PrivateKey) {
		t.Helper()
		if _, err := e.Sign(e.KeyID, func(m []byte) []byte { return ed25519.Sign(priv, m) }); err != nil {
			t.Fatal(err)
		}
		b, err := e.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	e, priv := sampleEntry(t)
	add(e, priv)
	v2 := *e
	v2.Definition = sha256.Sum256([]byte("definition"))
	v2.Policies = []string{"a", "b.c", "é"}
	add(&v2, priv)
	rich := *e
	rich.Attributes = []byte(`{"a":"é\n\"x\\","b":[1,{"c":null,"d":[true,false]}],"e":-3,"f":"\u001f"}`)
	if err := rich.SetAttributes(rich.Attributes); err != nil {
		t.Fatal(err)
	}
	add(&rich, priv)
	quoted := *e
	quoted.Principal = `agent "q" \ 2`
	add(&quoted, priv)
	hiding := *e
	hiding.Params.Hiding = true
	add(&hiding, priv)
	add(ledgerDecision(t))
	d, priv := ledgerDecision(t)
	d.Decision, d.Policies, d.PolicyErrors = Deny, []string{"p1", "p2"}, []string{"p2"}
	add(d, priv)
	add(publication(t))
	v4, priv := approvalEntries(t)
	for _, e := range v4 {
		add(e, priv)
	}
	v5, priv := decisionOutcomes(t)
	for _, e := range v5 {
		add(e, priv)
	}
	return out
}

// nested returns an attributes object nesting depth objects.
func nested(depth int) string {
	return strings.Repeat(`{"a":`, depth-1) + `{}` + strings.Repeat(`}`, depth-1)
}

// Values a mutation writes in place of a member's: each is right for some
// member and wrong for most, or at an edge of its rule.
var mutantValues = []string{
	`"x"`, `""`, `"allow"`, `"deny"`, `"needs_approval"`, `"decision"`, `"policy_set"`, `"approval"`,
	`"consumption"`, `"outcome"`, `"approval_config"`, `"approve"`, `"succeeded"`,
	`0`, `1`, `2`, `3`, `4`, `5`, `7`, `007`, `-1`, `1.0`, `1e2`, `9007199254740991`, `9007199254740992`,
	`31622400000`, `31622400001`, `true`, `null`, `[]`, `["a"]`, `["b","a"]`, `["a","a"]`, `[""]`, `[1]`,
	`{}`, `{"a":1}`, `{"b":1,"a":2}`, `{"a":1.5}`, `{"a":"e\u0301"}`, `{"a":"é"}`, `{ "a":1}`, `{"a":"\u0041"}`,
	`"sha256:` + strings.Repeat("0", 64) + `"`, `"sha256:` + strings.Repeat("ab", 32) + `"`,
	`"sha256:` + strings.Repeat("AB", 32) + `"`, `"sha256:` + strings.Repeat("a", 63) + `"`,
	`"2026-01-02T03:04:05.000006Z"`, `"2026-01-02T03:04:05.00006Z"`, `"2026-01-02T03:04:05.000006+00:00"`,
	`"0000-01-02T03:04:05.000006Z"`, `"2026-02-30T03:04:05.000006Z"`,
	`"e` + "\u0301" + `"`, `"a\u0041"`, `"a\"b"`, `"` + "\u202e" + `x"`, `"` + "\x7f" + `"`,
	`"` + strings.Repeat("A", 86) + `=="`, `"` + strings.Repeat("A", 85) + `B=="`, `"` + strings.Repeat("A", 88) + `"`,
	nested(62), nested(63), nested(64),
}

// memberSpan returns the offsets of the member name's '"' and of the end
// of its value in b, or -1.
func memberSpan(b []byte, name string) (int, int) {
	at := bytes.Index(b, []byte(`"`+name+`":`))
	if at < 0 {
		return -1, -1
	}
	end := skipValue(b, at+len(name)+3)
	if end < 0 {
		// A value skipValue does not read (escapes): up to the next
		// member, roughly.
		next := bytes.Index(b[at+len(name)+3:], []byte(`,"`))
		if next < 0 {
			return -1, -1
		}
		end = at + len(name) + 3 + next
	}
	return at, end
}

var memberNames = []string{
	"action", "approval", "approver", "attributes", "consumption", "decision", "definition_digest",
	"execution_ttl_ms", "index", "key_id", "kind", "mediator", "operation_id", "origin", "params_digest",
	"params_size", "pending_ttl_ms", "policies", "policy_errors", "policy_set", "prev", "preview_digest",
	"principal", "request", "result", "sig", "tiers_digest", "time", "verdict", "version", "zzz", "Sig",
}

// mutate applies one random edit to b: a byte, an insertion, a deletion,
// a member's value replaced, a member dropped, repeated or moved, or the
// signature's last character changed to a non-canonical spelling.
func mutate(t *rapid.T, b []byte) []byte {
	b = bytes.Clone(b)
	switch rapid.IntRange(0, 8).Draw(t, "mutation") {
	case 0:
		if len(b) > 0 {
			i := rapid.IntRange(0, len(b)-1).Draw(t, "at")
			b[i] = rapid.SampledFrom([]byte(`"\,:{}[]0 9aA_-.`+"\x00\x1f\x7f\xc3\xa9\xff")).Draw(t, "byte")
		}
	case 1:
		i := rapid.IntRange(0, len(b)).Draw(t, "at")
		s := rapid.SampledFrom([]string{" ", ",", `"`, `\`, "0", `,"zzz":1`, `,"sig":"x"`, "\u0301", "é"}).Draw(t, "insert")
		b = append(b[:i:i], append([]byte(s), b[i:]...)...)
	case 2:
		if len(b) > 0 {
			i := rapid.IntRange(0, len(b)-1).Draw(t, "from")
			j := rapid.IntRange(i, min(len(b), i+8)).Draw(t, "to")
			b = append(b[:i:i], b[j:]...)
		}
	case 3, 4:
		name := rapid.SampledFrom(memberNames).Draw(t, "member")
		if at, end := memberSpan(b, name); at >= 0 {
			v := rapid.SampledFrom(mutantValues).Draw(t, "value")
			b = append(b[:at+len(name)+3:at+len(name)+3], append([]byte(v), b[end:]...)...)
		}
	case 5: // drop a member with the comma before it
		name := rapid.SampledFrom(memberNames).Draw(t, "dropped")
		if at, end := memberSpan(b, name); at > 1 {
			b = append(b[:at-1:at-1], b[end:]...)
		}
	case 6: // repeat a member
		name := rapid.SampledFrom(memberNames).Draw(t, "repeated")
		if at, end := memberSpan(b, name); at > 1 {
			m := append([]byte(","), b[at:end]...)
			b = append(b[:end:end], append(m, b[end:]...)...)
		}
	case 7: // move a member to the end
		name := rapid.SampledFrom(memberNames).Draw(t, "moved")
		if at, end := memberSpan(b, name); at > 1 {
			m := append([]byte(","), b[at:end]...)
			b = append(b[:at-1:at-1], b[end:]...)
			b = append(b[:len(b)-1:len(b)-1], append(m, '}')...)
		}
	case 8: // the signature's last data character, with padding bits set
		if at := bytes.Index(b, []byte(`"sig":"`)); at >= 0 && at+7+88 <= len(b) {
			const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
			c := &b[at+7+85]
			if i := strings.IndexByte(alphabet, *c); i >= 0 {
				*c = alphabet[i|rapid.IntRange(1, 15).Draw(t, "bits")]
			}
		}
	}
	return b
}

// parseFast accepts only what parseStrict accepts, and returns the same
// entry and signed message; it accepts every accepted entry without an
// escape outside its attributes. Checked on mutants of valid entries of
// every kind (one to three edits each).
func TestParseFastDifferential(t *testing.T) {
	valid := validEncodings(t)
	var bothAccept, bothRefuse, strictOnly int
	rapid.Check(t, func(t *rapid.T) {
		b := rapid.SampledFrom(valid).Draw(t, "entry")
		for range rapid.IntRange(0, 3).Draw(t, "edits") {
			b = mutate(t, b)
		}
		compareParsers(t, b, &bothAccept, &bothRefuse, &strictOnly)
	})
	t.Logf("mutants: both accept %d, both refuse %d, only parseStrict accepts %d", bothAccept, bothRefuse, strictOnly)

	// The three outcomes, each reached on purpose rather than by the luck
	// of the mutants (rapid runs only 20 cases under -short): a valid
	// entry both accept; the same with a canonical escape (RFC 8785: \\)
	// put into a string member outside its attributes only parseStrict
	// accepts; cut short, both refuse.
	outcome := func(b []byte) string {
		var accept, refuse, strict int
		compareParsers(t, b, &accept, &refuse, &strict)
		switch {
		case accept == 1:
			return "both accept"
		case strict == 1:
			return "only parseStrict accepts"
		}
		return "both refuse"
	}
	for i, b := range valid {
		want := "both accept"
		if at, end := memberSpan(b, "attributes"); bytes.Contains(append(b[:max(at, 0):max(at, 0)], b[max(end, 0):]...), []byte(`\`)) {
			want = "only parseStrict accepts" // it has an escape already
		}
		escaped := escapedVariant(b)
		if escaped == nil {
			t.Fatalf("valid entry %d: no member takes an escape that parseStrict accepts:\n%s", i, b)
		}
		for _, c := range []struct {
			what, want string
			b          []byte
		}{
			{"as it is", want, b},
			{"escaped", "only parseStrict accepts", escaped},
			{"cut short", "both refuse", b[:len(b)-1]},
		} {
			if got := outcome(c.b); got != c.want {
				t.Errorf("valid entry %d %s: %s, want %s", i, c.what, got, c.want)
			}
		}
	}
}

// escapedVariant returns b with an escaped backslash put at the start of
// the first string member, outside the attributes, where parseStrict
// still accepts it; nil if there is none.
func escapedVariant(b []byte) []byte {
	for _, name := range memberNames {
		if name == "attributes" || name == "sig" {
			continue
		}
		at := bytes.Index(b, []byte(`"`+name+`":"`))
		if at < 0 {
			continue
		}
		at += len(name) + 4
		e := append(bytes.Clone(b[:at:at]), `\\`...)
		e = append(e, b[at:]...)
		if _, err := parseStrict(e); err == nil {
			return e
		}
	}
	return nil
}
func compareParsers(t interface {
	Helper()
	Fatalf(string, ...any)
}, b []byte, bothAccept, bothRefuse, strictOnly *int) {
	t.Helper()
	fast, message := parseFast(b, []byte("prefix"))
	strict, err := parseStrict(b)
	switch {
	case fast != nil && err != nil:
		t.Fatalf("parseFast accepted what parseStrict refuses (%v):\n%s", err, b)
	case fast != nil:
		if !reflect.DeepEqual(fast, strict) {
			t.Fatalf("parseFast and parseStrict decode differently:\n%s\nfast   %+v\nstrict %+v", b, fast, strict)
		}
		want, err := strict.AppendSignedMessage([]byte("prefix"))
		if err != nil || !bytes.Equal(message, want) {
			t.Fatalf("parseFast's signed message\n%q\nwant\n%q (%v)", message, want, err)
		}
		*bothAccept++
	case err == nil:
		if at, end := memberSpan(b, "attributes"); !bytes.Contains(append(b[:max(at, 0):max(at, 0)], b[max(end, 0):]...), []byte(`\`)) {
			t.Fatalf("parseFast refused an entry without escapes that parseStrict accepts:\n%s", b)
		}
		*strictOnly++
	default:
		if string(message) != "prefix" {
			t.Fatalf("parseFast refused but changed the buffer: %q", message)
		}
		*bothRefuse++
	}
}

// Edge cases named one by one: each is decided the same by both.
func TestParseFastEdges(t *testing.T) {
	e, priv := sampleEntry(t)
	sign := func(e *Entry) []byte {
		t.Helper()
		if _, err := e.Sign(e.KeyID, func(m []byte) []byte { return ed25519.Sign(priv, m) }); err != nil {
			t.Fatal(err)
		}
		b, err := e.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// Attributes nested 63 deep make an entry 64 deep, the domain's
	// bound; 64 deep, the entry would be one level too deep for Parse,
	// so the encoder refuses to sign it (alone they are in the domain).
	for _, depth := range []int{62, 63} {
		d := *e
		d.Attributes = []byte(nested(depth))
		if _, err := Parse(sign(&d)); err != nil {
			t.Errorf("attributes %d deep: Parse = %v", depth, err)
		}
	}
	d := *e
	d.Attributes = []byte(nested(64))
	if _, err := d.Sign(d.KeyID, func(m []byte) []byte { return ed25519.Sign(priv, m) }); !errors.Is(err, ErrMalformed) {
		t.Errorf("attributes 64 deep: Sign = %v, want ErrMalformed (Parse could not read the entry)", err)
	}
	b := sign(e)
	sig := base64.StdEncoding.EncodeToString(e.Signature)
	padded := []byte(sig)
	padded[85] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"[strings.IndexByte(
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", padded[85])^1]
	sigAt := bytes.Index(b, []byte(`"sig":"`)) + len(`"sig":"`)
	cases := map[string][]byte{
		"valid":                     b,
		"signature padding bits":    append(append(bytes.Clone(b[:sigAt]), padded...), b[sigAt+88:]...),
		"signature with a newline":  append(append(bytes.Clone(b[:sigAt]), sig[:44]+`\n`+sig[44:]...), b[sigAt+88:]...),
		"sig after time":            moveMember(t, b, "sig"),
		"sig first":                 []byte(`{` + string(b[bytes.Index(b, []byte(`"sig":`)):sigAt+89]) + `,` + strings.Replace(string(b[1:]), `,"sig":"`+sig+`"`, "", 1)),
		"index with a leading zero": bytes.Replace(b, []byte(`"index":7`), []byte(`"index":07`), 1),
		"escaped principal":         bytes.Replace(b, []byte(`"agent-2"`), []byte(`"agent\u002d2"`), 1),
		"trailing space":            append(bytes.Clone(b), ' '),
	}
	for name, c := range cases {
		var both, refused, strictOnly int
		compareParsers(t, c, &both, &refused, &strictOnly)
		if want := name == "valid"; (both == 1) != want {
			t.Errorf("%s: accepted %v, want %v", name, both == 1, want)
		}
	}
}

// moveMember moves a member of b to the end of the object.
func moveMember(t testing.TB, b []byte, name string) []byte {
	at, end := memberSpan(b, name)
	if at < 1 {
		t.Fatalf("no member %q", name)
	}
	m := string(b[at:end])
	rest := string(b[:at-1]) + string(b[end:])
	return []byte(rest[:len(rest)-1] + "," + m + "}")
}

// jsonText draws JSON text near canonical attributes: mostly canonical,
// with spellings at the edges of plainCanonical's (escapes, non-ASCII,
// DEL, numbers of 15 and 16 digits, -0, leading zeros, fractions,
// whitespace, unsorted or repeated names, deep nesting).
func jsonText(t *rapid.T, depth int) string {
	leaves := []string{`0`, `-0`, `7`, `-7`, `07`, `1.5`, `1e2`, `999999999999999`, `-999999999999999`,
		`9999999999999999`, `9007199254740991`, `9007199254740992`, `true`, `false`, `null`, `nul`,
		`""`, `"a"`, `"a b"`, `"é"`, `"e` + "\u0301" + `"`, `"\u0041"`, `"\n"`, `"\\"`, `"\""`, "\"\x7f\"", "\"\x01\"",
		`"\u00e9"`, `"~"`, `" "`, `[]`, `{}`, ` 1`}
	if depth <= 0 || rapid.IntRange(0, 2).Draw(t, "leaf?") == 0 {
		return rapid.SampledFrom(leaves).Draw(t, "leaf")
	}
	n := rapid.IntRange(0, 3).Draw(t, "n")
	if rapid.Bool().Draw(t, "array?") {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = jsonText(t, depth-1)
		}
		return "[" + strings.Join(parts, rapid.SampledFrom([]string{",", ",", ",", ", "}).Draw(t, "sep")) + "]"
	}
	names := rapid.SliceOfN(rapid.SampledFrom([]string{"a", "b", "B", "ab", "a_b", "é", "~", "", " ", "\\u0061"}), n, n).Draw(t, "names")
	if rapid.IntRange(0, 3).Draw(t, "sorted?") > 0 {
		slices.Sort(names)
	}
	parts := make([]string, n)
	for i, name := range names {
		parts[i] = `"` + name + `":` + jsonText(t, depth-1)
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// plainCanonical says "canonical" only of attributes commit.Canonicalize
// (in attributesDomain) returns unchanged; and it says so of the plain
// ones, so that the fast path is taken.
func TestPlainCanonicalDifferential(t *testing.T) {
	var plain, other int
	rapid.Check(t, func(t *rapid.T) {
		text := "{" + `"k":` + jsonText(t, 4) + "}"
		if rapid.IntRange(0, 4).Draw(t, "whole?") == 0 {
			text = jsonText(t, 5)
		}
		canonical, err := attributesDomain.Canonicalize([]byte(text))
		isCanonical := err == nil && string(canonical) == text
		if plainCanonical([]byte(text)) {
			if !isCanonical {
				t.Fatalf("plainCanonical accepts %q; Canonicalize: %q, %v", text, canonical, err)
			}
			plain++
		} else {
			other++
		}
	})
	for depth, want := range map[int]bool{62: true, 63: true, 64: false} {
		if got := plainCanonical([]byte(nested(depth))); got != want {
			t.Errorf("attributes %d deep: plainCanonical = %v, want %v", depth, got, want)
		}
	}
	for _, text := range []string{`{}`, `{"a":[1,-2,true,false,null,"x y"],"b":{"c":{}}}`, `{"n":999999999999999}`} {
		if !plainCanonical([]byte(text)) {
			t.Errorf("plainCanonical refuses %s", text)
		}
	}
	// Each is left to Canonicalize: not canonical, outside the domain, or
	// canonical but not plain.
	for _, text := range []string{`{"a":1,"a":2}`, `{"k":{"b":1,"b":1}}`, `{"b":1,"a":2}`, `{"a":07}`, `{"a":-0}`,
		`{"a":1.5}`, `{"a":1e2}`, `{"a":9999999999999999}`, `{"a": 1}`, `{"a":"\u0041"}`, `{"a":"\n"}`,
		"{\"a\":\"\x7f\"}", `{"a":"é"}`, `{"é":1}`, `{"a":nul}`, `{"a":[1,]}`, `{"a":1,}`, `{"a"}`, `{"a":1}x`, `{"a":[1}`} {
		if plainCanonical([]byte(text)) {
			t.Errorf("plainCanonical accepts %s", text)
		}
	}
	t.Logf("plain %d, left to Canonicalize %d", plain, other)
	if plain == 0 || other == 0 {
		t.Errorf("the texts did not reach both cases: plain %d, other %d", plain, other)
	}
}
