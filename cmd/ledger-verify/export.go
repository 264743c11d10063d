package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/internal/atomicfile"
	"github.com/decisionledger/ledger/internal/keyflag"
	"github.com/decisionledger/ledger/internal/progress"
	"github.com/decisionledger/ledger/internal/termtext"
	"github.com/decisionledger/ledger/verify"
	"github.com/transparency-dev/formats/log"
)

// keyOptions, exportOptions and the commands' usage texts describe the
// flags registered by keyFlags and exportRun.
const keyOptions = `    --key VKEY            The ledger's note verifier key, name+hash+base64,
                          as the ledger's operator publishes it. Repeat it
                          to trust each key of a log whose key rotated
                          (docs/operations.md): every entry is checked with
                          the key its key_id names.
    --key-file FILE       A file holding one verifier key. Repeatable.
    --trust FILE          A trust file: one verifier key per line, blank
                          lines and lines starting with # ignored; a key
                          followed by "retired-at N" was rotated out at
                          tree size N and signs nothing beyond it
                          (docs/log.md, "Trust files"). Repeatable;
                          combines with --key and --key-file.
    --witness VKEY        A witness's cosignature/v1 verifier key (C2SP
                          tlog-cosignature, key type 0x04), as the witness
                          publishes it. Repeat for each trusted witness.
    --witnesses-needed N  Refuse a checkpoint without valid cosignatures
                          from N distinct listed witnesses. Default: every
                          listed witness.
`

const exportOptions = keyOptions + `    --trusted CHECKPOINT  A signed checkpoint file verified before. The
                          export must then prove that its tree extends this
                          one: ask ledgerd for the export with
                          consistency_from=SIZE, SIZE being the trusted
                          checkpoint's tree size (none is needed from the
                          empty tree, size 0, that ledgerd signs first).
    --prev HASH           The entry hash (sha256:...) of the entry before the
                          export's range, from an earlier verified export.
    --all                 Report every failure, not only the first.
    --json                Machine-readable output on standard output.
    --write-checkpoint FILE
                          After the export verifies, write its signed
                          checkpoint to FILE (a temporary file, synced,
                          renamed over FILE): the --trusted of the next
                          export. It is written whatever the command finds
                          in the entries after (a mismatch, no match, a
                          violation), and not when the export fails.
`

const exportUsage = `Usage:
    ledger-verify export (--key VKEY | --key-file FILE | --trust FILE)...
                         [--trusted CHECKPOINT] [--prev HASH] [--all]
                         [--write-checkpoint FILE] [--archive DIR] [--json]
                         EXPORT

Verify an export file (docs/export.md) offline against the ledger's
verifier key: the checkpoint's signature, every entry's encoding, key,
signature, index and prev link, that the entries are leaves of the
checkpoint's tree, and, with --trusted, that the tree extends a checkpoint
verified before. ledgerd serves exports at
/v1/export?start=S&end=E[&consistency_from=SIZE] (docs/api.md).

Options:
` + exportOptions + `    --archive DIR         Also compare every entry with the copy that
                          'ledger-verify monitor --archive DIR' kept, where
                          it kept one: an entry the log now shows
                          differently fails.

Options may come before or after EXPORT.

Examples:
    $ ledger-verify export --key-file ledger.vkey export.ledger
    verified: entries 0 to 999 (1000 entries) of ledger.example.com/log
      checkpoint: tree size 1000
      last entry hash: sha256:...
    $ ledger-verify export --key-file ledger.vkey --trusted last.checkpoint \
          --write-checkpoint last.checkpoint next.ledger
    verified: entries 1000 to 1999 (1000 entries) of ledger.example.com/log
      checkpoint: tree size 2000
      consistent with the trusted checkpoint of size 1000
      last entry hash: sha256:...
`

// keyFlags are the options every verifying command shares: the trusted
// keys (internal/keyflag) and the witness policy.
type keyFlags struct {
	keyflag.Flags
	witnesses       witnessFlag
	witnessesNeeded int
}

func (k *keyFlags) register(fs *flag.FlagSet) {
	k.Flags.Register(fs)
	fs.Var(&k.witnesses, "witness", "")
	fs.IntVar(&k.witnessesNeeded, "witnesses-needed", -1, "")
}

// load returns the trusted key, or the set of every key given, with the
// witness policy.
func (k *keyFlags) load() (*verify.Key, error) {
	key, err := k.Flags.Load()
	if err != nil {
		return nil, err
	}
	return k.witnessPolicy(key)
}

// exportRun holds what export and params share: parsed options and the
// verification of the export file.
type exportRun struct {
	cmd     string // the command's name, for its progress line
	keys    keyFlags
	trusted string
	prev    string
	all     bool
	json    bool
	// checkpointOut is --write-checkpoint: every command that verifies
	// an export writes its checkpoint once it verifies (writeCheckpoint).
	checkpointOut string
}

