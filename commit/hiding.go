package commit

import (
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
)

// The hiding commitment (version 2, docs/commitment.md §7). Each top-level
// field f of the parameters gets its own commitment under a secret 32-byte
// opening,
//
//	c_f    = SHA-256("ledger/v2/field\n" || opening_f || JCS(name_f) || JCS(value_f))
//	digest = SHA-256("ledger/v2/params\n" || JCS(name_1) || c_1 || JCS(name_2) || c_2 || ...)
//	size   = len(JCS(name_1) || c_1 || ...)
//
// the fields in canonical (UTF-16) order of name, as SD-JWT (RFC 9901)
// digests each salted claim: without its opening, a field's commitment
// says nothing of its value (SHA-256 over a secret 256-bit salt, as a
// random oracle), while a value and its opening, disclosed together, are
// checked one field at a time (a second value and opening with the same
// c_f is a SHA-256 collision).

// HidingDomainSeparator prefixes the field names and commitments in a
// version 2 parameter digest.
const HidingDomainSeparator = "ledger/v2/params\n"

// FieldDomainSeparator prefixes a field's opening, name and value in its
// commitment.
const FieldDomainSeparator = "ledger/v2/field\n"

// OpeningDerivationSalt is the HKDF salt of derived openings
// (DerivedOpenings).
const OpeningDerivationSalt = "ledger/v2/opening\n"

// hidingDigestPrefix marks a version 2 digest in its text form:
// "v2:sha256:" and 64 lower-case hex digits.
const hidingDigestPrefix = "v2:"

// OpeningSize is the length of an opening in bytes.
const OpeningSize = 32

// Opening is the secret that opens one field's commitment. It is as secret
// as the value it hides: its String and log forms are redacted, and it has
// no text form of its own (a Disclosure writes it to its file).
type Opening [OpeningSize]byte

// String returns a redacted placeholder, never the opening.
func (Opening) String() string { return "commit.Opening(redacted)" }

// GoString returns a redacted placeholder, never the opening.
func (Opening) GoString() string { return "commit.Opening(redacted)" }

// OpeningSource gives the opening of each top-level field of one call's
// parameters.
type OpeningSource interface {
	Opening(field string) (Opening, error)
}

type randomOpenings struct{ r io.Reader }

func (s randomOpenings) Opening(string) (Opening, error) {
	var o Opening
	if _, err := io.ReadFull(s.r, o[:]); err != nil {
		return Opening{}, fmt.Errorf("commit: drawing an opening: %w", err)
	}
	return o, nil
}

// RandomOpenings draws each opening from crypto/rand: the default, and the
// only source whose openings are independent of every other secret.
func RandomOpenings() OpeningSource { return randomOpenings{rand.Reader} }

type derivedOpenings struct {
	secret []byte
	info   []byte // JCS(callKey), the field's JCS name follows
}

func (s derivedOpenings) Opening(field string) (Opening, error) {
	info, err := AppendString(append([]byte(nil), s.info...), field)
	if err != nil {
		return Opening{}, &DomainError{Kind: ErrInvalidUTF8, Key: true, Offset: -1}
	}
	key, err := hkdf.Key(sha256.New, s.secret, []byte(OpeningDerivationSalt), string(info), OpeningSize)
	if err != nil {
		return Opening{}, fmt.Errorf("commit: deriving an opening: %w", err)
	}
	return Opening(key), nil
}

// ErrShortSecret is returned by DerivedOpenings for a secret shorter than
// OpeningSize bytes.
var ErrShortSecret = errors.New("commit: an opening secret is at least 32 bytes")

// ErrEmptyCallKey is returned by DerivedOpenings for an empty call key.
var ErrEmptyCallKey = errors.New("commit: derived openings need a non-empty call key")

// DerivedOpenings derives each opening from a workload secret and the
// call's key (its idempotency key), so that nothing needs storing:
//
//	opening_f = HKDF-SHA256(secret, salt "ledger/v2/opening\n", info JCS(callKey) || JCS(name_f), 32)
//
// The trade-off (docs/commitment.md §7.5): the one secret then guards every
// value ever committed with it, and erasure means destroying the secret
// for every call at once; and a repeated call key gives the same openings,
// so identical calls under one key are linkable.
func DerivedOpenings(secret []byte, callKey string) (OpeningSource, error) {
	if len(secret) < OpeningSize {
		return nil, ErrShortSecret
	}
	if callKey == "" {
		return nil, ErrEmptyCallKey
	}
	info, err := AppendString(nil, callKey)
	if err != nil {
		return nil, fmt.Errorf("commit: the call key: %w", err)
	}
	return derivedOpenings{secret: append([]byte(nil), secret...), info: info}, nil
}

