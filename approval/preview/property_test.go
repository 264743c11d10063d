package preview

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/decisionledger/ledger/commit"
	"golang.org/x/text/unicode/norm"
	"pgregory.net/rapid"
)

// genValue draws a JSON value in commit's default domain as a Go value:
// nested objects and arrays, long strings, credential-like names and
// values, large lists.
func genValue(t *rapid.T, depth int) any {
	kinds := 8
	if depth >= 9 {
		kinds = 5
	}
	switch rapid.IntRange(0, kinds-1).Draw(t, "kind") {
	case 0:
		return nil
	case 1:
		return rapid.Bool().Draw(t, "bool")
	case 2:
		return rapid.Int64Range(-commit.MaxSafeInteger, commit.MaxSafeInteger).Draw(t, "int")
	case 3:
		return genString(t, "string")
	case 4:
		return strings.Repeat(genString(t, "unit"), rapid.IntRange(0, 1500).Draw(t, "repeat"))
	case 5:
		n := rapid.IntRange(0, 60>>depth).Draw(t, "len")
		a := make([]any, n)
		for i := range a {
			a[i] = genValue(t, depth+1)
		}
		return a
	default:
		n := rapid.IntRange(0, 110>>depth).Draw(t, "members")
		m := make(map[string]any, n)
		for range n {
			m[genString(t, "name")] = genValue(t, depth+1)
		}
		return m
	}
}

var fragments = []string{
	"password", "token", "author", "…", "[REDACTED]", "Bearer ", "Basic dXNlcjpwYXNz",
	"AKIAIOSFODNN7EXAMPLE", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.x", "https://u:p@h/",
	"-----BEGIN PRIVATE KEY-----", "9fQx2LmZ7pW4vK8sT1yB3nR6cH0dJ5gA", "e\u0301", "\u0301",
	"한", "\u1100\u1161", "😂", "\x00", "\"", "\\",
}

// genString draws NFC text from fragments and random runes.
func genString(t *rapid.T, label string) string {
	pieces := rapid.SliceOfN(rapid.OneOf(
		rapid.SampledFrom(fragments),
		rapid.StringOfN(rapid.Rune(), 0, 3, -1),
		rapid.StringOfN(rapid.RuneFrom([]rune("aAzZ09_-+=/:@. ")), 0, 40, -1),
	), 0, 6).Draw(t, label)
	return norm.NFC.String(strings.Join(pieces, ""))
}

// Every accepted document gives canonical JSON, NFC, within the ceiling,
// the same bytes twice, and a digest over the domain separator.
func TestRenderProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		doc, err := commit.CanonicalizeValue(genValue(t, 0))
		if err != nil {
			t.Skip(err)
		}
		if len(doc) > MaxInputBytes {
			t.Skip("too large")
		}
		p, err := Render(doc)
		if err != nil {
			t.Fatalf("refused a document in the domain: %v", err)
		}
		checkPreview(t, p)
		q, _ := Render(doc)
		if !bytes.Equal(p.JSON, q.JSON) {
			t.Fatal("not deterministic")
		}
		// No string or member name of a preview has a credential shape,
		// and no member that a name rule covers holds anything but Marker.
		var v any
		if err := json.Unmarshal(p.JSON, &v); err != nil {
			t.Fatal(err)
		}
		noShapes(t, v)
	})
}

func noShapes(t *rapid.T, v any) {
	switch v := v.(type) {
	case string:
		if secretShaped(v) {
			t.Fatalf("credential shape left in %q", v)
		}
	case []any:
		for _, e := range v {
			noShapes(t, e)
		}
	case map[string]any:
		for k, e := range v {
			if secretShaped(k) {
				t.Fatalf("credential shape left in name %q", k)
			}
			if sensitiveName(k) && e != Marker {
				t.Fatalf("member %q holds %v", k, e)
			}
			noShapes(t, e)
		}
	}
}

func FuzzRender(f *testing.F) {
	for _, s := range []string{
		`{"password":"hunter2","user":"alice"}`,
		`{"note":"Bearer abcdefghijklmnop1234 AKIAIOSFODNN7EXAMPLE"}`,
		`[[[[[[[[[[1]]]]]]]]]]`,
		`"` + strings.Repeat("é", 1200) + `"`,
		`{"…":1,"a":[1,2,3]}`,
		`{"AKIAIOSFODNN7EXAMPLE":{"x":1}}`,
		`{"a":1.5}`,
		"\"\xff\"",
		bigDocument(),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		p, err := Render(doc)
		if err != nil {
			var ie *InputError
			if !errors.As(err, &ie) {
				t.Fatalf("refusal %T: %v", err, err)
			}
			if _, cerr := commit.Canonicalize(doc); cerr == nil && len(doc) <= MaxInputBytes {
				t.Fatalf("refused a document commit accepts: %v", err)
			}
			return
		}
		checkPreview(t, p)
		q, _ := Render(doc)
		if !bytes.Equal(p.JSON, q.JSON) {
			t.Fatal("not deterministic")
		}
	})
}
