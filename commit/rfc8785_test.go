package commit

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/gowebpki/jcs"
)

// rfc8785Vectors are the reference vectors of RFC 8785 (testdata/rfc8785,
// with their NOTICE). The strict domain refuses three of them by design;
// each refusal is named here with its reason.
var rfc8785Vectors = []struct {
	file string
	// Under the strict domain: either the expected output, or this refusal.
	kind    Kind
	pointer string
	key     bool
	// With AllowNonInteger, when the refusal differs.
	kindNonInteger Kind
}{
	{file: "arrays.json"},
	{file: "french.json"},
	{file: "structures.json"},
	// "A\u030a" is not NFC; RFC 8785 keeps it as is, we refuse it.
	{file: "unicode.json", kind: ErrNotNFC, pointer: "/Unnormalized Unicode", kindNonInteger: ErrNotNFC},
	// 333333333.33333329 has a fraction and its RFC 8785 form
	// 333333333.3333333 is another decimal value.
	{file: "values.json", kind: ErrNonInteger, pointer: "/numbers/0", kindNonInteger: ErrInexactNumber},
	// The name "\ufb33" is a composition exclusion: its NFC form is
	// U+05D3 U+05BC.
	{file: "weird.json", kind: ErrNotNFC, pointer: "", key: true, kindNonInteger: ErrNotNFC},
}

func readVector(t *testing.T, file string) (input, output []byte) {
	t.Helper()
	input, err := os.ReadFile(filepath.Join("../testdata/rfc8785/input", file))
	if err != nil {
		t.Fatal(err)
	}
	output, err = os.ReadFile(filepath.Join("../testdata/rfc8785/output", file))
	if err != nil {
		t.Fatal(err)
	}
	return input, output
}

// TestRFC8785Writer holds the canonical writer to every reference vector,
// with the domain's Unicode and number rules set aside.
func TestRFC8785Writer(t *testing.T) {
	for _, v := range rfc8785Vectors {
		t.Run(v.file, func(t *testing.T) {
			input, want := readVector(t, v.file)
			p := parser{data: input, rfc8785: true}
			n, err := p.parseDocument()
			if err != nil {
				t.Fatal(err)
			}
			if got := appendCanonical(nil, &n); !bytes.Equal(got, want) {
				t.Errorf("got  %q\nwant %q", got, want)
			}
		})
	}
}

// TestRFC8785Library guards the pinned reference library: jcs v1.0.1
// corrupted some inputs, and the differential tests trust this one.
func TestRFC8785Library(t *testing.T) {
	for _, v := range rfc8785Vectors {
		input, want := readVector(t, v.file)
		if got, err := jcs.Transform(input); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: jcs.Transform = %q, %v; want %q", v.file, got, err, want)
		}
	}
}

// TestRFC8785Strict runs the vectors through the strict domain: each is
// canonicalized exactly as the RFC says or refused as listed.
func TestRFC8785Strict(t *testing.T) {
	for _, v := range rfc8785Vectors {
		for _, d := range []Domain{{}, {AllowNonInteger: true}} {
			input, want := readVector(t, v.file)
			got, err := d.Canonicalize(input)
			kind := v.kind
			if d.AllowNonInteger {
				kind = v.kindNonInteger
			}
			if kind == "" {
				if err != nil || !bytes.Equal(got, want) {
					t.Errorf("%s (%+v): got %q, %v; want %q", v.file, d, got, err, want)
				}
				continue
			}
			var de *DomainError
			if !errors.As(err, &de) || de.Kind != kind || de.Pointer != v.pointer || de.Key != v.key {
				t.Errorf("%s (%+v): got %v; want %s at %q (key %v)", v.file, d, err, kind, v.pointer, v.key)
			}
		}
	}
}
