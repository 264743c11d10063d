package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/verify"
	"github.com/transparency-dev/formats/log"
)

// keyFlags are the options every verifying command shares.
type keyFlags struct {
	key, keyFile string
}

func (k *keyFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&k.key, "key", "", "")
	fs.StringVar(&k.keyFile, "key-file", "", "")
}

func (k *keyFlags) load() (*verify.Key, error) {
	text := k.key
	switch {
	case k.key != "" && k.keyFile != "":
		return nil, errors.New("--key and --key-file exclude each other")
	case k.keyFile != "":
		b, err := readFileLimit(k.keyFile, 4096)
		if err != nil {
			return nil, err
		}
		text = strings.TrimSpace(string(b))
	case k.key == "":
		return nil, errors.New("a verifier key is required (--key or --key-file)")
	}
	return verify.ParseKey(text)
}

func readFileLimit(name string, limit int64) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: larger than %d bytes", quote(name), limit)
	}
	return b, nil
}

func usageError(stderr io.Writer, cmd, format string, args ...any) int {
	errorf(stderr, "%s: %s", cmd, fmt.Sprintf(format, args...))
	hintf(stderr, "run %s --help for usage and examples", programName)
	return exitUsage
}

// isTerminal reports whether w is a terminal, for the progress line.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// exportRun holds what export and params share: parsed options and the
// verification of the export file.
type exportRun struct {
	keys    keyFlags
	trusted string
	prev    string
	all     bool
	json    bool
}

func (r *exportRun) register(fs *flag.FlagSet) {
	r.keys.register(fs)
	fs.StringVar(&r.trusted, "trusted", "", "")
	fs.StringVar(&r.prev, "prev", "", "")
	fs.BoolVar(&r.all, "all", false, "")
	fs.BoolVar(&r.json, "json", false, "")
}

