package policy_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/decisionledger/ledger/commit/declare"
	"github.com/decisionledger/ledger/policy"
)

func declarations(t testing.TB) []*declare.Declaration {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "testdata", "declarations", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no declarations: %v", err)
	}
	var decls []*declare.Declaration
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		d, err := declare.Parse(data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		decls = append(decls, d)
	}
	return decls
}

const referenceDir = "../testdata/policies"

func reference(t testing.TB) *policy.Set {
	t.Helper()
	s, err := policy.Load(referenceDir, declarations(t))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A valid policy put before each refused one, so that the refused one's
// position is not 1:1.
const okPolicy = `@id("ok")
permit (principal, action == Action::"send_email", resource);

`

// Each refusal names the file, the line and column of the refused policy
// (or of the parser's complaint) and its id: hand-written expectations.
func TestLoadRefuses(t *testing.T) {
	decls := declarations(t)
	for _, tc := range []struct {
		name      string
		src       string
		sentinel  error
		line, col int
		id        string
	}{
		{"payload field", okPolicy + `@id("reads-subject")
permit (principal, action == Action::"send_email", resource)
when { context.subject == "Invoice" };
`, policy.ErrSchema, 6, 16, "reads-subject"}, // the attribute's position
		{"raw derived value", okPolicy + `  @id("raw-recipient")
  permit (principal, action == Action::"send_email", resource)
  when { context.recipient == "someone@example.com" };
`, policy.ErrSchema, 4, 3, "raw-recipient"},
		{"projection of another field", okPolicy + `@id("wrong-projection")
permit (principal, action == Action::"send_email", resource)
when { context.recipient.byte_size > 1 };
`, policy.ErrSchema, 6, 26, "wrong-projection"},
		{"type error", okPolicy + "\n\n" + `@id("amount-as-string")
forbid (principal, action == Action::"make_payment", resource)
when { context.amount_minor == "100" };
`, policy.ErrSchema, 6, 1, "amount-as-string"},
		{"unknown action", okPolicy + `@id("delete")
permit (principal, action == Action::"delete_records", resource);
`, policy.ErrSchema, 4, 1, "delete"},
		{"optional attribute without has", okPolicy + `@id("attachments")
forbid (principal, action == Action::"send_email", resource)
when { context.attachment_hashes.contains("sha256:00") };
`, policy.ErrSchema, 4, 1, "attachments"},
		{"missing @id", okPolicy + `@description("no id")
permit (principal, action == Action::"send_email", resource);
`, policy.ErrAnnotation, 4, 1, ""},
		{"repeated @id", okPolicy + `@id("ok")
forbid (principal, action == Action::"send_email", resource);
`, policy.ErrAnnotation, 4, 1, "ok"},
		{"@id twice on one policy", okPolicy + `@id("a")
@id("b")
permit (principal, action == Action::"send_email", resource);
`, policy.ErrParse, 5, 4, ""},
		{"empty @id", okPolicy + `@id("")
permit (principal, action == Action::"send_email", resource);
`, policy.ErrAnnotation, 4, 1, ""},
		{"@id with a control character", okPolicy + `@id("a\u{7}b")
permit (principal, action == Action::"send_email", resource);
`, policy.ErrAnnotation, 4, 1, ""},
		{"@approval on a forbid", okPolicy + `@id("f")
@approval("required")
forbid (principal, action == Action::"send_email", resource);
`, policy.ErrAnnotation, 4, 1, "f"},
		{"@approval with another value", okPolicy + `@id("p")
@approval("maybe")
permit (principal, action == Action::"send_email", resource);
`, policy.ErrAnnotation, 4, 1, "p"},
		{"misspelt annotation", okPolicy + `@id("p")
@aproval("required")
permit (principal, action == Action::"send_email", resource);
`, policy.ErrAnnotation, 4, 1, "p"},
		{"syntax error", okPolicy + `@id("p")
permit (principal, action == Action::"send_email", resource)
when { context.body.byte_size > };
`, policy.ErrParse, 6, 34, ""}, // cedar-go points at the ";" after the "}"
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := policy.New([]policy.File{{Name: "refused.cedar", Bytes: []byte(tc.src)}}, decls)
			var le *policy.LoadError
			if !errors.As(err, &le) {
				t.Fatalf("got %v, want a *LoadError", err)
			}
			if !errors.Is(err, tc.sentinel) {
				t.Errorf("%v: not %v", err, tc.sentinel)
			}
			if le.File != "refused.cedar" || le.Line != tc.line || le.Column != tc.col || le.ID != tc.id {
				t.Errorf("%v: at %s:%d:%d id %q, want refused.cedar:%d:%d id %q", err, le.File, le.Line, le.Column, le.ID, tc.line, tc.col, tc.id)
			}
			t.Log(err)
		})
	}
}

