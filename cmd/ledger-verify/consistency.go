package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/decisionledger/ledger/internal/keyflag"
	"github.com/decisionledger/ledger/internal/termtext"
	"github.com/decisionledger/ledger/verify"
	"github.com/transparency-dev/formats/log"
)

const consistencyUsage = `Usage:
    ledger-verify consistency (--key VKEY | --key-file FILE | --trust FILE)...
                              [--json] OLD NEW [PROOF | --url URL]

Verify that two signed checkpoint files are of one history: both signed
by the ledger's key, and the larger tree extends the smaller one, by a
consistency proof. PROOF is a file holding the JSON ledgerd's
/v1/consistency answers, or a monitor's prefix proof ("Consistency proof
files" below); with --url ledger-verify fetches the former from the
ledgerd at URL. OLD and NEW
may come in either order: the output says which is newer. Two
checkpoints of the same size need no proof (their roots must be equal),
nor does one of size 0.

Consistency proof files: the JSON object
    {"size1":M,"tree_size":N,"hashes":["<base64>",...]}
M and N are the two checkpoints' tree sizes, smaller first; the hashes
(32 bytes each, canonical standard base64) are the RFC 6962 proof that
the tree of size M is a prefix of the tree of size N. Fetch one with
    curl --fail -o proof.json 'URL/v1/consistency?size1=M&tree_size=N'
or a prefix proof, which 'ledger-verify monitor' writes as evidence of a
fork (docs/operations.md, "Evidence of a fork"):
    {"size1":M,"tree_size":N,"prefix":["<base64>",...],"rest":[...]}
the hashes of the compact ranges [0, M) and [M, N) of the tree of size
N. A proof is not signed: it proves something only if its hashes lead to
NEW's signed root. Then it shows either that NEW extends OLD, or that it
does not (a fork), from the root it gives for NEW's first M leaves. An
RFC 6962 proof from a size M that is a power of two holds no hash of
that tree, so it can show consistency but never a fork.

Options:
` + keyOptions + `    --url URL             Fetch the proof from the ledgerd at URL (its
                          /v1/consistency endpoint).
` + netOptions + `    --json                Machine-readable output on standard output.

Exit status: 0 consistent; 1 a checkpoint does not verify, or the proof
does not lead to NEW's signed root: it proves nothing (a damaged or
stale copy is enough), fetch it again from the log; 2 bad usage or
unreadable input; 3 proved NOT CONSISTENT: both checkpoints verify, and
the proof, leading to NEW's signed root, gives NEW's first M leaves
another root than OLD's (or the two have the same size and different
roots): keep the files, they prove that the log signed two histories;
4 with --url: ledgerd could not be reached or did not answer the proof.

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

// consistencyProof is a proof file: an RFC 6962 consistency proof (the
// JSON of ledgerd's /v1/consistency: Hashes), or a prefix proof (Prefix
// and Rest, what the monitor writes as evidence of a fork).
type consistencyProof struct {
	Size1    *uint64      `json:"size1"`
	TreeSize *uint64      `json:"tree_size"`
	Hashes   *[]proofHash `json:"hashes"`
	Prefix   *[]proofHash `json:"prefix"`
	Rest     *[]proofHash `json:"rest"`
}

// prefixProofFile is a prefix proof as the monitor writes it.
type prefixProofFile struct {
	Size1    uint64   `json:"size1"`
	TreeSize uint64   `json:"tree_size"`
	Prefix   [][]byte `json:"prefix"`
	Rest     [][]byte `json:"rest"`
}

// proofHash is a 32-byte hash in canonical standard base64 (RFC 4648
// §4, no line breaks, the padding bits zero), so that a proof file has
// one spelling: a changed byte is a changed proof, never the same one.
type proofHash []byte

func (h *proofHash) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return errors.New("a hash is not a JSON string")
	}
	d, err := base64.StdEncoding.DecodeString(s)
	if err != nil || base64.StdEncoding.EncodeToString(d) != s {
		return errors.New("a hash is not in canonical standard base64")
	}
	if len(d) != hashSize {
		return fmt.Errorf("a hash of %d bytes, not %d", len(d), hashSize)
	}
	*h = d
	return nil
}

// maxProofHashes bounds a consistency proof: at most about 2·64 hashes
// for any tree size.
const maxProofHashes = 130

// parseConsistencyProof parses a proof file strictly: size1, tree_size,
// and either hashes or prefix and rest, of canonical 32-byte hashes.
func parseConsistencyProof(b []byte) (*consistencyProof, error) {
	if err := checkProofMembers(b); err != nil {
		return nil, err
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	var p consistencyProof
	if err := d.Decode(&p); err != nil {
		return nil, fmt.Errorf("not a consistency proof (JSON {\"size1\",\"tree_size\",\"hashes\"} or {\"size1\",\"tree_size\",\"prefix\",\"rest\"}): %v", err)
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("not a consistency proof: more than one JSON value")
	}
	if p.Size1 == nil || p.TreeSize == nil {
		return nil, errors.New("not a consistency proof: size1 and tree_size are required")
	}
	switch {
	case p.Hashes != nil && p.Prefix == nil && p.Rest == nil:
	case p.Hashes == nil && p.Prefix != nil && p.Rest != nil:
	default:
		return nil, errors.New("not a consistency proof: it needs either hashes (an RFC 6962 proof) or prefix and rest (a prefix proof)")
	}
	for _, hs := range []*[]proofHash{p.Hashes, p.Prefix, p.Rest} {
		if hs != nil && len(*hs) > maxProofHashes {
			return nil, fmt.Errorf("consistency proof: a list of %d hashes, at most %d", len(*hs), maxProofHashes)
		}
	}
	return &p, nil
}

// checkProofMembers requires a JSON object whose member names are
// exactly those of a proof file, each at most once (encoding/json
// matches names regardless of case and keeps the last of two).
func checkProofMembers(b []byte) error {
	d := json.NewDecoder(bytes.NewReader(b))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return errors.New("not a consistency proof: not a JSON object")
	}
	seen := map[string]bool{}
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return fmt.Errorf("not a consistency proof: %v", err)
		}
		name, _ := t.(string)
		switch name {
		case "size1", "tree_size", "hashes", "prefix", "rest":
		default:
			return fmt.Errorf("not a consistency proof: member %s", termtext.Quote(name))
		}
		if seen[name] {
			return fmt.Errorf("not a consistency proof: member %s twice", termtext.Quote(name))
		}
		seen[name] = true
		var skip json.RawMessage
		if err := d.Decode(&skip); err != nil {
			return fmt.Errorf("not a consistency proof: %v", err)
		}
	}
	return nil
}

// proofHashes returns a list of the proof as the verify package takes it.
func proofHashes(hs *[]proofHash) [][]byte {
	if hs == nil {
		return nil
	}
	out := make([][]byte, len(*hs))
	for i, h := range *hs {
		out[i] = h
	}
	return out
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
	if p.Hashes == nil {
		return nil, &fetchError{url: f.base.String() + consistencyPath(size1, size2), status: 200,
			err: errors.New("the answer is not an RFC 6962 consistency proof (no hashes)")}
	}
	return proofHashes(p.Hashes), nil
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
	var hashes, prefix, rest [][]byte
	isPrefix := false
	proofFrom := "" // where the proof came from, for the messages
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
		hashes, prefix, rest = proofHashes(p.Hashes), proofHashes(p.Prefix), proofHashes(p.Rest)
		isPrefix = p.Prefix != nil
		proofFrom = termtext.Quote(files[2])
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
		proofFrom = f.base.String() + consistencyPath(m, n)
	}
	var err error
	if isPrefix {
		err = verify.PrefixConsistency(older.cp, newer.cp, prefix, rest)
	} else {
		err = verify.Consistency(older.cp, newer.cp, hashes)
	}
	var fork *verify.ForkError
	switch {
	case err != nil && errors.As(err, &fork):
		return reportFork(stdout, stderr, older, newer, fork, proofFrom, *urlFlag != "", *jsonOut)
	case errors.Is(err, verify.ErrEmptyTreeRoot):
		// Not about any proof: the checkpoint of size 0 is wrong in itself.
		if *jsonOut {
			termtext.WriteJSON(stdout, map[string]any{"result": "failed", "older": older.name, "older_size": m,
				"newer": newer.name, "newer_size": n, "error": verify.ErrEmptyTreeRoot.Error()})
			return exitFailed
		}
		errorf(stderr, "consistency: %s: %v", termtext.Quote(older.name), verify.ErrEmptyTreeRoot)
		hints(stderr, err)
		return exitFailed
	case err != nil:
		if *jsonOut {
			termtext.WriteJSON(stdout, map[string]any{"result": "unproven", "older": older.name, "older_size": m,
				"newer": newer.name, "newer_size": n, "error": err.Error()})
			return exitFailed
		}
		errorf(stderr, "consistency: NOT PROVED: the proof (%s) does not lead to the signed root of %s (tree size %d): it proves neither that this tree extends the tree of size %d (%s) nor that it does not",
			proofFrom, termtext.Quote(newer.name), n, m, termtext.Quote(older.name))
		if f := new(verify.Failure); !errors.As(err, &f) || f.Err != verify.ErrUnboundProof { // more than the sentence above says
			errorf(stderr, "consistency: %v", err)
		}
		hintf(stderr, "a proof is unsigned: a damaged or stale copy, or a cache's answer, is enough for this; fetch it again from the log itself (%s). If the log's own answer keeps failing, it cannot show that the newer checkpoint extends the older: keep both checkpoint files and ask its operator", consistencyPath(m, n))
		return exitFailed
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

// reportFork reports two checkpoints proved to be of two histories (exit
// status 3).
func reportFork(stdout, stderr io.Writer, older, newer *signedCheckpoint, fork *verify.ForkError, proofFrom string, fetched, jsonOut bool) int {
	m, n := older.cp.Size, newer.cp.Size
	if jsonOut {
		termtext.WriteJSON(stdout, map[string]any{"result": "inconsistent", "older": older.name, "older_size": m,
			"newer": newer.name, "newer_size": n, "error": fork.Error()})
		return exitInconsistent
	}
	if m == n {
		errorf(stderr, "consistency: NOT CONSISTENT: %s and %s, both signed by the trusted key, are two checkpoints of tree size %d with different roots",
			termtext.Quote(older.name), termtext.Quote(newer.name), m)
		hintf(stderr, "no proof can reconcile them: they prove that the log signed two histories; keep both files as evidence")
		return exitInconsistent
	}
	errorf(stderr, "consistency: NOT CONSISTENT: %s (tree size %d) does not extend %s (tree size %d), both signed by the trusted key: the proof (%s) leads to the newer signed root, and gives the tree's first %d leaves another root than the older checkpoint's",
		termtext.Quote(newer.name), n, termtext.Quote(older.name), m, proofFrom, m)
	if fetched {
		hintf(stderr, "save the proof (curl --fail -o fork-proof.json '%s'): with the two checkpoint files and the log's verifier key it proves, offline and to anyone, that the log signed two histories", proofFrom)
	} else {
		hintf(stderr, "keep the three files: with the log's verifier key they prove, offline and to anyone, that the log signed two histories")
	}
	return exitInconsistent
}
