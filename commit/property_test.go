package commit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf16"

	"github.com/gowebpki/jcs"
	"golang.org/x/text/unicode/norm"
	"pgregory.net/rapid"
)

// genValue draws a JSON value inside the default domain, as the Go value
// that CanonicalizeValue accepts: map[string]any, []any, string (NFC),
// int64 (safe), bool, nil.
func genValue(t *rapid.T, depth int) any {
	kinds := 7
	if depth >= 4 {
		kinds = 5 // scalars only
	}
	switch rapid.IntRange(0, kinds-1).Draw(t, "kind") {
	case 0:
		return nil
	case 1:
		return rapid.Bool().Draw(t, "bool")
	case 2:
		return rapid.Int64Range(-MaxSafeInteger, MaxSafeInteger).Draw(t, "int")
	case 3:
		return rapid.Int64Range(-1000, 1000).Draw(t, "small")
	case 4:
		return genString(t, "string")
	case 5:
		n := rapid.IntRange(0, 4).Draw(t, "len")
		a := make([]any, n)
		for i := range a {
			a[i] = genValue(t, depth+1)
		}
		return a
	default:
		n := rapid.IntRange(0, 5).Draw(t, "members")
		m := make(map[string]any, n)
		for range n {
			m[genString(t, "name")] = genValue(t, depth+1)
		}
		return m
	}
}

// genString draws an NFC string mixing ASCII, control characters, BMP and
// supplementary characters, without the code points the domain refuses
// in any form (unstableNormalization; TestUnstableNormalizationRefused).
func genString(t *rapid.T, label string) string {
	s := rapid.StringOf(rapid.OneOf(
		rapid.RuneFrom(nil, unicodeRanges...),
		rapid.RuneFrom([]rune("aAzZ09 \"\\/\b\f\n\r\t\x00\x1f\x7fé😂\ue000\u2028")),
	)).Draw(t, label)
	s = strings.Map(func(r rune) rune {
		if unicode.Is(unstableNormalization, r) {
			return -1
		}
		return r
	}, s)
	return norm.NFC.String(s)
}

// unicodeRanges mix scripts, combining marks (which NFC composes),
// supplementary symbols and private-use characters (U+E000 and above sort
// after supplementary characters in UTF-16 order).
var unicodeRanges = []*unicode.RangeTable{unicode.Latin, unicode.Greek, unicode.Han, unicode.Mn, unicode.So, unicode.Co}

// genObject draws a parameter object (the top level of parameters).
func genObject(t *rapid.T) map[string]any {
	n := rapid.IntRange(0, 6).Draw(t, "top")
	m := make(map[string]any, n)
	for range n {
		m[genString(t, "name")] = genValue(t, 1)
	}
	return m
}

// spell writes v as JSON text with random member order, whitespace, string
// escapes and number spellings: every spelling the domain must treat as the
// same value.
func spell(t *rapid.T, b *strings.Builder, v any) {
	space := func() {
		b.WriteString(rapid.SampledFrom([]string{"", "", " ", "\n", "\t", "\r\n  "}).Draw(t, "ws"))
	}
	space()
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case int64:
		b.WriteString(spellInteger(t, v))
	case string:
		spellString(t, b, v)
	case []any:
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			spell(t, b, e)
		}
		space()
		b.WriteByte(']')
	case map[string]any:
		names := make([]string, 0, len(v))
		for name := range v {
			names = append(names, name)
		}
		// Map order is random but not drawn: permute under rapid's control.
		sortStrings(names)
		perm := rapid.Permutation(names).Draw(t, "order")
		b.WriteByte('{')
		for i, name := range perm {
			if i > 0 {
				b.WriteByte(',')
			}
			space()
			spellString(t, b, name)
			space()
			b.WriteByte(':')
			spell(t, b, v[name])
		}
		space()
		b.WriteByte('}')
	default:
		t.Fatalf("spell: unexpected %T", v)
	}
	space()
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// spellInteger writes v in one of its many JSON spellings: 1200, 1200.00,
// 12e2, 1.2E+3, 120000e-2.
func spellInteger(t *rapid.T, v int64) string {
	sign := ""
	if v < 0 {
		sign = "-"
		v = -v
	}
	digits := strconv.FormatInt(v, 10)
	trailing := len(digits) - len(strings.TrimRight(digits, "0"))
	switch rapid.IntRange(0, 4).Draw(t, "spelling") {
	case 0:
		return sign + digits
	case 1:
		return sign + digits + "." + strings.Repeat("0", rapid.IntRange(1, 3).Draw(t, "zeros"))
	case 2:
		k := rapid.IntRange(1, 3).Draw(t, "shift")
		if v == 0 {
			return sign + "0e-" + strconv.Itoa(k)
		}
		return sign + digits + strings.Repeat("0", k) + "e-" + strconv.Itoa(k)
	case 3:
		if v == 0 {
			return sign + "0e5"
		}
		k := rapid.IntRange(0, trailing).Draw(t, "strip")
		e := rapid.SampledFrom([]string{"e", "E", "e+", "E+0"}).Draw(t, "exp")
		return sign + digits[:len(digits)-k] + e + strconv.Itoa(k)
	default:
		if v == 0 {
			return sign + "0.0"
		}
		// d.ddd × 10^(n-1)
		mant := digits[:1]
		if rest := strings.TrimRight(digits[1:], "0"); rest != "" {
			mant += "." + rest
		}
		return sign + mant + "e" + strconv.Itoa(len(digits)-1)
	}
}

