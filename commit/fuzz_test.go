package commit

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/gowebpki/jcs"
)

// addSeeds seeds a fuzz target with the equivalence corpus, the RFC 8785
// vectors and the benchmark input.
func addSeeds(f *testing.F) {
	f.Helper()
	rows := readCorpus(f, "../testdata/commit/equivalence.txt")
	for _, row := range rows {
		for _, in := range row.inputs {
			f.Add(in)
		}
	}
	inputs, _ := filepath.Glob("../testdata/rfc8785/input/*.json")
	inputs = append(inputs, "../testdata/commit/params-1k.json")
	for _, name := range inputs {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// FuzzCanonicalize: no input panics; every refusal is a *DomainError
// pointing inside the input; every accepted input gives exactly the bytes
// of the reference library (differential), and the canonical form is a
// fixed point with the same commitment.
func FuzzCanonicalize(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, d := range []Domain{{}, {AllowNonInteger: true}} {
			canonical, err := d.Canonicalize(data)
			if err != nil {
				var de *DomainError
				if !errors.As(err, &de) {
					t.Fatalf("%+v: refusal is %T, not *DomainError: %v", d, err, err)
				}
				if de.Offset < 0 || de.Offset > len(data) {
					t.Fatalf("%+v: offset %d outside input of %d bytes", d, de.Offset, len(data))
				}
				continue
			}
			reference, err := jcs.Transform(data)
			if err != nil {
				t.Fatalf("%+v: accepted %q, which jcs.Transform refuses: %v", d, data, err)
			}
			if !bytes.Equal(canonical, reference) {
				t.Fatalf("%+v: %q canonicalizes to %q, jcs.Transform gives %q", d, data, canonical, reference)
			}
			again, err := d.Canonicalize(canonical)
			if err != nil || !bytes.Equal(again, canonical) {
				t.Fatalf("%+v: not a fixed point: %q -> %q, %v", d, canonical, again, err)
			}
			c1, err1 := d.Params(data)
			c2, err2 := d.Params(canonical)
			if (err1 == nil) != (err2 == nil) || !c1.Equal(c2) {
				t.Fatalf("%+v: commitment changed by canonicalization: %v %v / %v %v", d, c1, err1, c2, err2)
			}
			if err1 == nil && c1.Size != len(canonical) {
				t.Fatalf("size %d, canonical form %d bytes", c1.Size, len(canonical))
			}
		}
	})
}

// FuzzNormalizeNFC: whatever NormalizeNFC accepts, the strict domain
// accepts unchanged.
func FuzzNormalizeNFC(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		normalized, err := NormalizeNFC(data)
		if err != nil {
			return
		}
		canonical, err := Canonicalize(normalized)
		if err != nil || !bytes.Equal(canonical, normalized) {
			t.Fatalf("NormalizeNFC(%q) = %q, which Canonicalize gives as %q, %v", data, normalized, canonical, err)
		}
	})
}

// FuzzParseDigest: a digest parses only from its one text form.
func FuzzParseDigest(f *testing.F) {
	f.Add("sha256:7c1b13beed0c4dbb8c067616c299cf629f3b9af228026f76eea02c1c00c9634f")
	f.Add("sha256:7C1B13BEED0C4DBB8C067616C299CF629F3B9AF228026F76EEA02C1C00C9634F")
	f.Add("SHA256:7c1b13beed0c4dbb8c067616c299cf629f3b9af228026f76eea02c1c00c9634f")
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDigest(s)
		if err != nil {
			return
		}
		if d.String() != s {
			t.Fatalf("ParseDigest(%q) round-trips to %q", s, d.String())
		}
	})
}
