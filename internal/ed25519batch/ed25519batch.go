// Package ed25519batch signs many messages with one Ed25519 key at once,
// producing exactly the bytes crypto/ed25519.Sign produces, for less CPU.
//
// # Claim
//
// For every 64-byte crypto/ed25519 private key k and every message m,
// NewPrivateKey(k) then Sign(m), or SignBatch with m at any position of the
// batch, returns a signature equal byte for byte to crypto/ed25519.Sign(k, m):
// pure Ed25519 as RFC 8032 §5.1.6 specifies it (no context, no prehash). As
// in crypto/ed25519, the public key is taken from the second half of k and
// is not checked against the seed. Ed25519 signing is deterministic, so this
// equality is the whole of correctness: an auditor cannot tell which of the
// two signed an entry, and the tests compare the two on random keys, messages
// and batches (and the RFC 8032 §7.1 vectors).
//
// The secret scalar and the nonces are handled only by the constant-time
// field, scalar and point operations of filippo.io/edwards25519 (the public
// module of the code crypto/ed25519 uses internally) and by SHA-512; no
// branch or memory index depends on them. The only data-dependent control
// flow is on the number and lengths of the messages, which are public, and
// the check that the product of the Zs is not zero (below), which always
// goes the same way.
//
// # Why
//
// Signing a message m is, with (s, prefix) derived from the seed and A the
// public key:
//
//	r = SHA-512(prefix || m) mod L
//	R = [r]B, encoded as y with the sign of x in the top bit
//	S = (r + SHA-512(R || A || m) * s) mod L
//
// Encoding R needs the affine x = X/Z and y = Y/Z of the point, which the
// scalar multiplication returns in extended coordinates (X:Y:Z:T): a field
// inversion per signature, about 5 µs of the ~40 µs crypto/ed25519.Sign costs
// on the ledger's reference machine, and crypto/ed25519 encodes R twice (once
// to hash it, once to write it), so it inverts twice. SignBatch computes every
// R of the batch first, then inverts all their Z at once with Montgomery's
// trick (one inversion and three multiplications per point), then finishes
// each signature. The scalar multiplication (~29 µs) and the two SHA-512
// remain per message. Measured on 600-byte messages (valgrind instruction
// counts, which this shared machine cannot disturb): 310,400 instructions
// per crypto/ed25519.Sign, 273,100 (−12 %) for Sign, 236,500 (−24 %) per
// signature in batches of 16 and 234,700 in batches of 64; CPU time per
// signature fell by about as much. docs/performance.md, "Batch signing
// (issue 17, 2026-12-01)", has the figures and the commands.
//
// # Z is never zero
//
// Batch inversion multiplies all the Zs together, so one Z of zero would
// make every inverse in its chunk wrong. It cannot happen: [r]B starts at
// the identity (Z = 1), and every step of edwards25519's scalar
// multiplication is an addition or a doubling in the formulas of Hisil,
// Wong, Carter and Dawson (eprint 2008/522), whose output Z is Z1²Z2² (or
// Z1⁴ for a doubling) times factors of the form 1 ± d·x1x2y1y2, with x, y the
// affine coordinates. On edwards25519 (a = -1, a square mod p; d not a
// square) those factors are never zero for points on the curve: that is the
// completeness of the twisted Edwards addition law (Bernstein, Birkner,
// Joye, Lange and Peters, "Twisted Edwards Curves", 2008). As p is prime, a
// product of nonzero elements is nonzero. SignBatch still checks the product
// (a constant-time comparison, once per chunk) and panics rather than return
// wrong signatures, should a bug ever break that reasoning.
package ed25519batch

import (
	"crypto/ed25519"
	"crypto/sha512"
	"errors"
	"fmt"
	"hash"

	"filippo.io/edwards25519"
	"filippo.io/edwards25519/field"
)

// SignatureSize is the size of an Ed25519 signature, as in crypto/ed25519.
const SignatureSize = ed25519.SignatureSize

// chunk bounds the scratch space of SignBatch (about 200 bytes a message):
// one inversion per 256 signatures already costs them almost nothing each.
const chunk = 256

// ErrKeySize reports a private key that is not ed25519.PrivateKeySize bytes.
var ErrKeySize = errors.New("ed25519batch: private key is not 64 bytes")

// PrivateKey is an Ed25519 private key with its secret scalar and nonce
// prefix computed once, ready to sign. It is immutable and safe for
// concurrent use. It holds secret material: do not print or log it.
type PrivateKey struct {
	s      edwards25519.Scalar // clamp(SHA-512(seed)[:32]) mod L
	prefix [32]byte            // SHA-512(seed)[32:], the nonce key
	pub    [32]byte            // the public key A, as stored in the private key
}

