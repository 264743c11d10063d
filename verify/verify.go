// Package verify checks, offline, what a ledger produced: signed
// checkpoints, entries (canonical form, signature, index continuity, the
// prev chain), that a range of entries is in a checkpoint's tree, that one
// checkpoint's tree extends another's (or, from hashes bound to the newer
// signed root, that it does not: a proven fork, consistency.go), whether
// candidate parameters are
// exactly the ones an entry committed to, and whether the ledger's own
// decisions replay to their records with the policy sets they name
// (VerifyDecisions). It trusts nothing but the verifier keys it is given.
//
// It imports only the standard library, package entry and commit,
// package policy (and through it cedar-go) to replay decisions,
// transparency-dev/merkle, the note and checkpoint parsers, and
// internal/signednote, the strict note opening it shares with the ledger:
// never the ledger or its storage (a test enforces this), so that an
// auditor's tool stays small.
//
// Every failure is a *Failure naming the entry index (or the part of the
// input that is not an entry) and the check that failed.
package verify

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"strings"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/internal/signednote"
	"github.com/transparency-dev/formats/log"
	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"
)

// Check names one verification. The names are stable: they appear in
// human and --json output.
type Check string

const (
	CheckCheckpointSignature Check = "checkpoint-signature" // signed by the trusted key, for the trusted origin
	CheckEntryEncoding       Check = "encoding"             // canonical, strictly valid entry bytes
	CheckEntryKey            Check = "key"                  // key_id and origin are the trusted key's
	CheckEntrySignature      Check = "signature"            // Ed25519 over the signed message
	CheckIndex               Check = "index"                // index continues the range with no gap or repeat
	CheckPrev                Check = "prev"                 // prev is the entry hash of the entry before
	CheckRange               Check = "range-proof"          // the entries are the checkpoint's tree's leaves
	CheckConsistency         Check = "consistency"          // the checkpoint's tree extends a trusted one
)

// NoIndex marks a failure that concerns no single entry.
const NoIndex = -1

// Failure is one failed check.
type Failure struct {
	// Index is the entry's index, or NoIndex.
	Index int64
	// Part names what failed when Index is NoIndex ("checkpoint",
	// "range", "consistency proof", ...).
	Part  string
	Check Check
	Err   error
}

func (f *Failure) Error() string {
	where := f.Part
	if f.Index != NoIndex {
		where = fmt.Sprintf("entry %d", f.Index)
	}
	return fmt.Sprintf("%s: %s: %v", where, f.Check, f.Err)
}

func (f *Failure) Unwrap() error { return f.Err }

// Key is a trusted ledger key, from its note verifier key, or a set of a
// log's keys across rotations (keys.go).
type Key struct {
	vkey     string
	verifier note.Verifier
	origin   string // the key name, which is also the log origin
	id       string // "<name>+<hash>", the entries' key_id
	public   ed25519.PublicKey
	// witnesses, if set, is the cosignature policy Checkpoint enforces
	// (witness.go).
	witnesses *WitnessPolicy
	set       []*Key // a key set's keys, this one first; nil for one key
	// retired maps a retired key's id to the tree size it was retired at
	// (keys.go); never changed once the key is made.
	retired map[string]uint64
}

// ParseKey parses a note verifier key "<name>+<hash>+<base64>" of an
// Ed25519 ledger key.
func ParseKey(vkey string) (*Key, error) {
	v, err := note.NewVerifier(vkey)
	if err != nil {
		return nil, fmt.Errorf("verify: verifier key: %w", err)
	}
	parts := strings.SplitN(vkey, "+", 3)
	raw, err := base64.StdEncoding.DecodeString(parts[2])
	if err != nil || len(raw) != 1+ed25519.PublicKeySize || raw[0] != 1 {
		return nil, errors.New("verify: verifier key: not an Ed25519 key")
	}
	return &Key{
		vkey: vkey, verifier: v, origin: parts[0],
		id:     parts[0] + "+" + parts[1],
		public: ed25519.PublicKey(raw[1:]),
	}, nil
}

// Origin returns the log origin the key signs for.
func (k *Key) Origin() string { return k.origin }

// What a checkpoint's signature lines can be refused for, beyond a missing
// or failing signature by the trusted key (errors.Is).
var (
	// ErrNonCanonicalSignature: a signature line, by any key, does not
	// spell its signature in canonical base64.
	ErrNonCanonicalSignature = signednote.ErrNonCanonical
	// ErrInvalidSignature: a signature line with the trusted key's name
	// and key hash does not verify, although another one may.
	ErrInvalidSignature = signednote.ErrInvalid
)

