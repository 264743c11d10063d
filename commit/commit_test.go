package commit

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
)

func TestParamsValueMatchesText(t *testing.T) {
	text := `{"amount_minor":1250000,"currency":"EUR","to":["a@example.com","b@example.org"],"meta":{"retry":3,"urgent":false,"note":null}}`
	want, err := Params([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	values := []any{
		map[string]any{
			"amount_minor": 1250000, "currency": "EUR",
			"to":   []string{"a@example.com", "b@example.org"},
			"meta": map[string]any{"retry": uint8(3), "urgent": false, "note": nil},
		},
		map[string]any{
			"amount_minor": json.Number("1.25e6"), "currency": "EUR",
			"to":   [2]any{"a@example.com", "b@example.org"},
			"meta": map[string]any{"retry": 3.0, "urgent": false, "note": map[string]int(nil)},
		},
	}
	for i, v := range values {
		got, err := ParamsValue(v)
		if err != nil {
			t.Fatalf("value %d: %v", i, err)
		}
		if !got.Equal(want) {
			t.Errorf("value %d: %s, text gives %s", i, got.Digest, want.Digest)
		}
	}
}

func TestValueRefusals(t *testing.T) {
	type point struct{ X int }
	x := 1
	cases := []struct {
		name    string
		v       any
		domain  Domain
		kind    Kind
		pointer string
		key     bool
	}{
		{"struct", map[string]any{"p": point{1}}, Domain{}, ErrUnsupportedType, "/p", false},
		{"pointer", map[string]any{"p": &x}, Domain{}, ErrUnsupportedType, "/p", false},
		{"bytes", map[string]any{"b": []byte("raw")}, Domain{}, ErrUnsupportedType, "/b", false},
		{"int-keys", map[string]any{"m": map[int]string{1: "a"}}, Domain{}, ErrUnsupportedType, "/m", false},
		{"fraction", map[string]any{"f": 0.5}, Domain{}, ErrNonInteger, "/f", false},
		{"nan", map[string]any{"f": math.NaN()}, Domain{AllowNonInteger: true}, ErrNonFinite, "/f", false},
		{"inf", map[string]any{"l": []any{math.Inf(-1)}}, Domain{}, ErrNonFinite, "/l/0", false},
		{"big-float", map[string]any{"f": 1e16}, Domain{AllowNonInteger: true}, ErrIntegerRange, "/f", false},
		{"big-int", map[string]any{"n": int64(1 << 53)}, Domain{}, ErrIntegerRange, "/n", false},
		{"big-uint", map[string]any{"n": uint64(1 << 60)}, Domain{}, ErrIntegerRange, "/n", false},
		{"invalid-utf8", map[string]any{"s": "x\xff"}, Domain{}, ErrInvalidUTF8, "/s", false},
		{"invalid-utf8-name", map[string]any{"\xff": 1}, Domain{}, ErrInvalidUTF8, "", true},
		{"not-nfc", map[string]any{"a/b": []any{"e\u0301"}}, Domain{}, ErrNotNFC, "/a~1b/0", false},
		{"number-syntax", map[string]any{"n": json.Number("0x10")}, Domain{}, ErrSyntax, "/n", false},
		{"number-trailing", map[string]any{"n": json.Number("1 ")}, Domain{}, ErrSyntax, "/n", false},
		{"number-empty", map[string]any{"n": json.Number("")}, Domain{}, ErrSyntax, "/n", false},
		{"number-fraction", map[string]any{"n": json.Number("1.5")}, Domain{}, ErrNonInteger, "/n", false},
		{"not-object", []any{1}, Domain{}, ErrNotObject, "", false},
		{"too-deep", map[string]any{"a": []any{[]any{}}}, Domain{MaxDepth: 2}, ErrTooDeep, "/a/0", false},
		{"too-large", map[string]any{"s": strings.Repeat("x", 40)}, Domain{MaxBytes: 32}, ErrTooLarge, "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.domain.ParamsValue(c.v)
			var de *DomainError
			if !errors.As(err, &de) || de.Kind != c.kind || de.Pointer != c.pointer || de.Key != c.key || de.Offset != -1 {
				t.Fatalf("got %v, want %s at %q key %v", err, c.kind, c.pointer, c.key)
			}
		})
	}
}

func TestValueAdmitsNonInteger(t *testing.T) {
	got, err := Domain{AllowNonInteger: true}.CanonicalizeValue(map[string]any{"r": 0.1, "s": float32(0.5), "t": 1e-7})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"r":0.1,"s":0.5,"t":1e-7}`; string(got) != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// A cyclic value cannot recurse forever: the depth bound stops it.
func TestValueCycle(t *testing.T) {
	m := map[string]any{}
	m["self"] = m
	if _, err := ParamsValue(m); !errors.Is(err, ErrTooDeep) {
		t.Fatalf("got %v, want too_deep", err)
	}
}

func TestDefaultBounds(t *testing.T) {
	nest := func(n int) []byte {
		return []byte(`{"a":` + strings.Repeat("[", n-1) + strings.Repeat("]", n-1) + `}`)
	}
	if _, err := Params(nest(DefaultMaxDepth)); err != nil {
		t.Errorf("depth %d: %v", DefaultMaxDepth, err)
	}
	if _, err := Params(nest(DefaultMaxDepth + 1)); !errors.Is(err, ErrTooDeep) {
		t.Errorf("depth %d: got %v, want too_deep", DefaultMaxDepth+1, err)
	}
	// Deep enough to overflow a stack without the bound.
	if _, err := Params(nest(DefaultMaxBytes/2 - 8)); !errors.Is(err, ErrTooDeep) {
		t.Errorf("very deep: got %v", err)
	}
	fill := func(n int) []byte {
		prefix, suffix := `{"s":"`, `"}`
		return []byte(prefix + strings.Repeat("x", n-len(prefix)-len(suffix)) + suffix)
	}
	if _, err := Params(fill(DefaultMaxBytes)); err != nil {
		t.Errorf("%d bytes: %v", DefaultMaxBytes, err)
	}
	if _, err := Params(fill(DefaultMaxBytes + 1)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("%d bytes: got %v, want too_large", DefaultMaxBytes+1, err)
	}
}

// Refusals name the kind and the place, never the value: a secret in the
// refused input must not reach the error text, whatever the fault.
func TestErrorsCarryNoValue(t *testing.T) {
	const secret = "hunter2-payee-4242"
	inputs := []string{
		`{"memo":"` + secret + `\ud800"}`,
		`{"memo":"` + secret + "\xff" + `"}`,
		`{"memo":"` + secret + "e\u0301" + `"}`,
		`{"memo":"` + secret + `\q"}`,
		`{"memo":"` + secret + "\t" + `"}`,
		`{"memo":"` + secret + `"` + secret + `}`,
		`{"memo":` + secret + `}`,
		`{"memo":"` + secret + `", "n": 1.5}`,
		`{"n":` + strings.Repeat("9", 30) + `, "memo":"` + secret + `"}`,
		`["` + secret + `"]`,
	}
	for _, in := range inputs {
		_, err := Params([]byte(in))
		if err == nil {
			t.Fatalf("%q accepted", in)
		}
		if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "999") {
			t.Errorf("error for %q repeats the value: %v", in, err)
		}
	}
	_, err := ParamsValue(map[string]any{"memo": secret + "\xff"})
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("value error repeats the value: %v", err)
	}
}

func TestErrorText(t *testing.T) {
	_, err := Params([]byte(`{"to":[{"a~b/c":1,"a~b/c":2}]}`))
	const want = `commit: duplicate_key at "/to/0/a~0b~1c" (byte 18)`
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
	_, err = Params([]byte(`{"o":{"e` + "\u0301" + `":1}}`))
	const wantKey = `commit: not_nfc in a member name of the object at "/o" (byte 6)`
	if err == nil || err.Error() != wantKey {
		t.Errorf("got %v, want %s", err, wantKey)
	}
}

func TestNormalizeNFC(t *testing.T) {
	got, err := NormalizeNFC([]byte(`{"e\u0301":"A\u030a","x":"\ufb33"}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := "{\"x\":\"\u05d3\u05bc\",\"\u00e9\":\"\u00c5\"}"; string(got) != want {
		t.Errorf("got %q, want %q", got, want)
	}
	// Two names that are the same text once normalized are a duplicate.
	if _, err := NormalizeNFC([]byte(`{"\u00e9":1,"e\u0301":2}`)); !errors.Is(err, ErrDuplicateKey) {
		t.Errorf("got %v, want duplicate_key", err)
	}
	// Everything else stays strict.
	if _, err := NormalizeNFC([]byte(`{"n":1.5}`)); !errors.Is(err, ErrNonInteger) {
		t.Errorf("got %v, want non_integer", err)
	}
}

