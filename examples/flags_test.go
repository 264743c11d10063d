package examples

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The shipped binaries, whose options TestOneFlagOneThing compares.
var shippedCommands = []string{"ledgerd", "ledgerctl", "ledger-verify", "ledger-declare", "ledger-mcp"}

// flagUse is a long option and the placeholder its usage gives its value
// ("--url URL"), or none for a switch ("--json").
var flagUse = regexp.MustCompile(`--([a-z][a-z-]*)(?: ([A-Z][A-Z0-9_]*(?:,[A-Z][A-Z0-9_]*)*))?`)

// twoKinds are the options that take a file for some commands and a
// directory for others, which their help says.
var twoKinds = map[string][]string{"out": {"FILE", "DIR"}}

// TestOneFlagOneThing holds every shipped binary to one option name for
// one thing: across the binaries and their commands (each command's own
// --help, exit 0), an option takes one kind of value, named alike
// (--url URL, never --ledger for it; --policies DIR, never policy ids).
func TestOneFlagOneThing(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries")
	}
	bin := t.TempDir()
	pkgs := make([]string, len(shippedCommands))
	for i, c := range shippedCommands {
		pkgs[i] = "./cmd/" + c
	}
	buildCommands(t, "..", bin, pkgs)
	// seen maps an option to its placeholders and where each appears.
	seen := map[string]map[string][]string{}
	for _, program := range shippedCommands {
		path := filepath.Join(bin, program)
		top := helpText(t, path)
		for _, words := range commandsOf(program, top) {
			text := helpText(t, path, append(words, "--help")...)
			where := strings.Join(append([]string{program}, words...), " ")
			for _, m := range flagUse.FindAllStringSubmatch(usageLines(text), -1) {
				if seen[m[1]] == nil {
					seen[m[1]] = map[string][]string{}
				}
				if !slices.Contains(seen[m[1]][m[2]], where) {
					seen[m[1]][m[2]] = append(seen[m[1]][m[2]], where)
				}
			}
		}
	}
	if len(seen) < 40 {
		t.Fatalf("read only %d options from the binaries' help", len(seen))
	}
	for name, uses := range seen {
		if len(uses) < 2 {
			continue
		}
		var kinds []string
		for k := range uses {
			kinds = append(kinds, k)
		}
		slices.Sort(kinds)
		if allowed := twoKinds[name]; allowed != nil && !slices.ContainsFunc(kinds, func(k string) bool { return !slices.Contains(allowed, k) }) {
			continue
		}
		var b strings.Builder
		for _, k := range kinds {
			b.WriteString("\n    --" + name + " " + k + ": " + strings.Join(uses[k], ", "))
		}
		t.Errorf("--%s takes values of several kinds:%s", name, b.String())
	}
}

// helpText runs a binary for its help, which must exit 0.
func helpText(t *testing.T, path string, args ...string) string {
	t.Helper()
	if len(args) == 0 {
		args = []string{"--help"}
	}
	out, err := exec.Command(path, args...).Output()
	if err != nil {
		t.Fatalf("%s %s: %v", filepath.Base(path), strings.Join(args, " "), err)
	}
	return string(out)
}

// usageLines returns a help's usage lines: those after "Usage:" up to
// the first blank line.
func usageLines(help string) string {
	_, rest, _ := strings.Cut(help, "Usage:\n")
	lines, _, _ := strings.Cut(rest, "\n\n")
	return lines + "\n"
}

// commandsOf lists a program's commands from its usage lines ("ledgerd
// token add NAME ..." gives [token add]): the words after the program's
// name before the first placeholder, option or bracket.
func commandsOf(program, help string) [][]string {
	var cmds [][]string
	for _, line := range strings.Split(usageLines(help), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 || fields[0] != program {
			continue
		}
		var words []string
		for _, f := range fields[1:] {
			if f == "help" || strings.ToLower(f) != f || strings.ContainsAny(f, "[(-.|") {
				break
			}
			words = append(words, f)
		}
		if len(words) > 0 && !slices.ContainsFunc(cmds, func(c []string) bool { return slices.Equal(c, words) }) {
			cmds = append(cmds, words)
		}
	}
	return cmds
}