// writeCheckpoint writes the verified export's signed checkpoint to the
// --write-checkpoint file, if one was given (a temporary file, synced,
// renamed over it). ok is false, with the exit status, if it could not.
func (r *exportRun) writeCheckpoint(cmd string, report *verify.ExportReport, stderr io.Writer) (code int, ok bool) {
	return writeCheckpointFile(cmd, r.checkpointOut, report.Signed, stderr)
}

// writeCheckpointFile writes the verified signed checkpoint to file, if
// not empty, as writeCheckpoint does.
func writeCheckpointFile(cmd, file string, signed []byte, stderr io.Writer) (code int, ok bool) {
	if file == "" {
		return exitOK, true
	}
	if err := atomicfile.Write(file, signed, atomicfile.Options{Mode: 0o644}); err != nil {
		errorf(stderr, "%s: verified, but --write-checkpoint: %v", cmd, err)
		return exitUsage, false
	}
	return exitOK, true
}

func (r *exportRun) register(fs *flag.FlagSet) {
	r.cmd = fs.Name()
	r.keys.register(fs)
	fs.StringVar(&r.trusted, "trusted", "", "")
	fs.StringVar(&r.prev, "prev", "", "")
	fs.BoolVar(&r.all, "all", false, "")
	fs.BoolVar(&r.json, "json", false, "")
	fs.StringVar(&r.checkpointOut, "write-checkpoint", "", "")
}

// verify verifies the export file name; a nil report with a nil error
// never happens. usageErr is set for problems of usage or reading.
func (r *exportRun) verify(name string, stderr io.Writer, onEntry func(uint64, []byte)) (report *verify.ExportReport, verr error, usageErr error) {
	return r.verifyWith(name, stderr, func(o *verify.ExportOptions) { o.OnEntry = onEntry })
}

// verifyParsed is verify with an OnParsed callback instead of OnEntry.
func (r *exportRun) verifyParsed(name string, stderr io.Writer, onParsed func(uint64, *entry.Entry, commit.Digest, []byte)) (report *verify.ExportReport, verr error, usageErr error) {
	return r.verifyWith(name, stderr, func(o *verify.ExportOptions) { o.OnParsed = onParsed })
}

// verifyWith verifies the export file name under r's options, set
// further by set.
func (r *exportRun) verifyWith(name string, stderr io.Writer, set func(*verify.ExportOptions)) (report *verify.ExportReport, verr error, usageErr error) {
	key, opts, err := r.options(stderr)
	if err != nil {
		return nil, nil, err
	}
	set(&opts)
	f, br, err := openExport(name)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	meter := r.meter(stderr, &opts)
	report, err = verify.VerifyExport(br, key, opts)
	meter.Finish()
	return report, err, nil
}

// openExport opens an export file and returns it with a reader of the
// size VerifyExport buffers with (so that it reads through it), or an
// error: a *ledgerdAnswer if the file is an error answer from ledgerd.
func openExport(name string) (*os.File, *bufio.Reader, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, nil, err
	}
	br := bufio.NewReaderSize(f, 64<<10)
	if start, _ := br.Peek(len(ledgerdErrorPrefix)); bytes.Equal(start, []byte(ledgerdErrorPrefix)) {
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(br, 64<<10))
		if err != nil {
			return nil, nil, err
		}
		return nil, nil, checkLedgerdAnswer(name, b)
	}
	return f, br, nil
}

// options loads the key and the verification options the flags give.
func (r *exportRun) options(stderr io.Writer) (*verify.Key, verify.ExportOptions, error) {
	key, err := r.keys.load()
	if err != nil {
		return nil, verify.ExportOptions{}, err
	}
	opts := verify.ExportOptions{All: r.all}
	if r.trusted != "" {
		b, err := keyflag.ReadFileLimit(r.trusted, 16<<10)
		if err != nil {
			return nil, opts, err
		}
		if err := checkLedgerdAnswer(r.trusted, b); err != nil {
			return nil, opts, err
		}
		var cp *log.Checkpoint
		if cp, err = key.Checkpoint(b); err != nil {
			return nil, opts, fmt.Errorf("trusted checkpoint %s: %w", termtext.Quote(r.trusted), err)
		}
		opts.Trusted = cp
	}
	if r.prev != "" {
		d, err := commit.ParseDigest(r.prev)
		if err != nil {
			return nil, opts, fmt.Errorf("--prev: %w", err)
		}
		opts.Prev = &d
	}
	return key, opts, nil
}

// meter starts the progress line of the export's verification on stderr,
// if a terminal (internal/progress), and hooks it to opts: Finish it
// before printing what the verification found.
func (r *exportRun) meter(stderr io.Writer, opts *verify.ExportOptions) *progress.Meter {
	m := progress.New(stderr, programName+": "+r.cmd, "entries")
	opts.Progress = m.Hook()
	return m
}

