package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/internal/cliflag"
	"github.com/decisionledger/ledger/internal/keyflag"
	"github.com/decisionledger/ledger/internal/termtext"
)

// runDisclose writes the part of a disclosure file that opens only the
// fields named: what a workload hands an auditor who is to see those and
// no others (docs/commitment.md §7.4). It reads and writes files only.
func runDisclose(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("disclose", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fields := fs.String("fields", "", "")
	out := fs.String("out", "", "")
	allowNonInteger := fs.Bool("allow-non-integer", false, "")
	const synopsis = "disclose --fields NAME[,NAME...] [--allow-non-integer] --out FILE DISCLOSURE"
	files, err := cliflag.Parse(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, commandUsage(fs))
		return exitOK
	}
	if err != nil {
		errorf(stderr, "disclose: %v", err)
		hintf(stderr, "usage: %s %s", programName, synopsis)
		return exitUsage
	}
	if len(files) != 1 || *out == "" {
		errorf(stderr, "disclose: needs --out and exactly one disclosure file")
		hintf(stderr, "usage: %s %s", programName, synopsis)
		return exitUsage
	}
	var names []string
	if *fields != "" {
		names = strings.Split(*fields, ",")
	}
	data, err := keyflag.ReadFileLimit(files[0], 8*commit.DefaultMaxBytes)
	if err != nil {
		errorf(stderr, "disclose: %v", err)
		return exitUsage
	}
	x, err := commit.ParseDisclosure(data, commit.Domain{AllowNonInteger: *allowNonInteger})
	if err != nil {
		errorf(stderr, "disclose: %s: %v", termtext.Quote(files[0]), err)
		return exitFailed
	}
	part, err := x.Only(names...)
	if err != nil {
		errorf(stderr, "disclose: %v (the file opens %s)", err, strings.Join(x.Disclosed(), ", "))
		return exitFailed
	}
	b, _ := part.MarshalJSON()
	f, err := os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		errorf(stderr, "disclose: %v", err)
		return exitUsage
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		errorf(stderr, "disclose: %v", err)
		return exitFailed
	}
	if err := f.Close(); err != nil {
		errorf(stderr, "disclose: %v", err)
		return exitFailed
	}
	hidden := part.Hidden()
	termtext.PrintLine(stdout, "wrote %s: %d of %d fields disclosed (hidden: %s)", termtext.Quote(*out), len(part.Disclosed()), len(x.Fields()), strings.Join(hidden, ", "))
	return exitOK
}
