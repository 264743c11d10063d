// Package cliflag parses a command's flags wherever they stand among its
// arguments, for ledger-verify and ledger-declare:
//
//	ledger-verify export --key-file ledger.vkey export.ledger
//	ledger-verify export export.ledger --key-file ledger.vkey
//
// The standard flag package stops at the first argument that is not a
// flag; Parse takes that argument as a positional one and parses on. As
// with flag, "--" ends the flags: every argument after it is positional,
// even one that starts with "-"; and "-" alone is positional (standard
// input).
package cliflag

import (
	"flag"
	"strings"
)

// Parse parses the flags of fs among args and returns the positional
// arguments in order. Its errors are fs.Parse's, flag.ErrHelp included
// (for -h, -help and --help when fs defines no such flag).
func Parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if terminated(fs, args[:len(args)-len(rest)]) {
			return append(positional, rest...), nil
		}
		if len(rest) == 0 {
			return positional, nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// terminated reports whether parsed, the arguments one fs.Parse consumed
// without error, ended with a "--" that ended the flags, rather than with
// one given as a flag's value ("--prev --"). It replays flag's reading:
// each argument is a flag; one without "=" that does not take a boolean
// takes the next argument as its value.
func terminated(fs *flag.FlagSet, parsed []string) bool {
	for i := 0; i < len(parsed); i++ {
		s := parsed[i]
		if s == "--" {
			return true
		}
		name := strings.TrimPrefix(strings.TrimPrefix(s, "-"), "-")
		if strings.Contains(name, "=") {
			continue
		}
		if f := fs.Lookup(name); f != nil && !isBool(f) {
			i++ // its value
		}
	}
	return false
}

func isBool(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}
