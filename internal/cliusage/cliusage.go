// Package cliusage cuts one command's part out of a program's usage
// text, so that "PROGRAM COMMAND --help" prints only that command's usage
// while the program keeps one text (age's sections: Usage, Commands,
// Options, Environment, Exit status, Examples). The text's usage lines
// are "    PROGRAM WORD ...", its Commands paragraphs start "    WORD ",
// and its option entries "    --flag".
package cliusage

import (
	"regexp"
	"slices"
	"strings"
)

// Text is a program's usage text and its name.
type Text struct {
	Program string // "ledgerd"
	Usage   string
	// Default is the command run when none is named ("serve"): its usage
	// line reads "PROGRAM [Default] ...", its examples may be PROGRAM alone,
	// and it alone shows the whole Environment section (another command
	// shows the variables whose entry names it).
	Default string
}

// Command is the part of the usage that concerns one command (word, the
// first word of its name, such as "token"): its usage lines, its
// paragraph under Commands, the options its usage lines name, the
// environment (all of it for the default command, for another the
// variables whose entry names the command), the exit statuses and its
// examples.
func (u Text) Command(word string) string {
	sections := u.Sections()
	var b strings.Builder
	b.WriteString("Usage:\n")
	var flags []string
	for _, line := range sections["Usage"] {
		if u.UsageLineOf(line, word) {
			b.WriteString(line + "\n")
			flags = append(flags, FlagPattern.FindAllString(line, -1)...)
		}
	}
	if p := Paragraph(sections["Commands"], word); len(p) > 0 {
		b.WriteString("\n" + strings.Join(p, "\n") + "\n")
	}
	var opts []string
	for _, entry := range entries(sections["Options"]) {
		if f := FlagPattern.FindString(entry[0]); f != "" && slices.Contains(flags, f) {
			opts = append(opts, entry...)
		}
	}
	if len(opts) > 0 {
		b.WriteString("\nOptions:\n" + strings.Join(opts, "\n") + "\n")
	}
	env := sections["Environment"]
	if word != u.Default {
		env = nil
		named := regexp.MustCompile(`\b` + regexp.QuoteMeta(word) + `\b`)
		for _, entry := range variables(sections["Environment"]) {
			if named.MatchString(strings.Join(entry, " ")) {
				env = append(env, entry...)
			}
		}
	}
	if len(env) > 0 {
		b.WriteString("\nEnvironment:\n" + strings.Join(env, "\n") + "\n")
	}
	b.WriteString("\nExit status:\n" + strings.Join(sections["Exit status"], "\n") + "\n")
	var examples []string
	for _, line := range sections["Examples"] {
		if u.exampleOf(line, word) {
			examples = append(examples, line)
		}
	}
	if len(examples) > 0 {
		b.WriteString("\nExamples:\n" + strings.Join(examples, "\n") + "\n")
	}
	return b.String()
}

// FlagPattern matches a long flag's name.
var FlagPattern = regexp.MustCompile(`--[a-z][a-z-]*`)

// Sections splits the usage at its headings ("Usage:", "Commands:", …)
// into their lines, blank lines dropped.
func (u Text) Sections() map[string][]string {
	sections := map[string][]string{}
	var cur string
	for _, line := range strings.Split(u.Usage, "\n") {
		switch {
		case line == "":
		case !strings.HasPrefix(line, " ") && strings.HasSuffix(line, ":"):
			cur = strings.TrimSuffix(line, ":")
		default:
			sections[cur] = append(sections[cur], line)
		}
	}
	return sections
}

// UsageLineOf reports whether a line of the Usage section is word's.
func (u Text) UsageLineOf(line, word string) bool {
	rest, ok := strings.CutPrefix(strings.TrimSpace(line), u.Program+" ")
	if !ok {
		return false
	}
	if word == u.Default && strings.HasPrefix(rest, "["+word+"]") {
		return true
	}
	return strings.HasPrefix(rest, word+" ") || rest == word
}

func (u Text) exampleOf(line, word string) bool {
	rest, ok := strings.CutPrefix(strings.TrimSpace(line), "$ "+u.Program)
	if !ok {
		return false
	}
	rest = strings.TrimSpace(rest)
	if word == u.Default && rest == "" {
		return true
	}
	return strings.HasPrefix(rest, word+" ") || rest == word
}

// Paragraph returns the lines of word's paragraph under Commands: its
// first line ("    word  ...") and the deeper-indented lines after it.
func Paragraph(lines []string, word string) []string {
	for i, line := range lines {
		if strings.HasPrefix(line, "    "+word+" ") {
			j := i + 1
			for j < len(lines) && strings.HasPrefix(lines[j], "      ") {
				j++
			}
			return lines[i:j]
		}
	}
	return nil
}

// entries splits an options section into its entries: a line starting
// "    --" and the deeper-indented lines after it.
// variables splits an Environment section into its entries, each
// starting with a line "    NAME".
func variables(lines []string) [][]string {
	var out [][]string
	for _, line := range lines {
		if len(line) > 4 && strings.HasPrefix(line, "    ") && line[4] != ' ' || len(out) == 0 {
			out = append(out, []string{line})
			continue
		}
		out[len(out)-1] = append(out[len(out)-1], line)
	}
	return out
}

func entries(lines []string) [][]string {
	var out [][]string
	for _, line := range lines {
		if strings.HasPrefix(line, "    --") || len(out) == 0 {
			out = append(out, []string{line})
			continue
		}
		out[len(out)-1] = append(out[len(out)-1], line)
	}
	return out
}
