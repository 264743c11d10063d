package verify

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/internal/signednote"
	"golang.org/x/mod/sumdb/note"
)

// A log's key can rotate (docs/operations.md): entries before the
// rotation carry the old key's id, entries after it the new key's, and the
// rotation checkpoint is signed by both. Every key of one log has the same
// name, the log origin, and a different key hash. An auditor trusts the
// set of a log's keys: a *Key made by NewKeySet or ParseKeys, which every
// function of this package accepts where it takes a *Key. Each entry is
// checked with the trusted key its key_id names; a checkpoint must be
// signed by at least one trusted key, and every line it carries by a
// trusted key must verify (so a rotation checkpoint, signed by both keys,
// is refused if either signature is bad). A *Key from ParseKey is the set
// of that one key.

// ErrRetiredKey: an entry is signed by a key that an earlier entry's key
// replaced, or a key signed past the tree size it was retired at (a
// *RetiredKeyError). After a rotation the old key must never sign again;
// what it signed after the new key took over was not made by the log.
var ErrRetiredKey = errors.New("signed by a key that a rotation replaced")

// A key of a set can be retired at a tree size N (a trust file's
// "retired-at N", Key.Retire): the log's rotation checkpoint for size N
// handed over from it. It then signed the entries below index N and the
// checkpoints of trees up to size N, and nothing after: an entry at index
// N or beyond signed by it is refused, and so is a checkpoint of a tree
// larger than N that no trusted key still in service signed. A checkpoint
// of size N signed by it alone is the log's latest before the rotation,
// of the same tree as the rotation checkpoint, and stays valid. Unlike
// the rule that a key never signs again after another took over, which
// holds within the entries one verification reads, a retirement holds for
// every range and every checkpoint: a log's old key, stolen, cannot
// continue the log past the rotation in a history of its own.

// RetiredKeyError: a key signed past the tree size it was retired at. It
// names the key by id and the signed object by entry index or checkpoint
// size, never key material.
type RetiredKeyError struct {
	// KeyID is the retired key's id ("<name>+<hash>"); for a checkpoint
	// signed by several retired keys, the one retired last.
	KeyID string
	// RetiredAt is the tree size it was retired at.
	RetiredAt uint64
	// Index is the entry's index, or NoIndex for a checkpoint, whose tree
	// size is Size.
	Index int64
	Size  uint64
}

func (e *RetiredKeyError) Error() string {
	if e.Index == NoIndex {
		return fmt.Sprintf("the checkpoint of tree size %d is signed only by key %s, retired at tree size %d: a retired key signs no checkpoint of a larger tree",
			e.Size, e.KeyID, e.RetiredAt)
	}
	return fmt.Sprintf("signed by key %s, retired at tree size %d: a retired key signs no entry from index %d on",
		e.KeyID, e.RetiredAt, e.RetiredAt)
}

func (e *RetiredKeyError) Unwrap() error { return ErrRetiredKey }

// maxTrustFile bounds a trust file: a few hundred keys.
const maxTrustFile = 64 << 10

// UntrustedKeyError: an entry is signed by a key that is not in the
// trusted set. KeyID is the entry's key_id ("<name>+<hash>"), from the
// untrusted entry: print it escaped.
type UntrustedKeyError struct {
	KeyID   string
	Trusted []string // the trusted keys' ids
}

func (e *UntrustedKeyError) Error() string {
	return fmt.Sprintf("signed by key %s, which is not trusted: add its verifier key to the trusted keys (trusted: %s)",
		e.KeyID, strings.Join(e.Trusted, ", "))
}

// Unwrap makes the error errors.Is entry.ErrKeyID, as a key mismatch of a
// single trusted key always was.
func (e *UntrustedKeyError) Unwrap() error { return entry.ErrKeyID }