// spellString writes s with each character either as itself (where JSON
// allows) or as an escape.
func spellString(t *rapid.T, b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		mustEscape := r < 0x20 || r == '"' || r == '\\'
		if !mustEscape && !rapid.Bool().Draw(t, "escape") {
			b.WriteRune(r)
			continue
		}
		short := map[rune]string{'"': `\"`, '\\': `\\`, '\b': `\b`, '\f': `\f`, '\n': `\n`, '\r': `\r`, '\t': `\t`, '/': `\/`}
		if e, ok := short[r]; ok && rapid.Bool().Draw(t, "short") {
			b.WriteString(e)
			continue
		}
		format := rapid.SampledFrom([]string{`\u%04x`, `\u%04X`}).Draw(t, "hex")
		if r >= 0x10000 {
			hi, lo := utf16.EncodeRune(r)
			fmt.Fprintf(b, format+format, hi, lo)
		} else {
			fmt.Fprintf(b, format, r)
		}
	}
	b.WriteByte('"')
}

// TestPropertySpellingKeepsDigest: any key order, whitespace, escapes and
// number spelling give the digest of the value itself, the Go-value API
// agrees with the JSON-text API, the canonical form is what the reference
// library produces, and the canonical form is a fixed point.
func TestPropertySpellingKeepsDigest(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v := genObject(t)
		want, err := ParamsValue(v)
		if err != nil {
			t.Fatalf("ParamsValue: %v", err)
		}
		wantCanonical, err := CanonicalizeValue(v)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		spell(t, &b, v)
		text := []byte(b.String())

		got, err := Params(text)
		if err != nil {
			t.Fatalf("Params(%q): %v", text, err)
		}
		if !got.Equal(want) {
			t.Fatalf("spelling %q: digest %s, value gives %s", text, got.Digest, want.Digest)
		}
		canonical, err := Canonicalize(text)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(canonical, wantCanonical) {
			t.Fatalf("canonical %q, value gives %q", canonical, wantCanonical)
		}
		reference, err := jcs.Transform(text)
		if err != nil {
			t.Fatalf("jcs.Transform(%q): %v", text, err)
		}
		if !bytes.Equal(canonical, reference) {
			t.Fatalf("canonical %q, jcs.Transform gives %q", canonical, reference)
		}
		again, err := Canonicalize(canonical)
		if err != nil || !bytes.Equal(again, canonical) {
			t.Fatalf("canonical form is not a fixed point: %q -> %q, %v", canonical, again, err)
		}
	})
}

// leafPaths lists the paths to every scalar in v.
func leafPaths(v any, path []any, out *[][]any) {
	switch v := v.(type) {
	case map[string]any:
		for name, e := range v {
			leafPaths(e, append(append([]any{}, path...), name), out)
		}
	case []any:
		for i, e := range v {
			leafPaths(e, append(append([]any{}, path...), i), out)
		}
	default:
		*out = append(*out, path)
	}
}

// replaceAt returns a deep copy of v with the value at path replaced.
func replaceAt(v any, path []any, leaf any) any {
	if len(path) == 0 {
		return leaf
	}
	switch v := v.(type) {
	case map[string]any:
		c := make(map[string]any, len(v))
		for k, e := range v {
			c[k] = e
		}
		c[path[0].(string)] = replaceAt(v[path[0].(string)], path[1:], leaf)
		return c
	case []any:
		c := append([]any{}, v...)
		c[path[0].(int)] = replaceAt(v[path[0].(int)], path[1:], leaf)
		return c
	}
	panic("replaceAt: path leaves the value")
}

func getAt(v any, path []any) any {
	for _, step := range path {
		switch s := step.(type) {
		case string:
			v = v.(map[string]any)[s]
		case int:
			v = v.([]any)[s]
		}
	}
	return v
}