// UnknownSignerError: no signature line of a checkpoint is by the trusted
// key. Signers names the keys that signed it instead, so that an auditor
// can tell a wrong or outdated --key from a checkpoint nobody they trust
// signed. The names come from the untrusted note: print them escaped.
type UnknownSignerError struct {
	// Trusted is the trusted key's "<name>+<hash>", the hash in 8
	// lower-case hex digits, as in an entry's key_id; for a key set, the
	// keys' ids separated by ", ".
	Trusted string
	// Signers are the signature lines' keys, in the same form, in order
	// (repeated lines once).
	Signers []string
}

func (e *UnknownSignerError) Error() string {
	return fmt.Sprintf("not signed by the trusted key %s but by %s", e.Trusted, strings.Join(e.Signers, ", "))
}

// Checkpoint opens a signed checkpoint with the trusted key, strictly:
// every signature line in canonical base64, and every line with the
// trusted key's name and key hash verifying (package
// internal/signednote, which the ledger uses too); and, for a key given a
// witness policy (WithWitnesses), enough valid witness cosignatures.
func (k *Key) Checkpoint(signed []byte) (*log.Checkpoint, error) {
	fail := func(err error) (*log.Checkpoint, error) {
		return nil, &Failure{Index: NoIndex, Part: "checkpoint", Check: CheckCheckpointSignature, Err: err}
	}
	n, err := k.openNote(signed)
	var unverified *note.UnverifiedNoteError
	if errors.As(err, &unverified) {
		e := &UnknownSignerError{Trusted: strings.Join(k.IDs(), ", ")}
		for _, s := range unverified.Note.UnverifiedSigs {
			e.Signers = append(e.Signers, fmt.Sprintf("%s+%08x", s.Name, s.Hash))
		}
		return fail(e)
	}
	if err != nil {
		return fail(err)
	}
	cp := &log.Checkpoint{}
	if _, err := cp.Unmarshal([]byte(n.Text)); err != nil {
		return fail(err)
	}
	if cp.Origin != k.origin {
		return fail(fmt.Errorf("the checkpoint is for origin %q, the key's is %q", cp.Origin, k.origin))
	}
	if k.retired != nil {
		ids := make([]string, len(n.Sigs))
		for i, s := range n.Sigs { // the trusted keys' signatures, verified
			ids[i] = fmt.Sprintf("%s+%08x", s.Name, s.Hash)
		}
		if err := k.checkCheckpointSigners(ids, cp.Size); err != nil {
			return fail(err)
		}
	}
	if k.witnesses != nil {
		if err := k.witnesses.check(signed); err != nil {
			return nil, &Failure{Index: NoIndex, Part: "checkpoint", Check: CheckWitnesses, Err: err}
		}
	}
	return cp, nil
}

// VerifyEntry checks that a decoded entry belongs to the trusted log and
// carries a valid signature by the trusted key.
func (k *Key) VerifyEntry(e *entry.Entry) error {
	if e.Origin != k.origin {
		return &Failure{Index: int64(e.Index), Check: CheckEntryKey, Err: errors.New("entry names another log origin")}
	}
	if err := k.verifyEntrySignature(e); err != nil {
		return &Failure{Index: int64(e.Index), Check: entryKeyCheck(err), Err: err}
	}
	return nil
}

var hasher = rfc6962.DefaultHasher

var rangeFactory = &compact.RangeFactory{Hash: hasher.HashChildren}

// Range verifies the entries [start, end) of a log, given one at a time in
// index order, and finally that they are leaves start to end-1 of a
// checkpoint's tree. Its memory stays O(log size) whatever the range.
type Range struct {
	key        *Key
	checkpoint *log.Checkpoint
	start, end uint64
	next       uint64
	prev       *commit.Digest // entry hash expected as the next prev; nil if unknown
	leaves     *compact.Range
	all        bool
	failures   []error
	keys       keyOrder // no entry by a key a later one replaced (keys.go)
}

// NewRange starts verifying entries [start, end) against cp, a checkpoint
// already opened with key. prev, if not nil, is the entry hash of entry
// start-1 (zero for start 0), so that the first entry's link is checked
// too; for start 0 it is checked in any case. With all, every failure is
// recorded and verification goes on; otherwise the first one stops it.
func NewRange(key *Key, cp *log.Checkpoint, start, end uint64, prev *commit.Digest, all bool) (*Range, error) {
	if start > end || end > cp.Size {
		return nil, &Failure{Index: NoIndex, Part: "range", Check: CheckRange,
			Err: fmt.Errorf("range [%d, %d) is not inside the checkpoint's tree of size %d", start, end, cp.Size)}
	}
	if start == 0 && prev == nil {
		prev = &commit.Digest{}
	}
	return &Range{key: key, checkpoint: cp, start: start, end: end, next: start, prev: prev,
		leaves: rangeFactory.NewEmptyRange(start), all: all}, nil
}

