package main

import (
	"flag"
	"strings"
)

// commandUsage is the usage of one command, cut from the usage text so
// that there is one text to keep: the command's synopsis, its paragraph
// under "Commands:", and the paragraphs under "Options:" of the flags its
// flag set defines, in the usage text's order.
func commandUsage(fs *flag.FlagSet) string {
	if onHelp != nil {
		onHelp(fs)
	}
	var b strings.Builder
	b.WriteString(synopsisAndText(fs.Name()))
	var opts []string
	described := map[string]bool{}
	for _, p := range section("Options:") {
		flagName, _, _ := strings.Cut(strings.TrimPrefix(p, "    --"), " ")
		if fs.Lookup(flagName) != nil {
			opts = append(opts, p)
			described[flagName] = true
		}
	}
	fs.VisitAll(func(f *flag.Flag) {
		if !described[f.Name] {
			opts = append(opts, "    --"+f.Name+" "+undescribed+"\n")
		}
	})
	if len(opts) > 0 {
		b.WriteString("\nOptions:\n" + strings.Join(opts, ""))
	}
	b.WriteString("\nRun ledgerctl --help for every command, the environment and the exit statuses.\n")
	return b.String()
}

// onHelp, if set, sees the flag set of a command asked for its help: the
// tests hold each command's usage to the flags it defines.
var onHelp func(*flag.FlagSet)

// synopsisAndText is the usage text's synopses and paragraphs under
// "Commands:" of the command name, or of every command whose name starts
// with name and a space (approval's).
func synopsisAndText(name string) string {
	var b strings.Builder
	b.WriteString("Usage:\n")
	isEntry := func(p, prefix string) bool {
		return strings.HasPrefix(p, prefix+" ") || strings.HasPrefix(p, prefix+"\n")
	}
	for _, p := range section("Usage:") {
		if isEntry(p, "    ledgerctl "+name) {
			b.WriteString(p)
		}
	}
	b.WriteString("\n")
	for _, p := range section("Commands:") {
		if isEntry(p, "    "+name) {
			b.WriteString(p)
		}
	}
	return b.String()
}

// undescribed marks a flag the usage text has no paragraph for.
const undescribed = "(not described in ledgerctl --help)"

// section returns the entries of one section of the usage text: each
// starts on a line indented by four spaces and goes on over the lines
// indented deeper, with their newlines.
func section(title string) []string {
	_, rest, ok := strings.Cut(usage, title+"\n")
	if !ok {
		return nil
	}
	var entries []string
	for _, line := range strings.SplitAfter(rest, "\n") {
		switch {
		case strings.HasPrefix(line, "     ") && len(entries) > 0:
			entries[len(entries)-1] += line
		case strings.HasPrefix(line, "    "):
			entries = append(entries, line)
		default:
			return entries
		}
	}
	return entries
}
