package commit

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
)

// ParamsDomainSeparator prefixes the canonical parameters in the parameter
// digest, so that no digest computed for another purpose (an entry hash, a
// tier table) can be taken for one of parameters. A future format changes
// this string.
const ParamsDomainSeparator = "ledger/v1/params\n"

// digestPrefix names the hash function in the text form of a Digest.
const digestPrefix = "sha256:"

// Digest is a SHA-256 digest. Its text form is "sha256:" followed by 64
// lower-case hexadecimal digits.
type Digest [sha256.Size]byte

// errMalformedDigest is the cause of every ParseDigest refusal.
var errMalformedDigest = errors.New("malformed digest")

// ParseDigest parses the text form of a Digest. It accepts exactly one
// spelling: the "sha256:" prefix and 64 lower-case hexadecimal digits.
func ParseDigest(s string) (Digest, error) {
	var d Digest
	if len(s) != len(digestPrefix)+2*len(d) || s[:len(digestPrefix)] != digestPrefix {
		return Digest{}, fmt.Errorf("commit: %w: want %q and %d lower-case hex digits", errMalformedDigest, digestPrefix, 2*len(d))
	}
	h := s[len(digestPrefix):]
	for i := 0; i < len(h); i++ {
		if c := h[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return Digest{}, fmt.Errorf("commit: %w: character %d is not a lower-case hex digit", errMalformedDigest, len(digestPrefix)+i)
		}
	}
	if _, err := hex.Decode(d[:], []byte(h)); err != nil {
		return Digest{}, fmt.Errorf("commit: %w: %v", errMalformedDigest, err)
	}
	return d, nil
}

// String returns the text form, "sha256:<hex>".
func (d Digest) String() string {
	b, _ := d.MarshalText()
	return string(b)
}

// MarshalText returns the text form, "sha256:<hex>".
func (d Digest) MarshalText() ([]byte, error) {
	return d.AppendText(make([]byte, 0, len(digestPrefix)+hex.EncodedLen(len(d))))
}

// AppendText appends the text form, "sha256:<hex>", to b.
func (d Digest) AppendText(b []byte) ([]byte, error) {
	b = append(b, digestPrefix...)
	return hex.AppendEncode(b, d[:]), nil
}

// UnmarshalText parses the text form as ParseDigest does.
func (d *Digest) UnmarshalText(text []byte) error {
	v, err := ParseDigest(string(text))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// Equal reports whether d and o are the same digest, in time that does not
// depend on where they differ.
func (d Digest) Equal(o Digest) bool {
	return subtle.ConstantTimeCompare(d[:], o[:]) == 1
}

// Commitment is what the ledger records of an action's parameters: the
// parameter digest and the length of the canonical form it was computed
// over.
type Commitment struct {
	Digest Digest
	Size   int
	// Hiding marks a version 2 commitment (Hide): Digest is over the
	// field names and commitments, and Size is their length.
	Hiding bool
}

// Equal reports whether c and o are the same commitment. The digests are
// compared in constant time.
func (c Commitment) Equal(o Commitment) bool {
	return c.Digest.Equal(o.Digest) && c.Size == o.Size && c.Hiding == o.Hiding
}

// commitNode computes the commitment to a checked parameter object. The
// canonical form is written after the domain separator in one buffer,
// sized for the input, and hashed in one call.
func commitNode(n *node, sizeHint int) Commitment {
	buf := make([]byte, 0, len(ParamsDomainSeparator)+sizeHint)
	buf = append(buf, ParamsDomainSeparator...)
	buf = appendCanonical(buf, n)
	return Commitment{Digest: sha256.Sum256(buf), Size: len(buf) - len(ParamsDomainSeparator)}
}

// Params checks raw parameters, given as JSON text, against the domain and
// returns their commitment:
//
//	SHA-256("ledger/v1/params\n" || JCS(params))
//
// with the length of JCS(params). Parameters must be a JSON object.
func (d Domain) Params(data []byte) (Commitment, error) {
	n, err := d.parseObject(data)
	if err != nil {
		return Commitment{}, err
	}
	return commitNode(&n, len(data)), nil
}

// parseObject parses data as one JSON value in the domain and refuses it
// unless it is an object.
func (d Domain) parseObject(data []byte) (node, error) {
	p := newParser(data, d)
	n, err := p.parseDocument()
	if err != nil {
		return node{}, err
	}
	if n.kind != kindObject {
		return node{}, &DomainError{Kind: ErrNotObject, Offset: firstNonSpace(data)}
	}
	return n, nil
}

// Params is Domain{}.Params.
func Params(data []byte) (Commitment, error) { return Domain{}.Params(data) }

func firstNonSpace(data []byte) int {
	for i, c := range data {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return i
		}
	}
	return len(data)
}