// Hide checks raw parameters, given as JSON text, against the domain and
// returns their version 2 commitment with the disclosure that opens it:
// every field's canonical value and opening, which stay with the workload
// (docs/commitment.md §7.3). Refusals are the ones Params gives, for the
// same input.
func (d Domain) Hide(data []byte, src OpeningSource) (Commitment, *Disclosure, error) {
	n, err := d.parseObject(data)
	if err != nil {
		return Commitment{}, nil, err
	}
	x := &Disclosure{fields: make([]disclosedField, len(n.members))}
	var openings []byte
	if r, ok := src.(randomOpenings); ok { // one read for every field
		openings = make([]byte, OpeningSize*len(n.members))
		if _, err := io.ReadFull(r.r, openings); err != nil {
			return Commitment{}, nil, fmt.Errorf("commit: drawing openings: %w", err)
		}
	}
	// Every field's canonical value goes into one buffer, which the
	// disclosure's values are slices of (a value written after the buffer
	// grew is in the new one; earlier ones stay valid in the old).
	values := make([]byte, 0, len(data))
	var scratch [2048]byte // the hashed messages, on the stack unless a field is longer
	buf := scratch[:0]
	for i := range n.members {
		m := &n.members[i]
		f := &x.fields[i]
		start := len(values)
		values = appendCanonical(values, &m.value)
		f.name, f.value, f.disclosed = m.name, values[start:len(values):len(values)], true
		if openings != nil {
			f.opening = Opening(openings[i*OpeningSize : (i+1)*OpeningSize])
		} else if f.opening, err = src.Opening(string(f.name)); err != nil {
			return Commitment{}, nil, err
		}
		buf, f.commitment = fieldCommitment(buf, f.opening, m.name, f.value)
	}
	x.Commitment = x.commitMapWith(buf)
	return x.Commitment, x, nil
}

// Hide is Domain{}.Hide.
func Hide(data []byte, src OpeningSource) (Commitment, *Disclosure, error) {
	return Domain{}.Hide(data, src)
}

// fieldCommitment returns c_f for the field name (raw, as decoded) with
// canonical value, writing the hashed message into buf, which it returns
// for the next field.
func fieldCommitment(buf []byte, opening Opening, name, value []byte) ([]byte, [sha256.Size]byte) {
	buf = append(buf[:0], FieldDomainSeparator...)
	buf = append(buf, opening[:]...)
	buf = appendString(buf, name)
	buf = append(buf, value...)
	return buf, sha256.Sum256(buf)
}

// ParseParamsDigest parses the text form of a parameter digest of either
// version: "sha256:<hex>" (version 1) or "v2:sha256:<hex>" (version 2,
// hiding), and says which it is.
func ParseParamsDigest(s string) (d Digest, hiding bool, err error) {
	if len(s) > len(hidingDigestPrefix) && s[:len(hidingDigestPrefix)] == hidingDigestPrefix {
		d, err = ParseDigest(s[len(hidingDigestPrefix):])
		return d, true, err
	}
	d, err = ParseDigest(s)
	return d, false, err
}

// DigestText returns the text form of c's digest: "sha256:<hex>" for a
// version 1 commitment, "v2:sha256:<hex>" for a hiding one. Entries and
// requests carry it as params_digest.
func (c Commitment) DigestText() string {
	return string(c.AppendDigestText(nil))
}

// AppendDigestText appends DigestText's form to b.
func (c Commitment) AppendDigestText(b []byte) []byte {
	if c.Hiding {
		b = append(b, hidingDigestPrefix...)
	}
	b, _ = c.Digest.AppendText(b)
	return b
}

// MinSize is the least size a commitment of c's version has: 2 for
// version 1 (the canonical {}), 0 for version 2 (no field: nothing
// covered).
func (c Commitment) MinSize() int {
	if c.Hiding {
		return 0
	}
	return 2
}

// Version returns the commitment's format version: 1, or 2 if it hides.
func (c Commitment) Version() int {
	if c.Hiding {
		return 2
	}
	return 1
}

// commitMap returns the commitment to x's field commitments: the names
// (each a JCS string, so self-delimiting) and the 32-byte commitments, in
// canonical order.
func (x *Disclosure) commitMap() Commitment { return x.commitMapWith(nil) }

// commitMapWith is commitMap writing the hashed message into buf.
func (x *Disclosure) commitMapWith(buf []byte) Commitment {
	buf = append(buf[:0], HidingDomainSeparator...)
	for i := range x.fields {
		buf = appendString(buf, x.fields[i].name)
		buf = append(buf, x.fields[i].commitment[:]...)
	}
	return Commitment{Digest: sha256.Sum256(buf), Size: len(buf) - len(HidingDomainSeparator), Hiding: true}
}