// fail records a failure, and returns it if verification must stop.
func (r *Range) fail(f *Failure) error {
	r.failures = append(r.failures, f)
	if r.all {
		return nil
	}
	return f
}

// Add verifies the next entry of the range.
func (r *Range) Add(b []byte) error {
	c := new(checked)
	c.check(r.key, r.next, b, true, new(checker))
	return r.accept(c)
}

// checked is the part of an entry's verification that needs no other
// entry: it runs on any goroutine (VerifyExport runs it on every core).
type checked struct {
	index    uint64
	leaf     []byte       // kept by the range's tree: never reused
	entry    *entry.Entry // nil if the bytes are not a valid entry
	hash     commit.Digest
	failures []*Failure // in the order the checks are reported
	bytes    []byte
}

// checker holds what one goroutine checking entries reuses from one entry
// to the next: the buffer of the signed message and the leaf hasher.
type checker struct {
	message []byte
	leaf    hash.Hash
}

// leafPrefix starts an RFC 6962 leaf hash's input.
var leafPrefix = []byte{rfc6962.RFC6962LeafHashPrefix}

// check checks entry bytes expected at index: encoding, index, origin,
// key and signature; and computes the leaf and entry hashes (the leaf as
// hasher.HashLeaf does, with w's hasher).
func (c *checked) check(key *Key, index uint64, b []byte, checkSignature bool, w *checker) {
	if w.leaf == nil {
		w.leaf = hasher.New()
	}
	w.leaf.Reset()
	w.leaf.Write(leafPrefix)
	w.leaf.Write(b)
	*c = checked{index: index, leaf: w.leaf.Sum(nil), bytes: b}
	fail := func(check Check, err error) {
		c.failures = append(c.failures, &Failure{Index: int64(index), Check: check, Err: err})
	}
	e, m, err := entry.ParseMessage(b, w.message[:0])
	w.message = m
	if err != nil {
		fail(CheckEntryEncoding, err)
		return
	}
	if e.Index != index {
		fail(CheckIndex, fmt.Errorf("entry says index %d", e.Index))
	}
	if e.Origin != key.origin {
		fail(CheckEntryKey, errors.New("entry names another log origin"))
	}
	switch signer, err := key.signer(e.KeyID); {
	case err != nil:
		fail(CheckEntryKey, err)
	case checkSignature && !ed25519.Verify(signer.public, m, e.Signature):
		fail(CheckEntrySignature, entry.ErrSignature)
	default:
		if err := key.checkRetired(signer.id, int64(index), 0); err != nil {
			fail(CheckEntryKey, err)
		}
	}
	c.entry, c.hash = e, sha256.Sum256(m)
}

// accept applies the checks that need the entries before: position in the
// range and the prev link; and adds the leaf to the range's tree.
func (r *Range) accept(c *checked) error {
	index := r.next
	if index >= r.end {
		return r.fail(&Failure{Index: int64(index), Check: CheckIndex, Err: fmt.Errorf("more entries than the range [%d, %d) holds", r.start, r.end)})
	}
	r.next++
	if err := r.leaves.Append(c.leaf, nil); err != nil {
		return r.fail(&Failure{Index: int64(index), Check: CheckRange, Err: err})
	}
	for _, f := range c.failures {
		if err := r.fail(f); err != nil {
			return err
		}
	}
	if c.entry == nil {
		r.prev = nil // the next link cannot be checked
		return nil
	}
	if r.prev != nil && c.entry.Prev != *r.prev {
		if err := r.fail(&Failure{Index: int64(index), Check: CheckPrev, Err: errors.New("prev is not the entry hash of the entry before")}); err != nil {
			return err
		}
	}
	if f := r.keys.next(index, c.entry.KeyID); f != nil {
		if err := r.fail(f); err != nil {
			return err
		}
	}
	h := c.hash
	r.prev = &h
	return nil
}

// Finish checks that every entry of the range was given and that they are
// leaves start to end-1 of the checkpoint's tree: left holds the hashes of
// the compact range [0, start) and right those of [end, size), as
// compact.RangeNodes lists them. It returns every failure recorded, joined,
// or nil.
func (r *Range) Finish(left, right [][]byte) error {
	if r.next != r.end {
		r.fail(&Failure{Index: int64(r.next), Check: CheckIndex, Err: fmt.Errorf("range ends at entry %d, want %d", r.next, r.end)})
	} else if err := r.checkRoot(left, right); err != nil {
		r.fail(&Failure{Index: NoIndex, Part: "range", Check: CheckRange, Err: err})
	}
	return errors.Join(r.failures...)
}

