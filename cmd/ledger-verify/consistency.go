package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/decisionledger/ledger/internal/keyflag"
	"github.com/decisionledger/ledger/internal/termtext"
	"github.com/decisionledger/ledger/verify"
	"github.com/transparency-dev/formats/log"
	"github.com/transparency-dev/merkle/proof"
)

const consistencyUsage = `Usage:
    ledger-verify consistency (--key VKEY | --key-file FILE | --trust FILE)...
                              [--json] OLD NEW [PROOF | --url URL]

Verify that two signed checkpoint files are of one history: both signed
by the ledger's key, and the larger tree extends the smaller one, by an
RFC 6962 consistency proof. PROOF is a file holding the JSON ledgerd's
/v1/consistency answers (docs/api.md, "Consistency proof files" below);
with --url ledger-verify fetches it from the ledgerd at URL. OLD and NEW
may come in either order: the output says which is newer. Two
checkpoints of the same size need no proof (their roots must be equal),
nor does one of size 0.

Consistency proof files: the JSON object
    {"size1":M,"tree_size":N,"hashes":["<base64>",...]}
M and N are the two checkpoints' tree sizes, smaller first; the hashes
(32 bytes each, standard base64) are the RFC 6962 proof that the tree of
size M is a prefix of the tree of size N. Fetch one with
    curl --fail -o proof.json 'URL/v1/consistency?size1=M&tree_size=N'

Options:
` + keyOptions + `    --url URL             Fetch the proof from the ledgerd at URL (its
                          /v1/consistency endpoint).
` + netOptions + `    --json                Machine-readable output on standard output.

Exit status: 0 consistent, 1 a checkpoint does not verify, 2 bad usage or
unreadable input, 3 both checkpoints verify but are not proved consistent
(the proof fails, or they have the same size and different roots): keep
both files, they are evidence that the log signed two histories, unless
the log can still produce a valid proof. 4 with --url: ledgerd could not
be reached or did not answer the proof.

Examples:
    $ ledger-verify consistency --key-file ledger.vkey --url https://ledger.example.com \
          last.checkpoint new.checkpoint
    consistent: the tree of size 1000 (last.checkpoint) is a prefix of the tree of size 2000 (new.checkpoint)
    $ curl --fail -o proof.json 'https://ledger.example.com/v1/consistency?size1=1000&tree_size=2000'
    $ ledger-verify consistency --key-file ledger.vkey last.checkpoint new.checkpoint proof.json
`

// Exit statuses beyond exitOK, exitFailed and exitUsage (main.go).
const (
	// exitInconsistent: two checkpoints, each signed by the trusted key,
	// are not proved to be of one history (evidence of a fork).
	exitInconsistent = 3
	// exitUnreachable: the log could not be read (no answer, or an
	// error answer); nothing was found wrong with it.
	exitUnreachable = 4
)

// consistencyProof is a consistency proof file, the JSON of ledgerd's
// /v1/consistency.
type consistencyProof struct {
	Size1    *uint64  `json:"size1"`
	TreeSize *uint64  `json:"tree_size"`
	Hashes   [][]byte `json:"hashes"`
}

// maxProofHashes bounds a consistency proof: at most about 2·64 hashes
// for any tree size.
const maxProofHashes = 130

// parseConsistencyProof parses a proof file strictly: exactly the three
// members, 32-byte hashes.
func parseConsistencyProof(b []byte) (*consistencyProof, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	var p consistencyProof
	if err := d.Decode(&p); err != nil {
		return nil, fmt.Errorf("not a consistency proof (JSON {\"size1\",\"tree_size\",\"hashes\"}): %v", err)
	}
	if d.More() {
		return nil, errors.New("not a consistency proof: more than one JSON value")
	}
	if p.Size1 == nil || p.TreeSize == nil || p.Hashes == nil {
		return nil, errors.New("not a consistency proof: size1, tree_size and hashes are required")
	}
	if len(p.Hashes) > maxProofHashes {
		return nil, fmt.Errorf("consistency proof of %d hashes, at most %d", len(p.Hashes), maxProofHashes)
	}
	for i, h := range p.Hashes {
		if len(h) != 32 {
			return nil, fmt.Errorf("consistency proof: hash %d is %d bytes, not 32", i, len(h))
		}
	}
	return &p, nil
}

// consistencyPath is where ledgerd serves the proof between two sizes.
func consistencyPath(size1, size2 uint64) string {
	return fmt.Sprintf("/v1/consistency?size1=%d&tree_size=%d", size1, size2)
}

// fetchConsistency fetches and parses the proof from size1 to size2.
func (f *fetcher) fetchConsistency(ctx context.Context, size1, size2 uint64) ([][]byte, error) {
	b, err := f.get(ctx, consistencyPath(size1, size2), 64<<10)
	if err != nil {
		return nil, err
	}
	p, err := parseConsistencyProof(b)
	if err != nil {
		return nil, &fetchError{url: f.base.String() + consistencyPath(size1, size2), status: 200, err: err}
	}
	if *p.Size1 != size1 || *p.TreeSize != size2 {
		return nil, &fetchError{url: f.base.String() + consistencyPath(size1, size2), status: 200,
			err: fmt.Errorf("the answer is a proof from %d to %d", *p.Size1, *p.TreeSize)}
	}
	return p.Hashes, nil
}

// describeInconsistency says why a consistency proof failed without the
// proof library's dump of both roots as byte lists.
func describeInconsistency(err error) string {
	var mismatch proof.RootMismatchError
	var mismatchPtr *proof.RootMismatchError
	if errors.As(err, &mismatch) || errors.As(err, &mismatchPtr) {
		return "the proof does not lead to the checkpoints' root hashes"
	}
	return err.Error()
}