// NewKeySet returns the set of keys, for verifying a log whose key
// rotated: all keys must name the same log origin; a key given twice
// counts once. A set of one key is that key. A key retired in any of the
// keys given (Retire, ParseTrust) is retired in the set, at the smallest
// tree size given.
func NewKeySet(keys ...*Key) (*Key, error) {
	var set []*Key
	seen := map[string]bool{}
	var retired map[string]uint64
	for _, k := range keys {
		for id, at := range k.retired {
			if retired == nil {
				retired = map[string]uint64{}
			}
			if old, ok := retired[id]; !ok || at < old {
				retired[id] = at
			}
		}
		for _, m := range k.members() {
			if seen[m.vkey] {
				continue
			}
			if seen[m.id] {
				return nil, fmt.Errorf("verify: two different verifier keys have the id %s", m.id)
			}
			seen[m.vkey], seen[m.id] = true, true
			if len(set) > 0 && m.origin != set[0].origin {
				return nil, fmt.Errorf("verify: key %s is for log origin %q, key %s for %q: a key set holds the keys of one log (its key name)",
					set[0].id, set[0].origin, m.id, m.origin)
			}
			set = append(set, m)
		}
	}
	switch len(set) {
	case 0:
		return nil, errors.New("verify: a key set needs at least one key")
	case 1:
		if retired == nil {
			return set[0], nil
		}
		one := *set[0]
		one.retired = retired
		for _, k := range keys {
			if one.witnesses == nil {
				one.witnesses = k.witnesses
			}
		}
		return &one, nil
	}
	first := *set[0]
	first.set, first.retired = set, retired
	for _, k := range keys { // a witness policy given with a key holds for the set
		if first.witnesses == nil {
			first.witnesses = k.witnesses
		}
	}
	return &first, nil
}