func (r *Range) checkRoot(left, right [][]byte) error {
	if len(left) != compact.RangeSize(0, r.start) || len(right) != compact.RangeSize(r.end, r.checkpoint.Size) {
		return fmt.Errorf("proof has %d+%d hashes, want %d+%d", len(left), len(right),
			compact.RangeSize(0, r.start), compact.RangeSize(r.end, r.checkpoint.Size))
	}
	for _, h := range append(append([][]byte{}, left...), right...) {
		if len(h) != hasher.Size() {
			return errors.New("proof hash of the wrong size")
		}
	}
	// A compact range keeps and rewrites the slice it is built from: give
	// it copies, never the caller's proof.
	whole, err := rangeFactory.NewRange(0, r.start, append([][]byte(nil), left...))
	if err != nil {
		return err
	}
	if err := whole.AppendRange(r.leaves, nil); err != nil {
		return err
	}
	tail, err := rangeFactory.NewRange(r.end, r.checkpoint.Size, append([][]byte(nil), right...))
	if err != nil {
		return err
	}
	if err := whole.AppendRange(tail, nil); err != nil {
		return err
	}
	root := hasher.EmptyRoot()
	if r.checkpoint.Size > 0 {
		if root, err = whole.GetRootHash(nil); err != nil {
			return err
		}
	}
	if !bytes.Equal(root, r.checkpoint.Hash) {
		return errors.New("entries and proof do not give the checkpoint's root")
	}
	return nil
}

// ParamsResult says whether candidate parameters are the committed ones.
type ParamsResult string

const (
	Match    ParamsResult = "match"
	Mismatch ParamsResult = "mismatch"
	Refused  ParamsResult = "refused" // outside the strict input domain, or a disclosure refused; see the error
	// Unverifiable: the entry's hiding commitment cannot be opened with
	// what was given (its openings erased, or some fields left hidden).
	// It says nothing of whether the parameters match.
	Unverifiable ParamsResult = "unverifiable"
)

// Params compares candidate parameters (JSON text) with the commitment an
// entry recorded. A refusal returns the *commit.DomainError saying why.
func Params(e *entry.Entry, candidate []byte) (ParamsResult, error) {
	return ParamsIn(commit.Domain{}, e, candidate)
}

// ParamsDisclosed checks a disclosure file (docs/commitment.md §7.4)
// against an entry's hiding commitment as the whole-parameter check: a
// disclosure that opens every field is a Match; one that leaves fields
// hidden is Unverifiable, with why naming them; a disclosure that does not
// open the commitment is Refused with the *commit.DisclosureError; bare
// parameters given for a hiding commitment are Unverifiable, since without
// openings nothing can be compared.
func ParamsDisclosed(d commit.Domain, e *entry.Entry, file []byte) (result ParamsResult, why string, err error) {
	if !e.Params.Hiding {
		return Refused, "", &commit.DisclosureError{Kind: commit.ErrNotHiding}
	}
	if !isDisclosureFile(file) {
		return Unverifiable, "the candidate is bare parameters, without the openings a hiding commitment needs (give its disclosure file)", nil
	}
	x, err := commit.ParseDisclosure(file, d)
	if err != nil {
		return Refused, "", err
	}
	if err := x.Check(e.Params); err != nil {
		return Refused, "", err
	}
	if hidden := x.Hidden(); len(hidden) > 0 {
		return Unverifiable, fmt.Sprintf("the disclosure leaves %d of %d fields hidden (ledger-verify disclose checks a part)", len(hidden), len(x.Fields())), nil
	}
	return Match, "", nil
}

// isDisclosureFile reports whether data is a JSON object with a
// "disclosure" member, as a disclosure file is and parameters usually are
// not; ParseDisclosure then holds it to the format.
func isDisclosureFile(data []byte) bool {
	var probe map[string]json.RawMessage
	if json.Unmarshal(data, &probe) != nil {
		return false
	}
	_, ok := probe["disclosure"]
	return ok && probe["fields"] != nil
}

// ParamsIn is Params for parameters committed to in domain d: a
// deployment that admits non-integer numbers (d.AllowNonInteger) commits
// to them in their RFC 8785 form.
func ParamsIn(d commit.Domain, e *entry.Entry, candidate []byte) (ParamsResult, error) {
	if e.Params.Hiding {
		result, _, err := ParamsDisclosed(d, e, candidate)
		return result, err
	}
	if isDisclosureFile(candidate) {
		return Refused, &commit.DisclosureError{Kind: commit.ErrNotHiding}
	}
	c, err := d.Params(candidate)
	if err != nil {
		return Refused, err
	}
	if !c.Equal(e.Params) {
		return Mismatch, nil
	}
	return Match, nil
}