// signedCheckpoint is a checkpoint file opened with the trusted key.
type signedCheckpoint struct {
	name   string
	signed []byte
	cp     *log.Checkpoint
}

// readCheckpointFile reads and opens a signed checkpoint file; usageErr
// is set when it cannot be read (exit status 2), verr when it does not
// verify (exit status 1).
func readCheckpointFile(keys *keyFlags, name string) (c *signedCheckpoint, verr, usageErr error) {
	key, err := keys.load()
	if err != nil {
		return nil, nil, err
	}
	b, err := keyflag.ReadFileLimit(name, 16<<10)
	if err == nil {
		err = checkLedgerdAnswer(name, b)
	}
	if err != nil {
		return nil, nil, err
	}
	cp, err := key.Checkpoint(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", termtext.Quote(name), err), nil
	}
	return &signedCheckpoint{name: name, signed: b, cp: cp}, nil, nil
}

func runConsistency(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("consistency", flag.ContinueOnError)
	var keys keyFlags
	keys.register(fs)
	var net netFlags
	net.register(fs)
	urlFlag := fs.String("url", "", "")
	jsonOut := fs.Bool("json", false, "")
	files, code, ok := parseFlags(fs, consistencyUsage, args, stdout, stderr)
	if !ok {
		return code
	}
	switch {
	case len(files) < 2 || len(files) > 3:
		return usageError(stderr, "consistency", "takes two checkpoint files, OLD and NEW, and a proof file or --url")
	case len(files) == 3 && *urlFlag != "":
		return usageError(stderr, "consistency", "a PROOF file and --url exclude each other")
	}
	if _, err := keys.load(); err != nil {
		errorf(stderr, "consistency: %v", err)
		return exitUsage
	}
	var both [2]*signedCheckpoint
	for i, name := range files[:2] {
		c, verr, uerr := readCheckpointFile(&keys, name)
		if uerr != nil {
			return inputError(stderr, "consistency", uerr)
		}
		if verr != nil {
			return reportFailures(stdout, stderr, verr, *jsonOut)
		}
		both[i] = c
	}
	older, newer := both[0], both[1]
	swapped := older.cp.Size > newer.cp.Size
	if swapped {
		older, newer = newer, older
	}
	m, n := older.cp.Size, newer.cp.Size
	var hashes [][]byte
	// Between equal sizes, or from size 0, the proof is empty; a proof
	// file given is still read, so that a wrong one is noticed.
	if m != n && m != 0 && len(files) == 2 && *urlFlag == "" {
		errorf(stderr, "consistency: the checkpoints have sizes %d and %d: a consistency proof is needed, a PROOF file or --url", m, n)
		hintf(stderr, "ledgerd serves it at %s", consistencyPath(m, n))
		return exitUsage
	}
	if len(files) == 3 {
		b, err := keyflag.ReadFileLimit(files[2], 64<<10)
		if err == nil {
			err = checkLedgerdAnswer(files[2], b)
		}
		if err != nil {
			return inputError(stderr, "consistency", err)
		}
		p, err := parseConsistencyProof(b)
		if err != nil {
			return inputError(stderr, "consistency", fmt.Errorf("%s: %w", termtext.Quote(files[2]), err))
		}
		if *p.Size1 != m || *p.TreeSize != n {
			errorf(stderr, "consistency: %s is a proof from tree size %d to %d; the checkpoints have sizes %d and %d", termtext.Quote(files[2]), *p.Size1, *p.TreeSize, m, n)
			hintf(stderr, "ledgerd serves the proof between them at %s", consistencyPath(m, n))
			return exitUsage
		}
		hashes = p.Hashes
	} else if *urlFlag != "" && m != n && m != 0 {
		f, err := net.fetcher(*urlFlag)
		if err != nil {
			return usageError(stderr, "consistency", "--url: %v", err)
		}
		hashes, err = f.fetchConsistency(context.Background(), m, n)
		if err != nil {
			errorf(stderr, "consistency: %v", err)
			hintf(stderr, "nothing was found wrong with the checkpoints: the proof could not be fetched; check the URL and run again")
			return exitUnreachable
		}
	}
	if err := verify.Consistency(older.cp, newer.cp, hashes); err != nil {
		if *jsonOut {
			termtext.WriteJSON(stdout, map[string]any{"result": "inconsistent", "older": older.name, "older_size": m,
				"newer": newer.name, "newer_size": n, "error": describeInconsistency(err)})
			return exitInconsistent
		}
		errorf(stderr, "consistency: NOT CONSISTENT: %s (tree size %d) and %s (tree size %d), both signed by the trusted key: %s",
			termtext.Quote(older.name), m, termtext.Quote(newer.name), n, describeInconsistency(err))
		if m == n {
			hintf(stderr, "two checkpoints signed for tree size %d with different roots prove that the log signed two histories: keep both files as evidence", m)
		} else {
			hintf(stderr, "keep both files: unless the log can produce a valid proof between them (%s), they are evidence that it signed two histories", consistencyPath(m, n))
		}
		return exitInconsistent
	}
	if *jsonOut {
		termtext.WriteJSON(stdout, map[string]any{"result": "consistent", "origin": newer.cp.Origin,
			"older": older.name, "older_size": m, "newer": newer.name, "newer_size": n})
		return exitOK
	}
	termtext.PrintLine(stdout, "consistent: the tree of size %d (%s) is a prefix of the tree of size %d (%s) of %s",
		m, termtext.Quote(older.name), n, termtext.Quote(newer.name), termtext.Quote(newer.cp.Origin))
	if swapped {
		termtext.PrintLine(stdout, "  note: %s is the newer checkpoint (tree size %d)", termtext.Quote(newer.name), n)
	}
	return exitOK
}
