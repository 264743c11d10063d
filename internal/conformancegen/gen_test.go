package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"flag"
	"testing"

	"github.com/decisionledger/ledger/commit"
	"github.com/gowebpki/jcs"
)

var (
	n    = flag.Int("differential.n", 10000, "how many texts TestGenerator makes")
	seed = flag.Uint64("differential.seed", 1, "the seed TestGenerator uses")
)

// TestGenerator runs the generator as CI does (10,000 texts, seed 1; more
// with -differential.n), and holds it to three things: it is
// deterministic (two runs write the same bytes, and text i alone is line
// i), it reaches every refusal of JSON text and accepts a good share, and
// on every text it accepts package commit agrees with gowebpki/jcs, the
// RFC 8785 library, byte for byte.
func TestGenerator(t *testing.T) {
	var a, b bytes.Buffer
	if err := Write(&a, *seed, *n); err != nil {
		t.Fatal(err)
	}
	if err := Write(&b, *seed, *n); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("two runs with one seed differ")
	}
	lines := bytes.Split(bytes.TrimSuffix(a.Bytes(), []byte("\n")), []byte("\n"))
	if len(lines) != *n {
		t.Fatalf("%d lines, want %d", len(lines), *n)
	}
	counts := map[string]int{}
	for i, line := range lines {
		l := Generate(*seed, i)
		if again, err := json.Marshal(l); err != nil || !bytes.Equal(again, line) {
			t.Fatalf("text %d alone is not line %d", i, i)
		}
		if l.Refusal != "" {
			counts[l.Refusal]++
			continue
		}
		counts["accepted"]++
		d := commit.Domain{AllowNonInteger: l.AllowNonInteger}
		canonical, err := d.Canonicalize(l.Input)
		if err != nil {
			t.Fatalf("text %d: Params accepted it, Canonicalize: %v", i, err)
		}
		if got := sha256.Sum256(append([]byte(commit.ParamsDomainSeparator), canonical...)); commit.Digest(got).String() != l.Digest || len(canonical) != l.Size {
			t.Fatalf("text %d: digest %s size %d, canonical form gives %x and %d", i, l.Digest, l.Size, got, len(canonical))
		}
		ref, err := jcs.Transform(l.Input)
		if err != nil {
			t.Fatalf("text %d (%q): commit accepts it, jcs.Transform: %v", i, l.Input, err)
		}
		if !bytes.Equal(ref, canonical) {
			t.Fatalf("text %d (%q): commit writes %q, jcs.Transform %q", i, l.Input, canonical, ref)
		}
	}
	t.Logf("seed %d, %d texts: %v", *seed, *n, counts)
	if *n < 10000 {
		return
	}
	for _, k := range []commit.Kind{commit.ErrSyntax, commit.ErrInvalidUTF8, commit.ErrLoneSurrogate, commit.ErrDuplicateKey,
		commit.ErrUnstableNormalization, commit.ErrNotNFC, commit.ErrIntegerRange, commit.ErrNonInteger, commit.ErrInexactNumber, commit.ErrTooDeep, commit.ErrNotObject} {
		if counts[string(k)] < *n/200 {
			t.Errorf("%s: %d texts, want at least %d", k, counts[string(k)], *n/200)
		}
	}
	if counts["accepted"] < *n/2 {
		t.Errorf("%d texts accepted, want at least half", counts["accepted"])
	}
}
