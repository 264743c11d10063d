package verify_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"math/big"
	"strings"
	"testing"

	"github.com/decisionledger/ledger/verify"
)

// edgeSignatures returns, for a valid signature, signatures at the edges
// of what Ed25519 verifiers disagree on: S + L (the same signature with a
// non-reduced scalar, which RFC 8032 and crypto/ed25519 refuse), S + 2L and
// S with its top bits set, R changed in one bit or replaced by the
// identity's and a non-canonical (y ≥ p) encoding, S = 0, all zeros, and
// the valid one itself.
func edgeSignatures(sig []byte) map[string][]byte {
	l, _ := new(big.Int).SetString("7237005577332262213973186563042994240857116359379907606001950938285454250989", 10)
	scalar := func(b []byte) *big.Int { return new(big.Int).SetBytes(reverse(b)) }
	withS := func(s *big.Int) []byte {
		out := bytes.Clone(sig)
		le := reverse(s.FillBytes(make([]byte, 32)))
		copy(out[32:], le)
		return out
	}
	withR := func(r []byte) []byte {
		out := bytes.Clone(sig)
		copy(out[:32], r)
		return out
	}
	s := scalar(sig[32:])
	identity := make([]byte, 32)
	identity[0] = 1
	nonCanonicalY := bytes.Repeat([]byte{0xff}, 32) // y = 2^255 - 1 ≥ p, sign bit set
	nonCanonicalY[31] = 0x7f
	flipped := withR(sig[:32])
	flipped[5] ^= 0x10
	topBits := bytes.Clone(sig)
	topBits[63] |= 0xe0
	return map[string][]byte{
		"valid":             bytes.Clone(sig),
		"S + L":             withS(new(big.Int).Add(s, l)),
		"S + 2L":            withS(new(big.Int).Add(s, new(big.Int).Lsh(l, 1))),
		"S top bits":        topBits,
		"S = 0":             withS(new(big.Int)),
		"R bit flipped":     flipped,
		"R identity":        withR(identity),
		"R non-canonical y": withR(nonCanonicalY),
		"all zeros":         make([]byte, ed25519.SignatureSize),
	}
}

func reverse(b []byte) []byte {
	out := make([]byte, len(b))
	for i := range b {
		out[len(b)-1-i] = b[i]
	}
	return out
}

// VerifyExport accepts an entry's signature exactly when
// crypto/ed25519.Verify does, at the edges where Ed25519 verifiers
// disagree; and it refuses the malleated S + L, which a verifier that
// does not check S < L (or a batch verifier) might accept.
func TestExportSignatureEdges(t *testing.T) {
	names := []string{"valid", "S + L", "S + 2L", "S top bits", "S = 0", "R bit flipped", "R identity", "R non-canonical y", "all zeros"}
	if len(names) != len(edgeSignatures(make([]byte, ed25519.SignatureSize))) {
		t.Fatal("names and edgeSignatures differ")
	}
	for _, name := range names {
		t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
			// Entry 1 of a 3-entry export carries the edge signature
			// (made from its valid one); the tree is built over it.
			var buf bytes.Buffer
			var message, edge []byte
			vkey := writeExportKeeping(t, &buf, 3, nil, func(i int, m, sig []byte) []byte {
				if i != 1 {
					return nil
				}
				message, edge = m, edgeSignatures(sig)[name]
				return edge
			})
			raw, err := base64.StdEncoding.DecodeString(strings.SplitN(vkey, "+", 3)[2])
			if err != nil {
				t.Fatal(err)
			}
			key, err := verify.ParseKey(vkey)
			if err != nil {
				t.Fatal(err)
			}
			want := ed25519.Verify(ed25519.PublicKey(raw[1:]), message, edge)
			if want != (name == "valid") {
				t.Fatalf("crypto/ed25519.Verify = %v for %s", want, name)
			}
			_, err = verify.VerifyExport(bytes.NewReader(buf.Bytes()), key, verify.ExportOptions{})
			var f *verify.Failure
			switch {
			case want && err != nil:
				t.Fatalf("crypto/ed25519 accepts the signature, VerifyExport refuses: %v", err)
			case !want && (!errors.As(err, &f) || f.Index != 1 || f.Check != verify.CheckEntrySignature):
				t.Fatalf("crypto/ed25519 refuses the signature, VerifyExport: %v; want entry 1: signature", err)
			}
		})
	}
}
