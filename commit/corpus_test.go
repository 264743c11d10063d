package commit

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
)

// corpusRow is one row of testdata/commit/equivalence.txt.
type corpusRow struct {
	line    int
	verb    string // same, differ, refuse
	name    string
	domain  Domain
	digest  string // same: the hand-computed digest, if given
	kind    Kind   // refuse
	pointer string // refuse
	key     bool   // refuse
	inputs  [][]byte
}

func readCorpus(t testing.TB, path string) []corpusRow {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []corpusRow
	var cur *corpusRow
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "#"):
			continue
		case line == "":
			cur = nil
			continue
		case cur == nil:
			rows = append(rows, parseCorpusHeader(t, n, line))
			cur = &rows[len(rows)-1]
		case strings.HasPrefix(line, "q "):
			b, err := strconv.Unquote(line[2:])
			if err != nil {
				t.Fatalf("%s:%d: %v", path, n, err)
			}
			cur.inputs = append(cur.inputs, []byte(b))
		default:
			cur.inputs = append(cur.inputs, []byte(line))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}

func parseCorpusHeader(t testing.TB, n int, line string) corpusRow {
	t.Helper()
	row := corpusRow{line: n}
	verb, rest, _ := strings.Cut(line, " ")
	row.verb = verb
	row.name, rest, _ = strings.Cut(rest, " ")
	if verb == "refuse" {
		var kind string
		kind, rest, _ = strings.Cut(rest, " ")
		row.kind = Kind(kind)
		quoted, err := strconv.QuotedPrefix(rest)
		if err != nil {
			t.Fatalf("line %d: pointer: %v", n, err)
		}
		row.pointer, _ = strconv.Unquote(quoted)
		rest = rest[len(quoted):]
	}
	for _, field := range strings.Fields(rest) {
		name, value, _ := strings.Cut(field, "=")
		switch {
		case field == "key" && verb == "refuse":
			row.key = true
		case field == "allow_non_integer":
			row.domain.AllowNonInteger = true
		case name == "max_depth" || name == "max_bytes":
			v, err := strconv.Atoi(value)
			if err != nil {
				t.Fatalf("line %d: %s: %v", n, field, err)
			}
			if name == "max_depth" {
				row.domain.MaxDepth = v
			} else {
				row.domain.MaxBytes = v
			}
		case strings.HasPrefix(field, "sha256:") && verb == "same":
			row.digest = field
		default:
			t.Fatalf("line %d: unknown header field %q", n, field)
		}
	}
	switch verb {
	case "same", "differ", "refuse":
	default:
		t.Fatalf("line %d: unknown row kind %q", n, verb)
	}
	return row
}

func TestEquivalenceCorpus(t *testing.T) {
	rows := readCorpus(t, "../testdata/commit/equivalence.txt")
	count := map[string]int{}
	literals := 0
	for _, row := range rows {
		count[row.verb]++
		if row.digest != "" {
			literals++
		}
		t.Run(row.verb+"/"+row.name, func(t *testing.T) {
			switch row.verb {
			case "same":
				checkSame(t, row)
			case "differ":
				checkDiffer(t, row)
			case "refuse":
				checkRefuse(t, row)
			}
		})
	}
	// The corpus is the specification's memory: it must not quietly shrink.
	if len(rows) < 40 || count["same"] < 10 || count["differ"] < 10 || count["refuse"] < 20 || literals < 4 {
		t.Errorf("corpus too small: %d rows %v, %d literal digests", len(rows), count, literals)
	}
}

func checkSame(t *testing.T, row corpusRow) {
	if len(row.inputs) < 2 {
		t.Fatalf("line %d: a same row needs at least two inputs", row.line)
	}
	var first Commitment
	var firstCanonical []byte
	for i, in := range row.inputs {
		c, err := row.domain.Params(in)
		if err != nil {
			t.Fatalf("input %d (%q): %v", i, in, err)
		}
		canonical, err := row.domain.Canonicalize(in)
		if err != nil {
			t.Fatalf("input %d: Canonicalize: %v", i, err)
		}
		if c.Size != len(canonical) {
			t.Errorf("input %d: size %d, canonical form has %d bytes", i, c.Size, len(canonical))
		}
		if i == 0 {
			first, firstCanonical = c, canonical
			if row.digest != "" && c.Digest.String() != row.digest {
				t.Errorf("digest %s, corpus says %s (canonical %q)", c.Digest, row.digest, canonical)
			}
			continue
		}
		if !c.Equal(first) || !bytes.Equal(canonical, firstCanonical) {
			t.Errorf("input %d (%q) canonicalizes to %q, input 0 to %q", i, in, canonical, firstCanonical)
		}
	}
}

func checkDiffer(t *testing.T, row corpusRow) {
	if len(row.inputs) != 2 {
		t.Fatalf("line %d: a differ row needs exactly two inputs", row.line)
	}
	a, err := row.domain.Params(row.inputs[0])
	if err != nil {
		t.Fatal(err)
	}
	b, err := row.domain.Params(row.inputs[1])
	if err != nil {
		t.Fatal(err)
	}
	if a.Digest.Equal(b.Digest) {
		t.Errorf("%q and %q share digest %s", row.inputs[0], row.inputs[1], a.Digest)
	}
}

func checkRefuse(t *testing.T, row corpusRow) {
	if len(row.inputs) != 1 {
		t.Fatalf("line %d: a refuse row needs exactly one input", row.line)
	}
	_, err := row.domain.Params(row.inputs[0])
	var de *DomainError
	if !errors.As(err, &de) {
		t.Fatalf("want %s at %q, got %v", row.kind, row.pointer, err)
	}
	if de.Kind != row.kind || de.Pointer != row.pointer || de.Key != row.key {
		t.Errorf("got %v (kind %s pointer %q key %v), want kind %s pointer %q key %v",
			err, de.Kind, de.Pointer, de.Key, row.kind, row.pointer, row.key)
	}
	if !errors.Is(err, row.kind) {
		t.Errorf("errors.Is(err, %s) is false", row.kind)
	}
	if de.Offset < 0 || de.Offset > len(row.inputs[0]) {
		t.Errorf("offset %d outside the input", de.Offset)
	}
}