// ParseKeys parses note verifier keys (see ParseKey) into a key set.
func ParseKeys(vkeys ...string) (*Key, error) {
	var keys []*Key
	for _, v := range vkeys {
		k, err := ParseKey(v)
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return NewKeySet(keys...)
}

// A trust file (docs/log.md §4, "Trust files") lists the keys of one log
// an auditor trusts, one a line:
//
//	# ledger.example.com/log, rotated at tree size 1000 on 2027-01-04
//	ledger.example.com/log+1a2b3c4d+AZ... retired-at 1000
//	ledger.example.com/log+5e6f7a8b+AY...
//
// Each line is a note verifier key, optionally followed by blanks,
// "retired-at", blanks and a tree size N in decimal (no sign, no leading
// zero): the key was retired at the log's rotation checkpoint for size N
// (see RetiredKeyError). Blank lines, and lines whose first non-blank
// character is '#', are skipped; leading and trailing blanks are trimmed.
// A key may be listed twice only with the same retirement.

// ErrTrustFileRetirement: ParseTrustFile met a retired-at rule, which the
// keys' texts it returns cannot carry: read the file with ParseTrust.
var ErrTrustFileRetirement = errors.New("the line retires its key (retired-at), which only ParseTrust keeps")

// trustLine is a trust file's line: its number, verifier key and
// retirement, if any.
type trustLine struct {
	n         int
	key       *Key
	retired   bool
	retiredAt uint64
}

func parseTrustLines(data []byte) ([]trustLine, error) {
	if len(data) > maxTrustFile {
		return nil, fmt.Errorf("verify: trust file larger than %d bytes", maxTrustFile)
	}
	var lines []trustLine
	seen := map[string]trustLine{}
	s := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; s.Scan(); n++ {
		line := strings.TrimSpace(s.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		l := trustLine{n: n}
		vkey := line
		if fields := strings.Fields(line); len(fields) > 1 {
			if len(fields) != 3 || fields[1] != "retired-at" {
				return nil, fmt.Errorf("line %d: want a verifier key, optionally followed by \"retired-at N\"", n)
			}
			at, err := strconv.ParseUint(fields[2], 10, 64)
			if err != nil || strconv.FormatUint(at, 10) != fields[2] {
				return nil, fmt.Errorf("line %d: retired-at: want a tree size in decimal", n)
			}
			vkey, l.retired, l.retiredAt = fields[0], true, at
		}
		k, err := ParseKey(vkey)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		l.key = k
		if before, ok := seen[k.vkey]; ok {
			if before.retired != l.retired || before.retiredAt != l.retiredAt {
				return nil, fmt.Errorf("line %d: key %s again, retired otherwise than on line %d", n, k.id, before.n)
			}
			continue
		}
		seen[k.vkey] = l
		lines = append(lines, l)
	}
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("verify: trust file: %w", err)
	}
	if len(lines) == 0 {
		return nil, errors.New("verify: trust file holds no verifier key")
	}
	return lines, nil
}

// ParseTrust parses a trust file into the set of its keys, each retired
// where its line says so. A malformed line is refused naming its number.
func ParseTrust(data []byte) (*Key, error) {
	lines, err := parseTrustLines(data)
	if err != nil {
		return nil, err
	}
	keys := make([]*Key, len(lines))
	for i, l := range lines {
		keys[i] = l.key
	}
	set, err := NewKeySet(keys...)
	if err != nil {
		return nil, err
	}
	for _, l := range lines {
		if l.retired {
			if set, err = set.Retire(l.key.id, l.retiredAt); err != nil {
				return nil, err
			}
		}
	}
	return set, nil
}

// ParseTrustFile parses a trust file (see above) and returns the keys'
// texts, for ParseKeys. It refuses a line with a retired-at rule
// (ErrTrustFileRetirement), which the texts cannot carry, so that no
// retirement is dropped: ParseTrust reads every trust file. A malformed
// line is refused naming its number.
func ParseTrustFile(data []byte) ([]string, error) {
	lines, err := parseTrustLines(data)
	if err != nil {
		return nil, err
	}
	var vkeys []string
	for _, l := range lines {
		if l.retired {
			return nil, fmt.Errorf("line %d: %w", l.n, ErrTrustFileRetirement)
		}
		vkeys = append(vkeys, l.key.vkey)
	}
	return vkeys, nil
}

// Retire returns a copy of the key set in which the key keyID (one of its
// keys) is retired at tree size at: the log's rotation checkpoint for
// that size handed over from it (see RetiredKeyError). A key retired
// already stays retired at the smaller size.
func (k *Key) Retire(keyID string, at uint64) (*Key, error) {
	if _, err := k.signer(keyID); err != nil {
		return nil, fmt.Errorf("verify: retiring key %s: it is not one of the set's keys", keyID)
	}
	c := *k
	c.retired = make(map[string]uint64, len(k.retired)+1)
	for id, n := range k.retired {
		c.retired[id] = n
	}
	if old, ok := c.retired[keyID]; !ok || at < old {
		c.retired[keyID] = at
	}
	return &c, nil
}

// RetiredAt returns the tree size the key keyID is retired at, if it is.
func (k *Key) RetiredAt(keyID string) (uint64, bool) {
	at, ok := k.retired[keyID]
	return at, ok
}

// checkRetired refuses a key's signature on an entry at index (or, with
// index NoIndex, on a checkpoint of tree size size) past the key's
// retirement.
func (k *Key) checkRetired(keyID string, index int64, size uint64) error {
	at, ok := k.retired[keyID]
	if !ok || index == NoIndex && size <= at || index != NoIndex && uint64(index) < at {
		return nil
	}
	return &RetiredKeyError{KeyID: keyID, RetiredAt: at, Index: index, Size: size}
}

// checkCheckpointSigners refuses a checkpoint of tree size size whose
// trusted signers (ids) are all retired below it.
func (k *Key) checkCheckpointSigners(ids []string, size uint64) error {
	var last *RetiredKeyError
	for _, id := range ids {
		err := k.checkRetired(id, NoIndex, size)
		if err == nil {
			return nil
		}
		if re := err.(*RetiredKeyError); last == nil || re.RetiredAt > last.RetiredAt {
			last = re
		}
	}
	if last == nil {
		return nil
	}
	return last
}

// IDs returns the ids ("<name>+<hash>") of the trusted keys, in the order
// given.
func (k *Key) IDs() []string {
	var ids []string
	for _, m := range k.members() {
		ids = append(ids, m.id)
	}
	return ids
}

// VerifierKeys returns the note verifier keys of the set, in the order
// given.
func (k *Key) VerifierKeys() []string {
	var vkeys []string
	for _, m := range k.members() {
		vkeys = append(vkeys, m.vkey)
	}
	return vkeys
}

// members returns the keys of the set: k alone unless k is a set.
func (k *Key) members() []*Key {
	if k.set != nil {
		return k.set
	}
	return []*Key{k}
}

// signer returns the trusted key an entry's key_id names, or an
// *UntrustedKeyError.
func (k *Key) signer(keyID string) (*Key, error) {
	for _, m := range k.members() {
		if m.id == keyID {
			return m, nil
		}
	}
	return nil, &UntrustedKeyError{KeyID: keyID, Trusted: k.IDs()}
}

// openNote opens a signed note with every key of the set (see
// signednote.Open).
func (k *Key) openNote(signed []byte) (*note.Note, error) {
	ms := k.members()
	more := make([]note.Verifier, 0, len(ms)-1)
	for _, m := range ms[1:] {
		more = append(more, m.verifier)
	}
	return signednote.Open(signed, ms[0].verifier, more...)
}

// verifyEntrySignature checks that the entry's key_id names a trusted key,
// that the key's signature verifies, and that the key was not retired at
// or below the entry's index.
func (k *Key) verifyEntrySignature(e *entry.Entry) error {
	m, err := k.signer(e.KeyID)
	if err != nil {
		return err
	}
	if err := e.Verify(m.id, m.public); err != nil {
		return err
	}
	return k.checkRetired(m.id, int64(e.Index), 0)
}

// entryKeyCheck is the check a failure of verifyEntrySignature fails.
func entryKeyCheck(err error) Check {
	if errors.Is(err, entry.ErrKeyID) || errors.Is(err, ErrRetiredKey) {
		return CheckEntryKey
	}
	return CheckEntrySignature
}

// keyOrder checks, along a range of entries, that a log's keys follow
// each other: once an entry carries another key's id than the entry
// before, no later entry carries the earlier key's.
type keyOrder struct {
	last     string
	replaced map[string]uint64 // a key's id: the index of the first entry after its last
}

func (o *keyOrder) next(index uint64, keyID string) *Failure {
	if keyID == o.last {
		return nil
	}
	if at, ok := o.replaced[keyID]; ok {
		return &Failure{Index: int64(index), Check: CheckEntryKey,
			Err: fmt.Errorf("%w: key %s signed entries up to %d, then another key took over: an old key must never sign again", ErrRetiredKey, keyID, at-1)}
	}
	if o.last != "" {
		if o.replaced == nil {
			o.replaced = map[string]uint64{}
		}
		o.replaced[o.last] = index
	}
	o.last = keyID
	return nil
}

// FollowKey says which key signed the entry before the range, start-1
// (its key_id, from a range verified before: a monitor's last run), so
// that the range's key order continues that range's: a first entry by
// another key makes keyID one of Rotations's, and no entry of the range
// may carry keyID after it. Call it before the first Add.
func (r *Range) FollowKey(keyID string) { r.keys.last = keyID }

// Rotations returns, for each key the range's entries saw replaced by
// another (from the key FollowKey gave, if any), the index of the first
// entry by the key that replaced it: the tree size a trust file's
// "retired-at" would give it. Meaningful only once Finish returned nil.
func (r *Range) Rotations() map[string]uint64 {
	out := make(map[string]uint64, len(r.keys.replaced))
	for id, at := range r.keys.replaced {
		out[id] = at
	}
	return out
}

// LastKeyID returns the key_id of the last entry added to the range, or,
// before any, the one FollowKey gave. Meaningful only once Finish
// returned nil.
func (r *Range) LastKeyID() string { return r.keys.last }
