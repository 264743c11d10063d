package verify

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
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
// replaced. After a rotation the old key must never sign again; an entry
// it signed after the new key's first one was not made by the log.
var ErrRetiredKey = errors.New("signed by a key that a rotation replaced")

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
// counts once. A set of one key is that key.
func NewKeySet(keys ...*Key) (*Key, error) {
	var set []*Key
	seen := map[string]bool{}
	for _, k := range keys {
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
		return set[0], nil
	}
	first := *set[0]
	first.set = set
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

// ParseTrustFile parses a trust file: one note verifier key per line;
// blank lines, and lines whose first non-blank character is '#', are
// skipped; leading and trailing blanks are trimmed. It returns the keys'
// texts, for ParseKeys. A malformed line is refused naming its number.
func ParseTrustFile(data []byte) ([]string, error) {
	if len(data) > maxTrustFile {
		return nil, fmt.Errorf("verify: trust file larger than %d bytes", maxTrustFile)
	}
	var vkeys []string
	s := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; s.Scan(); n++ {
		line := strings.TrimSpace(s.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if _, err := ParseKey(line); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		vkeys = append(vkeys, line)
	}
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("verify: trust file: %w", err)
	}
	if len(vkeys) == 0 {
		return nil, errors.New("verify: trust file holds no verifier key")
	}
	return vkeys, nil
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

// verifyEntrySignature checks that the entry's key_id names a trusted key
// and that the key's signature verifies.
func (k *Key) verifyEntrySignature(e *entry.Entry) error {
	m, err := k.signer(e.KeyID)
	if err != nil {
		return err
	}
	return e.Verify(m.id, m.public)
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
