package conformance

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/conformance/*.json from the Go implementation")

// corpusDir is testdata/conformance/ at the module root.
const corpusDir = "../../testdata/conformance"

// corpusVersion is the "version" of every corpus file.
const corpusVersion = 1

var caseName = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// refusal is the typed refusal of a case: a stable code and the RFC 6901
// pointer it names ("" is the root). Key says the fault is in a member name
// of the object at Pointer (only the digest corpus sets it).
type refusal struct {
	Code    string `json:"code"`
	Pointer string `json:"pointer"`
	Key     bool   `json:"key,omitempty"`
}

// corpusFile is the envelope of every corpus file.
type corpusFile struct {
	Corpus  string            `json:"corpus"`
	Version int               `json:"version"`
	Cases   []json.RawMessage `json:"cases"`
}

// marshalCase encodes one case on one line, without HTML escaping so that
// notes and declarations read as written.
func marshalCase(t *testing.T, c any) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(c); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// checkCorpus compares the cases Go produces for one corpus kind with
// testdata/conformance/<kind>.json, case by case and then byte for byte, or
// rewrites the file under -update. names[i] is the name of cases[i].
func checkCorpus(t *testing.T, kind string, names []string, cases []any) {
	t.Helper()
	if len(names) != len(cases) {
		t.Fatalf("%d names for %d cases", len(names), len(cases))
	}
	seen := map[string]bool{}
	lines := make([][]byte, len(cases))
	for i, c := range cases {
		if !caseName.MatchString(names[i]) {
			t.Errorf("case name %q is not kebab-case ASCII", names[i])
		}
		if seen[names[i]] {
			t.Errorf("case name %q is used twice", names[i])
		}
		seen[names[i]] = true
		lines[i] = marshalCase(t, c)
	}
	var want bytes.Buffer
	want.WriteString("{\"corpus\": \"" + kind + "\", \"version\": 1, \"cases\": [\n")
	want.Write(bytes.Join(lines, []byte(",\n")))
	want.WriteString("\n]}\n")

	path := filepath.Join(corpusDir, kind+".json")
	if *update {
		if err := os.WriteFile(path, want.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s: %d cases", path, len(cases))
		return
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/conformance -update)", err)
	}
	var f corpusFile
	if err := json.Unmarshal(got, &f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if f.Corpus != kind || f.Version != corpusVersion {
		t.Errorf("%s: corpus %q version %d, want %q version %d", path, f.Corpus, f.Version, kind, corpusVersion)
	}
	inFile := map[string]json.RawMessage{}
	for _, raw := range f.Cases {
		var c struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		inFile[c.Name] = raw
	}
	differ := 0
	for i, name := range names {
		raw, ok := inFile[name]
		if !ok {
			t.Errorf("%s: case %s is missing", path, name)
			differ++
			continue
		}
		delete(inFile, name)
		var compact bytes.Buffer
		if err := json.Compact(&compact, raw); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(compact.Bytes(), lines[i]) {
			differ++
			t.Errorf("%s: case %s differs from Go:\n file: %s\n   go: %s", path, name, clip(compact.Bytes()), clip(lines[i]))
		}
	}
	for name := range inFile {
		differ++
		t.Errorf("%s: case %s is not one Go produces (add it to the Go test, see docs/conformance.md)", path, name)
	}
	if differ == 0 && !bytes.Equal(got, want.Bytes()) {
		t.Errorf("%s: same cases, different layout", path)
	}
	if differ > 0 || t.Failed() {
		t.Logf("%d of %d cases differ; go test ./internal/conformance -update rewrites %s from Go", differ, len(cases), path)
	}
}

// clip shortens a long case for an error message.
func clip(b []byte) []byte {
	if len(b) > 600 {
		return append(b[:600:600], "..."...)
	}
	return b
}