// verify verifies the export file name; a nil report with a nil error
// never happens. usageErr is set for problems of usage or reading.
func (r *exportRun) verify(name string, stderr io.Writer, onEntry func(uint64, []byte)) (report *verify.ExportReport, verr error, usageErr error) {
	key, err := r.keys.load()
	if err != nil {
		return nil, nil, err
	}
	opts := verify.ExportOptions{All: r.all, OnEntry: onEntry}
	if r.trusted != "" {
		b, err := readFileLimit(r.trusted, 16<<10)
		if err != nil {
			return nil, nil, err
		}
		var cp *log.Checkpoint
		if cp, err = key.Checkpoint(b); err != nil {
			return nil, nil, fmt.Errorf("trusted checkpoint %s: %w", quote(r.trusted), err)
		}
		opts.Trusted = cp
	}
	if r.prev != "" {
		d, err := commit.ParseDigest(r.prev)
		if err != nil {
			return nil, nil, fmt.Errorf("--prev: %w", err)
		}
		opts.Prev = &d
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	if isTerminal(stderr) {
		opts.Progress = func(done, total uint64) {
			if done%10000 == 0 || done == total {
				fmt.Fprintf(stderr, "\r%s: %d of %d entries verified", programName, done, total)
				if done == total {
					fmt.Fprintln(stderr)
				}
			}
		}
	}
	report, err = verify.VerifyExport(f, key, opts)
	return report, err, nil
}

// failureList flattens a joined verification error into its failures.
func failureList(err error) []error {
	var out []error
	var walk func(error)
	walk = func(err error) {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		out = append(out, err)
	}
	walk(err)
	return out
}

func failureJSON(err error) []map[string]any {
	var list []map[string]any
	for _, e := range failureList(err) {
		m := map[string]any{"error": e.Error()}
		var f *verify.Failure
		if errors.As(e, &f) {
			m["check"] = f.Check
			if f.Index != verify.NoIndex {
				m["index"] = f.Index
			} else {
				m["part"] = f.Part
			}
		}
		list = append(list, m)
	}
	return list
}

func reportFailures(stdout, stderr io.Writer, err error, jsonOut bool) int {
	if jsonOut {
		writeJSON(stdout, map[string]any{"result": "failed", "failures": failureJSON(err)})
		return exitFailed
	}
	for _, e := range failureList(err) {
		errorf(stderr, "%v", e)
	}
	return exitFailed
}

func runExport(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("export", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var r exportRun
	r.register(fs)
	if err := fs.Parse(args); err != nil {
		return usageError(stderr, "export", "%v", err)
	}
	if fs.NArg() != 1 {
		return usageError(stderr, "export", "takes exactly one export file")
	}
	report, verr, uerr := r.verify(fs.Arg(0), stderr, nil)
	if uerr != nil {
		errorf(stderr, "export: %v", uerr)
		return exitUsage
	}
	if verr != nil {
		return reportFailures(stdout, stderr, verr, r.json)
	}
	n := report.End - report.Start
	if r.json {
		out := map[string]any{
			"result": "verified", "origin": report.Checkpoint.Origin,
			"tree_size": report.Checkpoint.Size, "start": report.Start, "end": report.End,
			"entries": n, "last_hash": report.LastHash,
		}
		if report.ConsistencyFrom != 0 {
			out["consistent_with_size"] = report.ConsistencyFrom
		}
		writeJSON(stdout, out)
		return exitOK
	}
	origin := quote(report.Checkpoint.Origin)
	if n == 0 {
		printLine(stdout, "verified: no entries (range %d to %d) of %s", report.Start, report.End, origin)
	} else {
		printLine(stdout, "verified: entries %d to %d (%d entries) of %s", report.Start, report.End-1, n, origin)
	}
	printLine(stdout, "  checkpoint: tree size %d", report.Checkpoint.Size)
	if report.ConsistencyFrom != 0 {
		printLine(stdout, "  consistent with the trusted checkpoint of size %d", report.ConsistencyFrom)
	}
	printLine(stdout, "  last entry hash: %s", report.LastHash)
	return exitOK
}

// entryArgs are the arguments of a command about one entry of an export:
// the export flags, --export, --index and one file.
type entryArgs struct {
	r          exportRun
	exportFile string
	index      uint64
	file       string
}

// parseEntryArgs parses them; what names the file in the usage error.
func parseEntryArgs(cmd, what string, args []string, stderr io.Writer) (*entryArgs, int) {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var a entryArgs
	a.r.register(fs)
	fs.StringVar(&a.exportFile, "export", "", "")
	indexText := fs.String("index", "", "")
	if err := fs.Parse(args); err != nil {
		return nil, usageError(stderr, cmd, "%v", err)
	}
	if fs.NArg() != 1 || a.exportFile == "" || *indexText == "" {
		return nil, usageError(stderr, cmd, "needs --export, --index and exactly one %s", what)
	}
	var err error
	if a.index, err = strconv.ParseUint(*indexText, 10, 64); err != nil {
		return nil, usageError(stderr, cmd, "--index %q is not an entry index", *indexText)
	}
	a.file = fs.Arg(0)
	return &a, exitOK
}

func runParams(args []string, stdout, stderr io.Writer) int {
	a, code := parseEntryArgs("params", "candidate parameter file", args, stderr)
	if a == nil {
		return code
	}
	r, index := &a.r, a.index
	candidate, err := readFileLimit(a.file, commit.DefaultMaxBytes)
	if err != nil {
		errorf(stderr, "params: %v", err)
		return exitUsage
	}
	e, code := r.verifiedEntry("params", a.exportFile, index, stdout, stderr)
	if e == nil {
		return code
	}
	result, err := verify.Params(e, candidate)
	if r.json {
		out := map[string]any{"result": result, "index": index, "params_digest": e.Params.Digest}
		var de *commit.DomainError
		if errors.As(err, &de) {
			out["refusal"] = refusalJSON(de)
		}
		writeJSON(stdout, out)
	} else {
		switch result {
		case verify.Match:
			printLine(stdout, "match: entry %d committed to exactly these parameters", index)
		case verify.Mismatch:
			printLine(stdout, "mismatch: entry %d committed to other parameters (%s, %d bytes)", index, e.Params.Digest, e.Params.Size)
		case verify.Refused:
			printLine(stdout, "refused: the candidate is outside the strict input domain: %v", err)
		}
	}
	if result != verify.Match {
		return exitFailed
	}
	return exitOK
}

// verifiedEntry verifies an export and returns its entry index, or nil
// and the exit status after reporting why not.
func (r *exportRun) verifiedEntry(cmd, exportFile string, index uint64, stdout, stderr io.Writer) (*entry.Entry, int) {
	var found []byte
	report, verr, uerr := r.verify(exportFile, stderr, func(i uint64, b []byte) {
		if i == index {
			found = b
		}
	})
	if uerr != nil {
		errorf(stderr, "%s: %v", cmd, uerr)
		return nil, exitUsage
	}
	if verr != nil {
		return nil, reportFailures(stdout, stderr, verr, r.json)
	}
	if found == nil {
		errorf(stderr, "%s: entry %d is not in the export (entries %d to %d)", cmd, index, report.Start, report.End)
		return nil, exitUsage
	}
	e, err := entry.Parse(found)
	if err != nil { // verified above; kept so nothing unverified is compared
		return nil, reportFailures(stdout, stderr, err, r.json)
	}
	return e, exitOK
}

func runProof(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("proof", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var keys keyFlags
	keys.register(fs)
	paramsFile := fs.String("params", "", "")
	jsonOut := fs.Bool("json", false, "")
	if err := fs.Parse(args); err != nil {
		return usageError(stderr, "proof", "%v", err)
	}
	if fs.NArg() != 1 {
		return usageError(stderr, "proof", "takes exactly one tlog-proof file")
	}
	key, err := keys.load()
	if err != nil {
		errorf(stderr, "proof: %v", err)
		return exitUsage
	}
	b, err := readFileLimit(fs.Arg(0), 1<<20)
	if err != nil {
		errorf(stderr, "proof: %v", err)
		return exitUsage
	}
	var candidate []byte
	if *paramsFile != "" {
		if candidate, err = readFileLimit(*paramsFile, commit.DefaultMaxBytes); err != nil {
			errorf(stderr, "proof: %v", err)
			return exitUsage
		}
	}
	e, cp, err := verify.VerifyTlogProof(b, key)
	if err != nil {
		return reportFailures(stdout, stderr, err, *jsonOut)
	}
	out := map[string]any{"result": "verified", "index": e.Index, "origin": cp.Origin, "tree_size": cp.Size,
		"action": e.Action, "decision": e.Decision, "params_digest": e.Params.Digest}
	status := exitOK
	var paramsLine string
	if candidate != nil {
		result, perr := verify.Params(e, candidate)
		out["params"] = result
		var de *commit.DomainError
		if errors.As(perr, &de) {
			out["refusal"] = refusalJSON(de)
		}
		switch result {
		case verify.Match:
			paramsLine = "  params: match: the entry committed to exactly these parameters"
		case verify.Mismatch:
			paramsLine = "  params: mismatch: the entry committed to other parameters"
			status = exitFailed
		default:
			paramsLine = fmt.Sprintf("  params: refused: %v", perr)
			status = exitFailed
		}
	}
	if *jsonOut {
		writeJSON(stdout, out)
		return status
	}
	printLine(stdout, "verified: entry %d of %s is in the tree of size %d", e.Index, quote(cp.Origin), cp.Size)
	printLine(stdout, "  %s: %s by %s for %s", quote(e.Action), quote(string(e.Decision)), quote(e.Mediator), quote(e.Principal))
	if paramsLine != "" {
		printLine(stdout, "%s", paramsLine)
	}
	return status
}
