// Package completion writes bash and zsh completion scripts for a
// command-line program from the help texts its commands print, so that
// what a shell offers cannot drift from what --help says (and the
// programs' tests hold --help to the options each command defines).
//
// A program is a list of commands, each named by one or more words
// ("export", "approval wait") and holding its options. An option's value
// placeholder says what to complete after it: a file for FILE and the
// file-like placeholders (Files), a directory for DIR, nothing otherwise.
// Arguments that are not options complete as the next command word, or
// as files once a whole command is named.
//
// The zsh script is the bash one behind zsh's bashcompinit, which zsh
// ships for exactly this: one generator, so the two cannot disagree.
package completion

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Option is a long option and the placeholder of its value ("" for a
// switch such as --json).
type Option struct {
	Name  string // "key-file", without the dashes
	Value string // "FILE"
}

// Command is one command: its words after the program's name and its
// options.
type Command struct {
	Words   []string
	Options []Option
	// Args, if any, are the words its argument may be ("bash", "zsh");
	// without them arguments complete as files.
	Args []string
}

// Files are the placeholders that name a file: after such an option the
// shell offers file names.
var Files = []string{"FILE", "EXPORT", "CHECKPOINT", "DISCLOSURE", "DECLARATION", "PARAMS", "BODY", "CANDIDATE", "TESTFILE"}

// optionUse matches "--name" and "--name PLACEHOLDER" in a help text.
var optionUse = regexp.MustCompile(`(?:^|[\s\[(|])--([a-z][a-z0-9-]*)(?: ([A-Z][A-Z0-9_]*))?`)

// FromHelp is the command words with the options its help text names:
// in its usage lines (after "Usage:", up to the first blank line) and in
// its option entries (lines "    --name ...", indented by four spaces,
// under any heading). An option named both with and without a
// placeholder keeps the placeholder.
func FromHelp(words []string, help string) Command {
	c := Command{Words: words}
	add := func(name, value string) {
		i := slices.IndexFunc(c.Options, func(o Option) bool { return o.Name == name })
		switch {
		case i < 0:
			c.Options = append(c.Options, Option{name, value})
		case c.Options[i].Value == "":
			c.Options[i].Value = value
		}
	}
	if _, rest, ok := strings.Cut(help, "Usage:\n"); ok {
		lines, _, _ := strings.Cut(rest, "\n\n")
		for _, m := range optionUse.FindAllStringSubmatch(lines, -1) {
			add(m[1], m[2])
		}
	}
	for _, line := range strings.Split(help, "\n") {
		if strings.HasPrefix(line, "    --") {
			if m := optionUse.FindStringSubmatch(line); m != nil {
				add(m[1], m[2])
			}
		}
	}
	slices.SortFunc(c.Options, func(a, b Option) int { return strings.Compare(a.Name, b.Name) })
	return c
}

// Bash is the bash completion script for program: source it, or put it
// where bash-completion looks (/etc/bash_completion.d/PROGRAM).
func Bash(program string, cmds []Command) string {
	fn := "_" + strings.NewReplacer("-", "_").Replace(program) + "_complete"
	var b strings.Builder
	fmt.Fprintf(&b, "# bash completion for %s, written by %[1]s completion bash.\n", program)
	fmt.Fprintf(&b, "%s() {\n", fn)
	// Under zsh's bashcompinit COMP_WORDS is a zsh array, counted from 1,
	// while COMP_CWORD counts from 0 as in bash: ksh_arrays makes both
	// count from 0 inside this function.
	b.WriteString("    [[ -n ${ZSH_VERSION-} ]] && setopt localoptions ksharrays\n")
	b.WriteString("    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}\n")
	b.WriteString("    local path=\"\" next i w\n")
	// The command named so far: the words that extend a known command,
	// skipping options and the values of those that take one.
	fmt.Fprintf(&b, "    local known='|%s|'\n", strings.Join(paths(cmds), "|"))
	fmt.Fprintf(&b, "    local takes='|%s|'\n", strings.Join(valueOptions(cmds), "|"))
	b.WriteString("    for ((i = 1; i < COMP_CWORD; i++)); do\n")
	b.WriteString("        w=${COMP_WORDS[i]}\n")
	b.WriteString("        if [[ $takes == *\"|$w|\"* ]]; then ((i++)); continue; fi\n")
	b.WriteString("        [[ $w == -* ]] && continue\n")
	b.WriteString("        next=${path:+$path }$w\n")
	b.WriteString("        [[ $known == *\"|$next|\"* ]] && path=$next\n")
	b.WriteString("    done\n")
	b.WriteString("    local opts=\"\" files=\"\" dirs=\"\" values=\"\" words=\"\"\n")
	b.WriteString("    case \"$path\" in\n")
	fmt.Fprintf(&b, "    \"\") words=%q ;;\n", strings.Join(children(cmds, nil), " "))
	for _, p := range parents(cmds) {
		fmt.Fprintf(&b, "    %q) words=%q ;;\n", strings.Join(p, " "), strings.Join(children(cmds, p), " "))
	}
	for _, c := range cmds {
		var opts, files, dirs, values []string
		for _, o := range c.Options {
			opts = append(opts, "--"+o.Name)
			switch {
			case o.Value == "DIR":
				dirs = append(dirs, "--"+o.Name)
			case slices.Contains(Files, o.Value):
				files = append(files, "--"+o.Name)
			case o.Value != "":
				values = append(values, "--"+o.Name)
			}
		}
		fmt.Fprintf(&b, "    %q) opts=%q files=%q dirs=%q values=%q words=%q ;;\n", strings.Join(c.Words, " "),
			strings.Join(opts, " "), strings.Join(files, " "), strings.Join(dirs, " "), strings.Join(values, " "), strings.Join(c.Args, " "))
	}
	b.WriteString("    esac\n")
	// After an option that takes a value: what the value is.
	b.WriteString("    if [[ \" $files \" == *\" $prev \"* ]]; then COMPREPLY=($(compgen -f -- \"$cur\")); return; fi\n")
	b.WriteString("    if [[ \" $dirs \" == *\" $prev \"* ]]; then COMPREPLY=($(compgen -d -- \"$cur\")); return; fi\n")
	b.WriteString("    if [[ \" $values \" == *\" $prev \"* ]]; then COMPREPLY=(); return; fi\n")
	b.WriteString("    if [[ $cur == -* ]]; then COMPREPLY=($(compgen -W \"$opts --help\" -- \"$cur\")); return; fi\n")
	b.WriteString("    if [[ -n $words ]]; then COMPREPLY=($(compgen -W \"$words\" -- \"$cur\")); return; fi\n")
	b.WriteString("    COMPREPLY=($(compgen -f -- \"$cur\"))\n")
	b.WriteString("}\n")
	fmt.Fprintf(&b, "complete -o filenames -F %s %s\n", fn, program)
	return b.String()
}

// Zsh is the zsh completion script for program: the bash one under zsh's
// bashcompinit. Source it from .zshrc (source <(PROGRAM completion zsh)).
func Zsh(program string, cmds []Command) string {
	return fmt.Sprintf("#compdef %s\n# zsh completion for %[1]s, written by %[1]s completion zsh.\n", program) +
		"(( $+functions[compdef] )) || { autoload -U +X compinit && compinit; }\n" +
		"autoload -U +X bashcompinit && bashcompinit\n" + Bash(program, cmds)
}

// valueOptions are the options that take a value, in any command: the
// word after one is its value, never a command word.
func valueOptions(cmds []Command) []string {
	var out []string
	for _, c := range cmds {
		for _, o := range c.Options {
			if o.Value != "" && !slices.Contains(out, "--"+o.Name) {
				out = append(out, "--"+o.Name)
			}
		}
	}
	slices.Sort(out)
	return out
}

// paths are every command's words and every prefix of them, joined by
// spaces: what may be named so far.
func paths(cmds []Command) []string {
	var out []string
	for _, c := range cmds {
		for i := 1; i <= len(c.Words); i++ {
			p := strings.Join(c.Words[:i], " ")
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out
}

// parents are the proper prefixes of commands' words ("approval" for
// "approval wait").
func parents(cmds []Command) [][]string {
	var out [][]string
	for _, c := range cmds {
		for i := 1; i < len(c.Words); i++ {
			p := c.Words[:i]
			if !slices.ContainsFunc(out, func(q []string) bool { return slices.Equal(p, q) }) {
				out = append(out, p)
			}
		}
	}
	return out
}

// children are the words that may follow prefix.
func children(cmds []Command, prefix []string) []string {
	var out []string
	for _, c := range cmds {
		if len(c.Words) > len(prefix) && slices.Equal(c.Words[:len(prefix)], prefix) {
			if w := c.Words[len(prefix)]; !slices.Contains(out, w) {
				out = append(out, w)
			}
		}
	}
	return out
}