// TestPropertyLeafChangeChangesDigest: replacing any scalar with a
// different one (another value or another type) changes the digest.
func TestPropertyLeafChangeChangesDigest(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v := genObject(t)
		var paths [][]any
		leafPaths(v, nil, &paths)
		if len(paths) == 0 {
			t.Skip("no leaves")
		}
		path := rapid.SampledFrom(paths).Draw(t, "path")
		old := getAt(v, path)
		leaf := genValue(t, 4)
		if reflect.DeepEqual(old, leaf) {
			t.Skip("same leaf drawn")
		}
		before, err := ParamsValue(v)
		if err != nil {
			t.Fatal(err)
		}
		after, err := ParamsValue(replaceAt(v, path, leaf))
		if err != nil {
			t.Fatal(err)
		}
		if before.Digest.Equal(after.Digest) {
			t.Fatalf("changing %v from %#v to %#v kept digest %s", path, old, leaf, before.Digest)
		}
	})
}

// TestPropertyCanonicalFixedPoint: the canonical form of any accepted
// value canonicalizes to itself and its commitment is unchanged.
func TestPropertyCanonicalFixedPoint(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v := genValue(t, 0)
		canonical, err := CanonicalizeValue(v)
		if err != nil {
			t.Fatal(err)
		}
		again, err := Canonicalize(canonical)
		if err != nil || !bytes.Equal(again, canonical) {
			t.Fatalf("%q -> %q, %v", canonical, again, err)
		}
	})
}

// TestPropertyAnyIsTheCanonicalTextDecoded holds Object.Any, which the
// server hands the schema check and the policies instead of parsing the
// attributes again, to what encoding/json makes of their canonical form
// with UseNumber, for every spelling of every value.
func TestPropertyAnyIsTheCanonicalTextDecoded(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v := genObject(t)
		var b strings.Builder
		spell(t, &b, v)
		obj, err := Domain{}.Object([]byte(b.String()))
		if err != nil {
			t.Fatal(err)
		}
		canonical, err := CanonicalizeValue(v)
		if err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(bytes.NewReader(canonical))
		dec.UseNumber()
		var want any
		if err := dec.Decode(&want); err != nil {
			t.Fatal(err)
		}
		if got := obj.Any(); !reflect.DeepEqual(any(got), want) {
			t.Fatalf("Any of %q = %#v, want %#v", b.String(), got, want)
		}
		for name, w := range want.(map[string]any) {
			if m, _ := obj.Get(name); !reflect.DeepEqual(m.Any(), w) {
				t.Fatalf("member %q: Any = %#v, want %#v", name, m.Any(), w)
			}
		}
	})
}

// TestPropertyCanonicalLen: canonicalLen is the length of the canonical
// form, for every value spelled every way and for each member's value, so
// that Value.Canonical allocates it once, exactly; strings with every
// escape included.
func TestPropertyCanonicalLen(t *testing.T) {
	check := func(t *rapid.T, v Value) {
		c := v.Canonical()
		if n := len(appendCanonical(nil, v.n)); len(c) != n || cap(c) != n {
			t.Fatalf("Canonical %q: length %d, capacity %d, want %d", c, len(c), cap(c), n)
		}
	}
	escapes := rapid.SampledFrom([]string{`"`, `\`, "\b", "\f", "\n", "\r", "\t", "\x00", "\x01", "\x1f", "\x7f", "é", "a"})
	rapid.Check(t, func(t *rapid.T) {
		v := genObject(t)
		if rapid.Bool().Draw(t, "escapes") {
			v["escaped"] = strings.Join(rapid.SliceOf(escapes).Draw(t, "escaped"), "")
		}
		var b strings.Builder
		spell(t, &b, v)
		obj, err := Domain{}.Object([]byte(b.String()))
		if err != nil {
			t.Fatal(err)
		}
		check(t, Value{&node{kind: kindObject, members: obj.members}})
		for i := range obj.Len() {
			m, _ := obj.Get(obj.Name(i))
			check(t, m)
		}
	})
}

// Value.Canonical allocates its result and nothing else.
func TestCanonicalAllocatesOnce(t *testing.T) {
	obj, err := Domain{}.Object([]byte(`{"a":{"amount_minor":123456789,"currency":"EUR","memo":"line\nbreak \"quoted\"","recipient":{"domain":"example.com"},"tags":["x","y",true,null]}}`))
	if err != nil {
		t.Fatal(err)
	}
	v, _ := obj.Get("a")
	if n := testing.AllocsPerRun(100, func() { v.Canonical() }); n != 1 {
		t.Errorf("Canonical allocates %v times, want 1", n)
	}
}