// NewPrivateKey prepares priv, a crypto/ed25519 private key (seed followed
// by public key), for signing. It returns ErrKeySize, wrapped, if priv has
// the wrong length. The caller may clear priv afterwards: nothing refers to it.
func NewPrivateKey(priv ed25519.PrivateKey) (*PrivateKey, error) {
	if len(priv) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("%w: got %d bytes", ErrKeySize, len(priv))
	}
	h := sha512.Sum512(priv[:ed25519.SeedSize])
	defer clear(h[:])
	k := new(PrivateKey)
	if _, err := k.s.SetBytesWithClamping(h[:32]); err != nil {
		// SetBytesWithClamping fails only on a length other than 32.
		panic("ed25519batch: internal error: " + err.Error())
	}
	copy(k.prefix[:], h[32:])
	copy(k.pub[:], priv[ed25519.SeedSize:])
	return k, nil
}

// Sign returns the signature of message, equal to crypto/ed25519.Sign's.
// It costs one field inversion, where crypto/ed25519.Sign costs two.
func (k *PrivateKey) Sign(message []byte) []byte {
	return k.SignBatch([][]byte{message})[0]
}

// SignBatch returns the signatures of messages, in their order: sigs[i] is
// crypto/ed25519.Sign's signature of messages[i], whatever the other
// messages are. Each signature is its own 64-byte slice (sharing one
// allocation, capacity-limited so that appending to one cannot overwrite
// the next). Messages may be empty, repeated or aliased; they are only read.
// An empty batch returns nil.
func (k *PrivateKey) SignBatch(messages [][]byte) [][]byte {
	if len(messages) == 0 {
		return nil
	}
	sigs := make([][]byte, len(messages))
	buf := make([]byte, len(messages)*SignatureSize)
	for i := range sigs {
		sigs[i] = buf[i*SignatureSize : (i+1)*SignatureSize : (i+1)*SignatureSize]
	}
	st := make([]nonce, min(len(messages), chunk))
	// The nonces are as secret as the key: with r and a signature, anyone
	// can solve S = r + k·s for s.
	defer clear(st)
	h := sha512.New()
	for start := 0; start < len(messages); start += chunk {
		end := min(start+chunk, len(messages))
		k.signChunk(h, st[:end-start], messages[start:end], sigs[start:end])
	}
	return sigs
}

// nonce is one signature in progress: its nonce r, and R = [r]B in
// projective coordinates until inv holds 1/Z.
type nonce struct {
	r       edwards25519.Scalar
	x, y, z field.Element
	inv     field.Element // prefix product of the Zs, then 1/Z
}

// signChunk signs msgs into sigs, using st (of the same length) as scratch.
func (k *PrivateKey) signChunk(h hash.Hash, st []nonce, msgs, sigs [][]byte) {
	var digest [sha512.Size]byte
	var R edwards25519.Point
	for i, m := range msgs {
		n := &st[i]
		h.Reset()
		h.Write(k.prefix[:])
		h.Write(m)
		h.Sum(digest[:0])
		if _, err := n.r.SetUniformBytes(digest[:]); err != nil {
			panic("ed25519batch: internal error: " + err.Error()) // only on a length other than 64
		}
		R.ScalarBaseMult(&n.r)
		X, Y, Z, _ := R.ExtendedCoordinates()
		n.x.Set(X)
		n.y.Set(Y)
		n.z.Set(Z)
		if i == 0 {
			n.inv.Set(Z)
		} else {
			n.inv.Multiply(&st[i-1].inv, Z)
		}
	}
	clear(digest[:])

	// Montgomery's trick: with st[i].inv = Z0·…·Zi, and inv = 1/(Z0·…·Zi),
	// 1/Zi = inv · (Z0·…·Zi-1), and inv·Zi = 1/(Z0·…·Zi-1) moves down one.
	last := len(st) - 1
	var zero, inv field.Element
	if st[last].inv.Equal(&zero) == 1 {
		panic("ed25519batch: internal error: a point's Z coordinate is zero")
	}
	inv.Invert(&st[last].inv)
	for i := last; i > 0; i-- {
		st[i].inv.Multiply(&inv, &st[i-1].inv)
		inv.Multiply(&inv, &st[i].z)
	}
	st[0].inv.Set(&inv)

	var x, y field.Element
	for i, m := range msgs {
		n, sig := &st[i], sigs[i]
		// R's encoding, as edwards25519.Point.Bytes writes it (RFC 8032
		// §5.1.2): y, little-endian, with the sign of x in the top bit.
		x.Multiply(&n.x, &n.inv)
		y.Multiply(&n.y, &n.inv)
		copy(sig[:32], y.Bytes())
		sig[31] |= byte(x.IsNegative() << 7)

		h.Reset()
		h.Write(sig[:32])
		h.Write(k.pub[:])
		h.Write(m)
		h.Sum(digest[:0])
		var c, S edwards25519.Scalar
		if _, err := c.SetUniformBytes(digest[:]); err != nil {
			panic("ed25519batch: internal error: " + err.Error())
		}
		S.MultiplyAdd(&c, &k.s, &n.r)
		copy(sig[32:], S.Bytes())
	}
}
