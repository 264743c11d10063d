package completion

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const exampleHelp = `Usage:
    example fetch [--url URL] (--key VKEY | --key-file FILE)... [--json]
                  --out FILE [--archive DIR] INDEX

Options:
    --url URL        Where.
    --timeout DURATION
                     How long.
    --json           Machine-readable.
      --not-an-entry X  (an indented line of another entry's text)

Examples:
    $ example fetch --url https://ledger.example.com --out x 7
`

func TestFromHelp(t *testing.T) {
	c := FromHelp([]string{"fetch"}, exampleHelp)
	want := []Option{{"archive", "DIR"}, {"json", ""}, {"key", "VKEY"}, {"key-file", "FILE"}, {"out", "FILE"}, {"timeout", "DURATION"}, {"url", "URL"}}
	if !slices.Equal(c.Options, want) {
		t.Errorf("options %v, want %v", c.Options, want)
	}
}

// TestScripts runs the scripts as bash (and zsh, as its bashcompinit calls a
// completion function) would, on an example program.
func TestScripts(t *testing.T) {
	cmds := []Command{
		FromHelp([]string{"fetch"}, exampleHelp),
		{Words: []string{"key", "add"}, Options: []Option{{"name", "NAME"}}},
		{Words: []string{"key", "remove"}},
		{Words: []string{"shell"}, Args: []string{"bash", "zsh"}},
	}
	dir, scripts := t.TempDir(), t.TempDir()
	for _, f := range []string{"ledger.vkey", "archive/x"} {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755)
		os.WriteFile(filepath.Join(dir, f), nil, 0o644)
	}
	cases := []struct{ words, want string }{
		{"example ''", "fetch key shell"},
		{"example k", "key"},
		{"example key ''", "add remove"},
		{"example key add --n", "--name"},
		{"example key add --name ''", ""},
		{"example fetch --", "--archive --help --json --key --key-file --out --timeout --url"},
		{"example fetch --key-file led", "ledger.vkey"},
		{"example fetch --archive ''", "archive"},
		{"example fetch --url key ''", "archive ledger.vkey"},
		{"example shell ''", "bash zsh"},
	}
	var script strings.Builder
	script.WriteString(`source "$COMPLETE"
t() {
    COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); COMPREPLY=()
    _example_complete
    local cur out=() w
    for cur; do :; done
    for w in "${COMPREPLY[@]}"; do [[ $w == "$cur"* ]] && out+=("$w"); done
    echo "${out[*]}"
}
`)
	for _, c := range cases {
		script.WriteString("t " + c.words + "\n")
	}
	for shell, text := range map[string]string{"bash": Bash("example", cmds), "zsh": Zsh("example", cmds)} {
		t.Run(shell, func(t *testing.T) {
			if _, err := exec.LookPath(shell); err != nil {
				if os.Getenv("LEDGER_CI") == "1" {
					t.Fatalf("%s is not on PATH (LEDGER_CI=1: .ci/run installs it)", shell)
				}
				t.Skipf("%s is not on PATH (bash .ci/run installs it)", shell)
			}
			path := filepath.Join(scripts, shell)
			if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			args := []string{"-c", script.String()}
			if shell == "zsh" {
				args = append([]string{"-f"}, args...)
			}
			cmd := exec.Command(shell, args...)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "COMPLETE="+path)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
			if len(got) != len(cases) {
				t.Fatalf("%d lines, want %d:\n%s", len(got), len(cases), out)
			}
			for i, c := range cases {
				fields := strings.Fields(got[i])
				slices.Sort(fields)
				if strings.Join(fields, " ") != c.want {
					t.Errorf("%s: %q, want %q", c.words, got[i], c.want)
				}
			}
		})
	}
}
