package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/decisionledger/ledger/internal/termtext"
	"github.com/decisionledger/ledger/verify"
)

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
		var us *verify.UnknownSignerError
		if errors.As(e, &us) {
			m["trusted_key"], m["signed_by"] = us.Trusted, us.Signers
		}
		var ce *verify.ConsistencyError
		if errors.As(e, &ce) {
			m["trusted_size"], m["tree_size"] = ce.TrustedSize, ce.Size
		}
		var rk *verify.RetiredKeyError
		if errors.As(e, &rk) {
			m["retired_key"], m["retired_at"] = rk.KeyID, rk.RetiredAt
		}
		list = append(list, m)
	}
	return list
}

func reportFailures(stdout, stderr io.Writer, err error, jsonOut bool) int {
	if jsonOut {
		termtext.WriteJSON(stdout, map[string]any{"result": "failed", "failures": failureJSON(err)})
		return exitFailed
	}
	for _, e := range failureList(err) {
		errorf(stderr, "%v", e)
		hints(stderr, e)
	}
	return exitFailed
}

// inputError reports a problem of usage or reading for the command cmd,
// with hints, and returns exit status 2.
func inputError(stderr io.Writer, cmd string, err error) int {
	errorf(stderr, "%s: %v", cmd, err)
	hints(stderr, err)
	return exitUsage
}

// hints writes what an auditor can do about err, for the errors that
// have a remedy: a file that is an error answer from ledgerd, a
// checkpoint signed by another key than the trusted one, an export
// without the consistency proof the trusted checkpoint needs.
func hints(stderr io.Writer, err error) {
	var la *ledgerdAnswer
	var us *verify.UnknownSignerError
	var ce *verify.ConsistencyError
	var uk *verify.UntrustedKeyError
	var rk *verify.RetiredKeyError
	switch {
	case errors.As(err, &la):
		hintf(stderr, "ledgerd refused the request this file was fetched with (docs/api.md explains the codes); fetch it again with 'curl --fail', which saves no error answer")
	case errors.As(err, &us):
		signers := make([]string, len(us.Signers))
		for i, s := range us.Signers {
			signers[i] = termtext.Quote(s)
		}
		hintf(stderr, "the checkpoint names its signer by key name and key hash: %s; the keys given with --key, --key-file or --trust are %s", strings.Join(signers, ", "), termtext.Quote(us.Trusted))
		hintf(stderr, "use the verifier key the ledger's operator publishes for that log (after a key rotation, its new key too: docs/operations.md); if the keys you were given are right, this file was not signed by that ledger")
	case errors.As(err, &uk):
		hintf(stderr, "add the verifier key of %s with --key or --trust: a log whose key rotated is verified with every key it used (docs/operations.md); if the operator never announced that key, this entry was not signed by that ledger", termtext.Quote(uk.KeyID))
	case errors.As(err, &rk):
		what := fmt.Sprintf("an entry from index %d on", rk.RetiredAt)
		if rk.Index == verify.NoIndex {
			what = fmt.Sprintf("a checkpoint of a tree larger than %d", rk.RetiredAt)
		}
		hintf(stderr, "key %s is retired-at %d (in the trust file, or in the monitor's state, which keeps the rotations it saw): the log's rotation checkpoint for tree size %d handed over to a new key, and the old key signs nothing after it; %s signed by it alone was not made by the log but by whoever holds the old key: keep the file as evidence and tell the log's operator (docs/operations.md \"Key rotation\"); if %d is not the rotation's tree size, correct the trust file",
			termtext.Quote(rk.KeyID), rk.RetiredAt, rk.RetiredAt, what, rk.RetiredAt)
	case errors.Is(err, verify.ErrEmptyTreeRoot):
		hintf(stderr, "the empty tree's root is fixed (RFC 9162), so no log signs it honestly with another: keep the file, and trust a checkpoint you verified instead")
	case errors.As(err, &ce):
		ask := fmt.Sprintf("/v1/export?start=%d&end=%d&consistency_from=%d", ce.Start, ce.End, ce.TrustedSize)
		switch {
		case ce.TrustedSize == ce.Size:
			hintf(stderr, "two checkpoints signed for tree size %d with different roots are evidence that the log forked: keep both files", ce.Size)
		case ce.TrustedSize > ce.Size:
			hintf(stderr, "this export was made at a checkpoint older than the trusted one: verify one made later (ledgerd serves %s at its latest checkpoint); a ledger never signs a smaller tree after a larger one, so if its latest checkpoint is smaller than %d, keep both checkpoints as evidence", ask, ce.TrustedSize)
		case !ce.HasProof || ce.ProofFrom != ce.TrustedSize:
			hintf(stderr, "ask ledgerd for %s: consistency_from=%d is your trusted checkpoint's tree size", ask, ce.TrustedSize)
		default:
			hintf(stderr, "the proof from tree size %d does not verify: if a fresh %s fails too, the log forked: keep both checkpoints as evidence", ce.TrustedSize, ask)
		}
	}
}

// ledgerdErrorPrefix starts every error answer of ledgerd (docs/api.md).
const ledgerdErrorPrefix = `{"error":`

// ledgerdAnswer is an error answer from ledgerd,
// {"error":{"code":…,"message":…}}, saved in place of the file a command
// reads, as curl without --fail does.
type ledgerdAnswer struct {
	name, code, message string
}

func (e *ledgerdAnswer) Error() string {
	if e.code == "" {
		return fmt.Sprintf("%s: this file is an error answer from ledgerd", termtext.Quote(e.name))
	}
	return fmt.Sprintf("%s: this file is an error answer from ledgerd: %s: %s", termtext.Quote(e.name), termtext.Quote(e.code), e.message)
}

// checkLedgerdAnswer returns a *ledgerdAnswer if b, the file name or its
// start, begins as ledgerd's error answers do, and nil otherwise.
func checkLedgerdAnswer(name string, b []byte) error {
	if !bytes.HasPrefix(b, []byte(ledgerdErrorPrefix)) {
		return nil
	}
	var answer struct {
		Error struct{ Code, Message string }
	}
	e := &ledgerdAnswer{name: name}
	if json.Unmarshal(b, &answer) == nil {
		e.code, e.message = answer.Error.Code, answer.Error.Message
	}
	return e
}