func TestDigestText(t *testing.T) {
	const s = "sha256:7c1b13beed0c4dbb8c067616c299cf629f3b9af228026f76eea02c1c00c9634f"
	d, err := ParseDigest(s)
	if err != nil {
		t.Fatal(err)
	}
	if d.String() != s {
		t.Errorf("round trip: %s", d)
	}
	c, err := Params([]byte(`{"b":2,"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if !c.Digest.Equal(d) || c.Size != len(`{"a":1,"b":2}`) {
		t.Errorf("got %s size %d", c.Digest, c.Size)
	}
	var other Digest
	other[31] = 1
	if d.Equal(other) || c.Equal(Commitment{Digest: d, Size: c.Size + 1}) {
		t.Error("Equal reports different digests or sizes as equal")
	}
	for _, bad := range []string{
		"",
		"sha256:",
		strings.ToUpper(s),
		"SHA256:" + s[7:],
		"sha512:" + s[7:],
		s[:len(s)-1],
		s + "0",
		" " + s,
		s[:20] + "g" + s[21:],
		s[:20] + "A" + s[21:],
		"sha256=" + s[7:],
	} {
		if _, err := ParseDigest(bad); !errors.Is(err, errMalformedDigest) {
			t.Errorf("ParseDigest(%q) = %v, want malformed", bad, err)
		}
	}
	var u Digest
	if err := json.Unmarshal([]byte(`"`+s+`"`), &u); err != nil || !u.Equal(d) {
		t.Errorf("json round trip: %v", err)
	}
	out, _ := json.Marshal(d)
	if string(out) != `"`+s+`"` {
		t.Errorf("json: %s", out)
	}
}

func TestCompareUTF16(t *testing.T) {
	// In UTF-16 order: "a" < "ab" < U+007F < U+00E9 < U+1F602 (D83D DE02) < U+E000 < U+FFFD.
	order := []string{"", "a", "ab", "\x7f", "\u00e9", "\U0001F602", "\U0001F603", "\ue000", "\ufffd"}
	for i := range order {
		for j := range order {
			got := compareUTF16([]byte(order[i]), []byte(order[j]))
			if (i < j) != (got < 0) || (i == j) != (got == 0) {
				t.Errorf("compareUTF16(%q, %q) = %d", order[i], order[j], got)
			}
		}
	}
}
