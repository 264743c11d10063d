// Package logtest builds signed logs and their export files without a
// ledger, for tests of offline verification: the caller chooses every
// entry, including entries the ledger would refuse to append (a lying
// ledger signing with its own key), and Log signs, chains and commits to
// them exactly as docs/entry.md §2 and docs/log.md specify: Ed25519
// signatures under the note key, prev links, an RFC 6962 tree and a C2SP
// signed checkpoint; Export writes docs/export.md's frames.
//
// It is not a ledger: it checks nothing about the entries beyond what the
// entry package's encoder checks.
package logtest

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
	tlog "github.com/transparency-dev/formats/log"
	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"
)

// Log is a log under construction: its key, and its signed entries.
type Log struct {
	// Origin is the log's origin, the key's name.
	Origin string
	// VerifierKey is the note verifier key (name+hash+base64).
	VerifierKey string
	keyID       string
	signer      note.Signer
	priv        ed25519.PrivateKey
	entries     [][]byte
	hashes      []commit.Digest
}

// New returns an empty log with a new key named origin.
func New(origin string) (*Log, error) {
	l := &Log{Origin: origin}
	if err := l.Rotate(); err != nil {
		return nil, err
	}
	return l, nil
}

// Rotate replaces the log's key with a new key of the same name, as
// ledgerd key rotate does: the entries appended from now on carry the new
// key's id and signature; those before keep the old key's. VerifierKey is
// then the new key's.
func (l *Log) Rotate() error {
	skey, vkey, err := note.GenerateKey(rand.Reader, l.Origin)
	if err != nil {
		return err
	}
	signer, err := note.NewSigner(skey)
	if err != nil {
		return err
	}
	// The entries are signed with the note key's own Ed25519 key: the
	// skey text's last field is base64(algorithm byte || seed).
	raw, err := base64.StdEncoding.DecodeString(skey[len(skey)-44:])
	if err != nil || len(raw) != 1+ed25519.SeedSize {
		return fmt.Errorf("logtest: unexpected note private key")
	}
	l.VerifierKey, l.signer = vkey, signer
	l.priv = ed25519.NewKeyFromSeed(raw[1:])
	l.keyID = fmt.Sprintf("%s+%08x", l.Origin, signer.KeyHash())
	return nil
}

// Copy returns a log of the first n entries of l, with l's key: another
// history the same key signs, to go on differently.
func (l *Log) Copy(n uint64) *Log {
	c := *l
	c.entries = append([][]byte(nil), l.entries[:n]...)
	c.hashes = append([]commit.Digest(nil), l.hashes[:n]...)
	return &c
}

// Len is the number of entries.
func (l *Log) Len() uint64 { return uint64(len(l.entries)) }

// Append sets e's origin, index, prev and key, signs it with the log's
// key and appends it. It returns the entry's index and entry hash (an
// approval's id when e is a needs_approval decision).
func (l *Log) Append(e entry.Entry) (uint64, commit.Digest, error) {
	e.Origin, e.Index, e.KeyID, e.Signature = l.Origin, l.Len(), l.keyID, nil
	e.Prev = commit.Digest{}
	if n := len(l.hashes); n > 0 {
		e.Prev = l.hashes[n-1]
	}
	h, err := e.Sign(l.keyID, func(m []byte) []byte { return ed25519.Sign(l.priv, m) })
	if err != nil {
		return 0, commit.Digest{}, err
	}
	b, err := e.Marshal()
	if err != nil {
		return 0, commit.Digest{}, err
	}
	l.entries = append(l.entries, b)
	l.hashes = append(l.hashes, h)
	return e.Index, h, nil
}

// Hash returns the entry hash of entry i.
func (l *Log) Hash(i uint64) commit.Digest { return l.hashes[i] }

// Entry returns the signed entry i.
func (l *Log) Entry(i uint64) []byte { return l.entries[i] }

// Export returns an export file of entries [start, end) proved against a
// checkpoint of the whole log, with the prev frame when start > 0.
func (l *Log) Export(start, end uint64) ([]byte, error) {
	if start > end || end > l.Len() {
		return nil, fmt.Errorf("logtest: range %d to %d of a log of %d entries", start, end, l.Len())
	}
	rf := &compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}
	all, left, right := rf.NewEmptyRange(0), rf.NewEmptyRange(0), rf.NewEmptyRange(end)
	for i, b := range l.entries {
		h := rfc6962.DefaultHasher.HashLeaf(b)
		err := all.Append(h, nil)
		switch {
		case err != nil:
		case uint64(i) < start:
			err = left.Append(h, nil)
		case uint64(i) >= end:
			err = right.Append(h, nil)
		}
		if err != nil {
			return nil, err
		}
	}
	root := rfc6962.DefaultHasher.EmptyRoot()
	if l.Len() > 0 {
		var err error
		if root, err = all.GetRootHash(nil); err != nil {
			return nil, err
		}
	}
	cp, err := note.Sign(&note.Note{Text: string(tlog.Checkpoint{Origin: l.Origin, Size: l.Len(), Hash: root}.Marshal())}, l.signer)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	frame := func(tag string, p []byte) {
		fmt.Fprintf(&b, "%s %d\n", tag, len(p))
		b.Write(p)
		b.WriteByte('\n')
	}
	b.WriteString("ledger-export v1\n")
	frame("checkpoint", cp)
	frame("range", []byte(strconv.FormatUint(start, 10)+" "+strconv.FormatUint(end, 10)))
	if start > 0 {
		frame("prev", []byte(l.hashes[start-1].String()))
	}
	frame("left", bytes.Join(left.Hashes(), nil))
	frame("right", bytes.Join(right.Hashes(), nil))
	for _, e := range l.entries[start:end] {
		frame("entry", e)
	}
	frame("end", nil)
	return b.Bytes(), nil
}

// Params returns the parameter commitment of a JSON object text, for
// building entries; it panics on a text commit.Params refuses.
func Params(json string) commit.Commitment {
	c, err := commit.Params([]byte(json))
	if err != nil {
		panic(err)
	}
	return c
}

// Digest returns the SHA-256 digest of s, a stand-in for tiers, preview
// and other digests the entries carry.
func Digest(s string) commit.Digest { return sha256.Sum256([]byte(s)) }