// Error messages name no attribute value: the literal a refused policy
// compares with may be copied from a call, so it is kept out too.
func TestLoadErrorNamesNoValue(t *testing.T) {
	src := okPolicy + `@id("raw-recipient")
permit (principal, action == Action::"send_email", resource)
when { context.recipient == "someone@example.com" };
`
	_, err := policy.New([]policy.File{{Name: "x.cedar", Bytes: []byte(src)}}, declarations(t))
	if err == nil {
		t.Fatal("accepted")
	}
	if got := err.Error(); strings.Contains(got, "someone") || strings.Contains(got, "example.com") {
		t.Errorf("error names a value: %s", got)
	}
}

// The directory layout: .cedar files are read in name order, other files
// ignored, subdirectories, symbolic links, bad names and empty sets
// refused.
func TestLoadLayout(t *testing.T) {
	decls := declarations(t)
	write := func(dir, name, data string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	write(dir, "b.cedar", `@id("b")`+"\n"+`permit (principal, action == Action::"read_record", resource);`)
	write(dir, "a.cedar", `@id("a")`+"\n"+`permit (principal, action == Action::"send_email", resource);`)
	write(dir, "README.md", "not a policy")
	write(dir, "notes.cedar.txt", "not a policy")
	s, err := policy.Load(dir, decls)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, p := range s.Policies() {
		ids = append(ids, p.ID+"@"+p.File)
	}
	if got, want := len(ids), 2; got != want || ids[0] != "a@a.cedar" || ids[1] != "b@b.cedar" {
		t.Errorf("policies %v, want [a@a.cedar b@b.cedar]", ids)
	}
	if f := s.Files(); len(f) != 2 || f[0].Name != "a.cedar" {
		t.Errorf("files %v", f)
	}

	sub := t.TempDir()
	write(sub, "a.cedar", `@id("a")`+"\n"+`permit (principal, action == Action::"send_email", resource);`)
	if err := os.Mkdir(filepath.Join(sub, "more"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := loadBoth(sub, decls); !errors.Is(err, policy.ErrLayout) {
		t.Errorf("subdirectory: %v", err)
	}

	link := t.TempDir()
	write(link, "a.cedar", `@id("a")`+"\n"+`permit (principal, action == Action::"send_email", resource);`)
	if err := os.Symlink(filepath.Join(link, "a.cedar"), filepath.Join(link, "b.cedar")); err != nil {
		t.Skip(err)
	}
	if err := loadBoth(link, decls); !errors.Is(err, policy.ErrLayout) {
		t.Errorf("symbolic link: %v", err)
	}

	if err := loadBoth(t.TempDir(), decls); !errors.Is(err, policy.ErrLayout) {
		t.Errorf("empty directory: %v", err)
	}
	bad := t.TempDir()
	write(bad, "a b.cedar", `@id("a")`+"\n"+`permit (principal, action == Action::"send_email", resource);`)
	if err := loadBoth(bad, decls); !errors.Is(err, policy.ErrLayout) {
		t.Errorf("name with a space: %v", err)
	}
}

// loadBoth is Load's refusal of dir, or ReadDir's when ReadDir does not
// refuse it with ErrLayout: the directory rules are ReadDir's.
func loadBoth(dir string, decls []*declare.Declaration) error {
	if _, err := policy.ReadDir(dir); !errors.Is(err, policy.ErrLayout) {
		return fmt.Errorf("ReadDir: %v", err)
	}
	_, err := policy.Load(dir, decls)
	return err
}

// NewReplay over ReadDir is the set Load gives, without the schema.
func TestReadDirReplay(t *testing.T) {
	files, err := policy.ReadDir(referenceDir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := policy.NewReplay(files)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.Digest(), reference(t).Digest(); !got.Equal(want) {
		t.Errorf("digest %s, Load's %s", got, want)
	}
	if len(files) != 5 || files[0].Name != "email.cedar" {
		t.Errorf("files %d, first %q", len(files), files[0].Name)
	}
}

// The worked example of docs/policies.md, its digest computed with
// printf … | sha256sum, and the reference set's.
func TestDigest(t *testing.T) {
	files := []policy.File{
		{Name: "b.cedar", Bytes: []byte("@id(\"no-intake\")\nforbid (principal == Agent::\"intake-agent\", action, resource);\n")},
		{Name: "a.cedar", Bytes: []byte("@id(\"allow-all\")\npermit (principal, action, resource);\n")},
	}
	const want = "sha256:d874143182898d75699ad5145962afb5b61f50c828d68329772f7260b51b9902"
	if got := policy.Digest(files).String(); got != want {
		t.Errorf("worked example digest %s, want %s", got, want)
	}
	s, err := policy.New(files, declarations(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Digest().String(); got != want {
		t.Errorf("set digest %s, want %s", got, want)
	}
	const wantReference = "sha256:f96b32802a67298f20413a2e3536c925cc931220a458372cbfc640d49fd3af9a"
	if got := reference(t).Digest().String(); got != wantReference {
		t.Errorf("reference digest %s, want %s (recompute per docs/policies.md if a file changed)", got, wantReference)
	}
}
