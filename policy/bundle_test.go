package policy_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/decisionledger/ledger/policy"
)

// The worked example of docs/policies.md §6.1 and §7.1: the bundle, as
// printf writes it there, and its sha256 (printf … | sha256sum).
const (
	exampleBundle = "ledger/v1/policies\n" +
		"a.cedar\n55\n" + "@id(\"allow-all\")\npermit (principal, action, resource);\n" +
		"b.cedar\n80\n" + "@id(\"no-intake\")\nforbid (principal == Agent::\"intake-agent\", action, resource);\n"
	exampleDigest   = "sha256:d874143182898d75699ad5145962afb5b61f50c828d68329772f7260b51b9902"
	referenceDigest = "sha256:f96b32802a67298f20413a2e3536c925cc931220a458372cbfc640d49fd3af9a"
)

func exampleFiles() []policy.File {
	return []policy.File{
		{Name: "b.cedar", Bytes: []byte("@id(\"no-intake\")\nforbid (principal == Agent::\"intake-agent\", action, resource);\n")},
		{Name: "a.cedar", Bytes: []byte("@id(\"allow-all\")\npermit (principal, action, resource);\n")},
	}
}

func TestBundleWorkedExample(t *testing.T) {
	files := exampleFiles()
	if got := policy.Bundle(files); string(got) != exampleBundle {
		t.Errorf("Bundle:\n%q\nwant\n%q", got, exampleBundle)
	}
	if files[0].Name != "b.cedar" {
		t.Errorf("Bundle sorted the caller's slice")
	}
	s, err := policy.New(files, declarations(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Bundle(); string(got) != exampleBundle {
		t.Errorf("Set.Bundle:\n%q\nwant\n%q", got, exampleBundle)
	}
	if got := policy.DigestOfBundle([]byte(exampleBundle)).String(); got != exampleDigest {
		t.Errorf("DigestOfBundle %s, want %s", got, exampleDigest)
	}
	parsed, err := policy.ParseBundle([]byte(exampleBundle))
	if err != nil {
		t.Fatal(err)
	}
	want := []policy.File{files[1], files[0]}
	if !slices.EqualFunc(parsed, want, func(a, b policy.File) bool { return a.Name == b.Name && bytes.Equal(a.Bytes, b.Bytes) }) {
		t.Errorf("ParseBundle: %q, want %q", parsed, want)
	}
}

// The reference set: its bundle parses back to its files, re-encodes to
// itself, and hashes to its digest (a literal, as in TestDigest).
func TestBundleReference(t *testing.T) {
	s := reference(t)
	b := s.Bundle()
	if got := policy.DigestOfBundle(b).String(); got != referenceDigest {
		t.Errorf("DigestOfBundle %s, want %s", got, referenceDigest)
	}
	files, err := policy.ParseBundle(b)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(files, s.Files(), func(a, b policy.File) bool { return a.Name == b.Name && bytes.Equal(a.Bytes, b.Bytes) }) {
		t.Errorf("parsed files differ from the set's")
	}
	if !bytes.Equal(policy.Bundle(files), b) {
		t.Errorf("re-encoding differs")
	}
	// The parsed files do not alias the bundle.
	b[len(b)-1] ^= 1
	if files[len(files)-1].Bytes[len(files[len(files)-1].Bytes)-1] == b[len(b)-1] {
		t.Errorf("parsed bytes alias the bundle")
	}
}

func TestParseBundleRefuses(t *testing.T) {
	const sep = "ledger/v1/policies\n" // 19 bytes
	big := strings.Repeat("x", 1<<20)
	var many strings.Builder // 1025 empty files
	many.WriteString(sep)
	for i := range 1025 {
		fmt.Fprintf(&many, "f%04d.cedar\n0\n", i)
	}
	var heavy strings.Builder // four files of 1 MiB and one of 1 byte
	heavy.WriteString(sep)
	for i := range 4 {
		fmt.Fprintf(&heavy, "f%d.cedar\n%d\n%s", i, len(big), big)
	}
	heavy.WriteString("f4.cedar\n1\nx")
	long := sep + "a.cedar\n0\n" + strings.Repeat("\n", 4334611) // 4334611: the bounds' maximum, by hand
	for _, tc := range []struct {
		name    string
		bundle  string
		offset  int
		problem string
	}{
		{"empty", "", 0, "does not start with"},
		{"other domain", "ledger/v2/policies\na.cedar\n0\n", 0, "does not start with"},
		{"no file", sep, 19, "no file"},
		{"name not .cedar", sep + "a.txt\n0\n", 19, "file name must match"},
		{"name with a space", sep + "secret name.cedar\n0\n", 19, "file name must match"},
		{"name starting with a dot", sep + ".a.cedar\n0\n", 19, "file name must match"},
		{"empty name", sep + "\n0\n", 19, "file name must match"},
		{"name of 129 bytes", sep + strings.Repeat("a", 123) + ".cedar\n0\n", 19, "no newline after a file name"},
		{"names out of order", sep + "b.cedar\n0\na.cedar\n0\n", 29, "not strictly after"},
		{"name repeated", sep + "a.cedar\n1\nxa.cedar\n0\n", 30, "not strictly after"},
		{"no length", sep + "a.cedar", 19, "no newline after a file name"},
		{"empty length", sep + "a.cedar\n\n", 27, "not a decimal"},
		{"leading zero", sep + "a.cedar\n01\nx", 27, "not a decimal"},
		{"two zeros", sep + "a.cedar\n00\n", 27, "not a decimal"},
		{"plus sign", sep + "a.cedar\n+1\nx", 27, "not a decimal"},
		{"minus zero", sep + "a.cedar\n-0\n", 27, "not a decimal"},
		{"space", sep + "a.cedar\n 1\nx", 27, "not a decimal"},
		{"hex", sep + "a.cedar\n0x1\nx", 27, "not a decimal"},
		{"eight digits", sep + "a.cedar\n00000001\nx", 27, "no newline after a length"},
		{"length above 1 MiB", sep + "a.cedar\n1048577\n" + big + "x", 27, "larger than 1048576"},
		{"bytes cut short", sep + "a.cedar\n5\nabc", 32, "ends 3 bytes into a file of 5"},
		{"trailing newline", sep + "a.cedar\n1\nx\n", 30, "file name must match"},
		{"trailing bytes", sep + "a.cedar\n1\nxy", 30, "no newline after a file name"},
		{"1025 files", many.String(), 19 + 1024*14, "more than 1024 files"},
		{"more than 4 MiB", heavy.String(), 19 + 4*(9+8+1<<20) + 9, "larger than 4194304 bytes together"},
		{"longer than the bounds allow", long, 4334611, "longer than 4334611"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files, err := policy.ParseBundle([]byte(tc.bundle))
			if err == nil {
				t.Fatalf("accepted: %d files", len(files))
			}
			var be *policy.BundleError
			if !errors.As(err, &be) || !errors.Is(err, policy.ErrBundle) {
				t.Fatalf("%v: not a *BundleError and ErrBundle", err)
			}
			if be.Offset != tc.offset || !strings.Contains(be.Problem, tc.problem) {
				t.Errorf("%v: want offset %d and %q", err, tc.offset, tc.problem)
			}
			if msg := err.Error(); strings.Contains(msg, "secret") || strings.Contains(msg, "xx") || strings.Contains(msg, "a.cedar") {
				t.Errorf("error quotes the bundle: %s", msg)
			}
		})
	}
}

// The edges of the bounds are accepted: a file of exactly 1 MiB, an empty
// file, 1024 files, exactly 4 MiB.
func TestParseBundleBounds(t *testing.T) {
	big := strings.Repeat("x", 1<<20)
	for name, files := range map[string][]policy.File{
		"empty file":    {{Name: "a.cedar", Bytes: nil}},
		"1 MiB":         {{Name: "a.cedar", Bytes: []byte(big)}},
		"4 MiB":         {{Name: "a.cedar", Bytes: []byte(big)}, {Name: "b.cedar", Bytes: []byte(big)}, {Name: "c.cedar", Bytes: []byte(big)}, {Name: "d.cedar", Bytes: []byte(big)}},
		"1024 files":    manyFiles(1024),
		"128-byte name": {{Name: strings.Repeat("a", 122) + ".cedar", Bytes: []byte("x")}},
	} {
		t.Run(name, func(t *testing.T) {
			b := policy.Bundle(files)
			got, err := policy.ParseBundle(b)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(files) || !bytes.Equal(policy.Bundle(got), b) {
				t.Errorf("round trip differs")
			}
		})
	}
}

func manyFiles(n int) []policy.File {
	files := make([]policy.File, n)
	for i := range files {
		files[i] = policy.File{Name: fmt.Sprintf("f%04d.cedar", i), Bytes: []byte("// nothing\n")}
	}
	return files
}

// New, NewReplay and Load refuse a set beyond MaxFiles or MaxSetBytes,
// and accept one at the bounds.
func TestSetBounds(t *testing.T) {
	decls := declarations(t)
	comment := []byte("//" + strings.Repeat("x", 1<<20-3) + "\n") // 1 MiB of comment
	atBytes := []policy.File{{Name: "a.cedar", Bytes: comment}, {Name: "b.cedar", Bytes: comment}, {Name: "c.cedar", Bytes: comment}, {Name: "d.cedar", Bytes: comment}}
	overBytes := append(slices.Clone(atBytes), policy.File{Name: "e.cedar", Bytes: []byte("\n")})
	for name, tc := range map[string]struct {
		files   []policy.File
		problem string
	}{
		"1024 files":       {manyFiles(1024), ""},
		"1025 files":       {manyFiles(1025), "more than 1024 policy files"},
		"exactly 4 MiB":    {atBytes, ""},
		"4 MiB and 1 byte": {overBytes, "policy files larger than 4194304 bytes together"},
	} {
		t.Run(name, func(t *testing.T) {
			for _, build := range []func([]policy.File) (*policy.Set, error){
				func(f []policy.File) (*policy.Set, error) { return policy.New(f, decls) },
				policy.NewReplay,
			} {
				_, err := build(tc.files)
				if tc.problem == "" {
					if err != nil {
						t.Fatal(err)
					}
					continue
				}
				var le *policy.LoadError
				if !errors.As(err, &le) || !errors.Is(err, policy.ErrLayout) || le.Problem != tc.problem {
					t.Errorf("got %v, want a layout LoadError %q", err, tc.problem)
				}
			}
		})
	}

	// Load stops reading at the bound: the 1025th file is refused as one
	// too many before the symbolic link after it is seen.
	dir := t.TempDir()
	for _, f := range manyFiles(1025) {
		if err := os.WriteFile(filepath.Join(dir, f.Name), f.Bytes, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(dir, "f0000.cedar"), filepath.Join(dir, "z.cedar")); err != nil {
		t.Skip(err)
	}
	var le *policy.LoadError
	if _, err := policy.Load(dir, decls); !errors.As(err, &le) || le.Problem != "more than 1024 policy files" {
		t.Errorf("Load: %v, want more than 1024 policy files", err)
	}
}

// A bundle ParseBundle accepts re-encodes to itself and hashes to the
// digest of its files; a refusal names an offset inside the bundle.
func FuzzParseBundle(f *testing.F) {
	f.Add([]byte(exampleBundle))
	f.Add(reference(f).Bundle())
	f.Add([]byte("ledger/v1/policies\na.cedar\n0\n"))
	f.Add([]byte("ledger/v1/policies\na.cedar\n01\nx"))
	f.Add([]byte("ledger/v1/policies\nb.cedar\n0\na.cedar\n0\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		files, err := policy.ParseBundle(b)
		if err != nil {
			var be *policy.BundleError
			if !errors.As(err, &be) || !errors.Is(err, policy.ErrBundle) || be.Offset < 0 || be.Offset > len(b) {
				t.Fatalf("bad error %v", err)
			}
			return
		}
		if got := policy.Bundle(files); !bytes.Equal(got, b) {
			t.Fatalf("re-encoded %q, parsed %q", got, b)
		}
		if policy.DigestOfBundle(b) != policy.Digest(files) {
			t.Fatalf("DigestOfBundle differs from Digest")
		}
	})
}