func runExport(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("export", flag.ContinueOnError)
	var r exportRun
	r.register(fs)
	archiveDir := fs.String("archive", "", "")
	files, code, ok := parseFlags(fs, exportUsage, args, stdout, stderr)
	if !ok {
		return code
	}
	if len(files) != 1 {
		return usageError(stderr, "export", "takes exactly one export file")
	}
	var arch *archiveCheck
	var onEntry func(uint64, []byte)
	if *archiveDir != "" {
		var err error
		if arch, err = openArchive(*archiveDir); err != nil {
			return inputError(stderr, "export", fmt.Errorf("--archive: %w", err))
		}
		onEntry = arch.check
	}
	report, verr, uerr := r.verify(files[0], stderr, onEntry)
	if uerr != nil {
		return inputError(stderr, "export", uerr)
	}
	if verr != nil {
		return reportFailures(stdout, stderr, verr, r.json)
	}
	if arch != nil {
		if err := arch.result(); err != nil {
			return reportFailures(stdout, stderr, err, r.json)
		}
	}
	if code, ok := r.writeCheckpoint("export", report, stderr); !ok {
		return code
	}
	n := report.End - report.Start
	if r.json {
		out := map[string]any{
			"result": "verified", "origin": report.Checkpoint.Origin,
			"tree_size": report.Checkpoint.Size, "start": report.Start, "end": report.End,
			"entries": n, "last_hash": report.LastHash,
		}
		if r.trusted != "" {
			out["consistent_with_size"] = report.ConsistencyFrom
		}
		if len(report.PolicySets) != 0 {
			out["policy_sets"] = len(report.PolicySets)
		}
		if arch != nil {
			out["archive_compared"] = arch.compared
		}
		if r.checkpointOut != "" {
			out["checkpoint_written"] = r.checkpointOut
		}
		termtext.WriteJSON(stdout, out)
		return exitOK
	}
	origin := termtext.Quote(report.Checkpoint.Origin)
	if n == 0 {
		termtext.PrintLine(stdout, "verified: no entries (range %d to %d) of %s", report.Start, report.End, origin)
	} else if n == 1 {
		termtext.PrintLine(stdout, "verified: entry %d of %s", report.Start, origin)
	} else {
		termtext.PrintLine(stdout, "verified: entries %d to %d (%d entries) of %s", report.Start, report.End-1, n, origin)
	}
	termtext.PrintLine(stdout, "  checkpoint: tree size %d", report.Checkpoint.Size)
	switch {
	case r.trusted != "" && report.ConsistencyFrom == 0:
		termtext.PrintLine(stdout, "  consistent with the trusted checkpoint of size 0 (the empty tree)")
	case r.trusted != "":
		termtext.PrintLine(stdout, "  consistent with the trusted checkpoint of size %d", report.ConsistencyFrom)
	}
	if n := len(report.PolicySets); n != 0 {
		termtext.PrintLine(stdout, "  policy sets carried: %d (replay the ledger's decisions with 'ledger-verify decisions')", n)
	}
	termtext.PrintLine(stdout, "  last entry hash: %s", report.LastHash)
	if arch != nil {
		termtext.PrintLine(stdout, "  archive: %s equal to the monitor's copies in %s", termtext.Count(arch.compared, "entry", "entries"), termtext.Quote(*archiveDir))
	}
	if r.checkpointOut != "" {
		termtext.PrintLine(stdout, "  checkpoint written: %s (give it as --trusted next time)", termtext.Quote(r.checkpointOut))
	}
	return exitOK
}

// entryArgs are the arguments of a command about one entry of an export:
// the export flags, --export, --index and one file.
type entryArgs struct {
	r          exportRun
	exportFile string
	index      uint64
	file       string
	// allowNonInteger: params --allow-non-integer.
	allowNonInteger bool
	// search: params without --index (every entry is compared).
	search bool
}

// parseEntryArgs parses them; what names the file in the usage error,
// usage is the command's usage text. A nil result comes with the exit
// status.
func parseEntryArgs(cmd, usage, what string, args []string, stdout, stderr io.Writer) (*entryArgs, int) {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	var a entryArgs
	a.r.register(fs)
	fs.StringVar(&a.exportFile, "export", "", "")
	indexText := fs.String("index", "", "")
	if cmd == "params" {
		fs.BoolVar(&a.allowNonInteger, "allow-non-integer", false, "")
	}
	files, code, ok := parseFlags(fs, usage, args, stdout, stderr)
	if !ok {
		return nil, code
	}
	if cmd == "params" && *indexText == "" && len(files) == 1 && a.exportFile != "" {
		a.search = true // params without --index searches the export
		a.file = files[0]
		return &a, exitOK
	}
	if len(files) != 1 || a.exportFile == "" || *indexText == "" {
		if cmd == "params" {
			return nil, usageError(stderr, cmd, "needs --export and exactly one %s (and --index N to compare one entry)", what)
		}
		return nil, usageError(stderr, cmd, "needs --export, --index and exactly one %s", what)
	}
	var err error
	if a.index, err = strconv.ParseUint(*indexText, 10, 64); err != nil {
		return nil, usageError(stderr, cmd, "--index %q is not an entry index", *indexText)
	}
	a.file = files[0]
	return &a, exitOK
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
		return nil, inputError(stderr, cmd, uerr)
	}
	if verr != nil {
		return nil, reportFailures(stdout, stderr, verr, r.json)
	}
	if code, ok := r.writeCheckpoint(cmd, report, stderr); !ok {
		return nil, code
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
