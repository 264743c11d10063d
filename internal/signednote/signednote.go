// Package signednote opens C2SP signed notes (https://c2sp.org/signed-note)
// with trusted keys, more strictly than golang.org/x/mod/sumdb/note.Open,
// which it calls first:
//
//   - Every signature line, whoever signed it, must spell its signature in
//     canonical standard base64 (RFC 4648 §4, the padding bits zero): the
//     text must be exactly what encoding the decoded bytes gives back.
//     note.Open decodes leniently, so one signature can be written in
//     several ways.
//   - Every signature line with the trusted key's name and key hash must
//     verify. The spec says a client SHOULD reject the whole note if a
//     signature from a known key fails to verify; note.Open checks only
//     the first such line and skips later ones, so a valid signature
//     followed by an invalid one by the same key passes it.
//
// Signatures by other keys (witness cosignatures, say) are not verified,
// as the spec requires, but their spelling is checked like any other.
//
// Both the ledger, opening its own checkpoints, and the offline verifier
// use this package, so that the two accept exactly the same notes. It
// imports only the standard library and golang.org/x/mod/sumdb/note.
package signednote

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/mod/sumdb/note"
)

// What a LineError says is wrong with its line; test with errors.Is.
var (
	ErrNonCanonical = errors.New("signature is not in canonical base64")
	ErrInvalid      = errors.New("signature by the trusted key does not verify")
)

// LineError refuses one signature line of a note that note.Open accepted.
type LineError struct {
	Line int    // the line's number among the signature lines, from 1
	Name string // the key name the line gives
	Hash uint32 // the key hash its signature starts with
	Err  error  // ErrNonCanonical or ErrInvalid
}

func (e *LineError) Error() string {
	return fmt.Sprintf("signature line %d (key %s+%08x): %v", e.Line, e.Name, e.Hash, e.Err)
}

func (e *LineError) Unwrap() error { return e.Err }

// Open opens msg with the trusted verifier v, and any more trusted
// verifiers (a log's keys across a rotation): note.Open, whose errors it
// returns unchanged (*note.UnverifiedNoteError when no line is a trusted
// key's, *note.InvalidSignatureError when the first of a trusted key's
// lines does not verify, and others for malformed notes), then the checks
// of the package doc, for every trusted key, which fail with a *LineError.
// The verifiers must have distinct names or key hashes.
func Open(msg []byte, v note.Verifier, more ...note.Verifier) (*note.Note, error) {
	vs := append([]note.Verifier{v}, more...)
	n, err := note.Open(msg, note.VerifierList(vs...))
	if err != nil {
		return nil, err
	}
	// note.Open accepted the layout: text, a blank line, then lines
	// "— <name> <base64>\n", each of whose base64 decodes to at least
	// five bytes under the lenient decoder.
	split := bytes.LastIndex(msg, []byte("\n\n"))
	text, sigs := msg[:split+1], string(msg[split+2:len(msg)-1])
	for i, line := range strings.Split(sigs, "\n") {
		name, b64, _ := strings.Cut(strings.TrimPrefix(line, "— "), " ")
		sig, err := base64.StdEncoding.DecodeString(b64)
		if err != nil || len(sig) < 5 { // note.Open refused these already
			return nil, errors.New("malformed note")
		}
		hash := binary.BigEndian.Uint32(sig)
		if base64.StdEncoding.EncodeToString(sig) != b64 {
			return nil, &LineError{Line: i + 1, Name: name, Hash: hash, Err: ErrNonCanonical}
		}
		for _, v := range vs {
			if name == v.Name() && hash == v.KeyHash() && !v.Verify(text, sig[4:]) {
				return nil, &LineError{Line: i + 1, Name: name, Hash: hash, Err: ErrInvalid}
			}
		}
	}
	return n, nil
}
