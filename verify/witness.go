package verify

// Witness cosignatures (C2SP tlog-cosignature, cosignature/v1).
//
// A witness checks that each checkpoint a log shows it extends the last one
// it saw, and cosigns it: it adds a signature line to the checkpoint's
// note,
//
//	— <witness name> base64(key ID || timestamp || signature)
//
// the key ID being SHA-256(<name> || "\n" || 0x04 || public key)[:4], the
// timestamp 8 bytes big-endian (seconds since the epoch) and the signature
// Ed25519 over
//
//	"cosignature/v1\ntime " || <timestamp in decimal> || "\n" || <note text>
//
// A witness's verifier key is a C2SP signed-note vkey with key type 0x04:
// "<name>+<key ID in hex>+base64(0x04 || public key)".
//
// golang.org/x/mod/sumdb/note cannot verify these by itself: its
// NewVerifier knows only key type 0x01 (plain Ed25519 over the note text)
// and refuses 0x04 as an unknown algorithm, and its signature would be
// checked over the text alone, without the header and timestamp. But
// note.Open takes any note.Verifier, so WitnessKey implements one (the
// only hand-written part: the message above and the key parsing), and the
// strict opening of internal/signednote, which the log key goes through
// too, does the rest: every line by a listed witness must be in canonical
// base64 and verify, or the checkpoint is refused.

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/decisionledger/ledger/internal/signednote"
	"golang.org/x/mod/sumdb/note"
)

// CheckWitnesses is the check that a checkpoint carries enough valid
// cosignatures from the witnesses the verifier was told to trust.
const CheckWitnesses Check = "witness-cosignatures"

// keyTypeCosignatureV1 is the signed-note key type of Ed25519
// cosignature/v1 keys.
const keyTypeCosignatureV1 = 0x04

// WitnessKey is a witness's cosignature/v1 verifier key. It is a
// note.Verifier.
type WitnessKey struct {
	vkey string
	name string
	hash uint32
	key  ed25519.PublicKey
}

// ParseWitnessKey parses a witness verifier key
// "<name>+<hash>+base64(0x04 || Ed25519 public key)", checking that the
// hash is the key ID of the name and key.
func ParseWitnessKey(vkey string) (*WitnessKey, error) {
	fail := func(why string) (*WitnessKey, error) {
		return nil, fmt.Errorf("verify: witness key %q: %s", vkey, why)
	}
	name, rest, ok1 := strings.Cut(vkey, "+")
	hash16, key64, ok2 := strings.Cut(rest, "+")
	if !ok1 || !ok2 {
		return fail("not of the form name+hash+key")
	}
	if name == "" || !utf8.ValidString(name) || strings.IndexFunc(name, unicode.IsSpace) >= 0 {
		return fail("the name is empty or has spaces")
	}
	hash, err := strconv.ParseUint(hash16, 16, 32)
	if err != nil || len(hash16) != 8 {
		return fail("the key hash is not 8 hex digits")
	}
	raw, err := base64.StdEncoding.DecodeString(key64)
	if err != nil || base64.StdEncoding.EncodeToString(raw) != key64 {
		return fail("the key is not canonical base64")
	}
	if len(raw) == 0 || raw[0] != keyTypeCosignatureV1 {
		if len(raw) > 0 && raw[0] == 1 {
			return fail("key type 0x01 is a log's signing key, not a witness's cosignature/v1 key (type 0x04)")
		}
		return fail("not a cosignature/v1 key (key type 0x04)")
	}
	if len(raw) != 1+ed25519.PublicKeySize {
		return fail("the Ed25519 public key is not 32 bytes")
	}
	if uint32(hash) != witnessKeyHash(name, raw) {
		return fail("the key hash does not match the name and key")
	}
	return &WitnessKey{vkey: vkey, name: name, hash: uint32(hash), key: ed25519.PublicKey(raw[1:])}, nil
}

func witnessKeyHash(name string, typedKey []byte) uint32 {
	h := sha256.New()
	h.Write([]byte(name + "\n"))
	h.Write(typedKey)
	return binary.BigEndian.Uint32(h.Sum(nil))
}

// Name returns the witness's name, as its cosignature lines give it.
func (w *WitnessKey) Name() string { return w.name }

// KeyHash returns the key ID its cosignature lines start with.
func (w *WitnessKey) KeyHash() uint32 { return w.hash }

// String returns the verifier key as parsed.
func (w *WitnessKey) String() string { return w.vkey }

// ID returns "<name>+<key ID in hex>", how messages name the witness.
func (w *WitnessKey) ID() string { return fmt.Sprintf("%s+%08x", w.name, w.hash) }

// Verify checks a cosignature/v1 signature (timestamp || Ed25519
// signature, the key ID already removed) over a note's text.
func (w *WitnessKey) Verify(text, sig []byte) bool {
	if len(sig) != 8+ed25519.SignatureSize {
		return false
	}
	t := binary.BigEndian.Uint64(sig)
	if t > math.MaxInt64 {
		return false
	}
	m := make([]byte, 0, 64+len(text))
	m = append(m, "cosignature/v1\ntime "...)
	m = strconv.AppendUint(m, t, 10)
	m = append(m, '\n')
	m = append(m, text...)
	return ed25519.Verify(w.key, m, sig[8:])
}

var _ note.Verifier = (*WitnessKey)(nil)

// WitnessPolicy is the witnesses a verifier trusts and how many of them
// must have cosigned a checkpoint.
type WitnessPolicy struct {
	witnesses []*WitnessKey
	needed    int
}

// NewWitnessPolicy returns a policy needing valid cosignatures from needed
// distinct witnesses among ws. Two witnesses may not share a public key:
// a cosignature/v1 signature does not cover the witness's name, so one
// key listed under two names would count twice.
func NewWitnessPolicy(ws []*WitnessKey, needed int) (*WitnessPolicy, error) {
	if needed < 0 || needed > len(ws) {
		return nil, fmt.Errorf("verify: %d witness cosignatures needed, but %d witness keys given", needed, len(ws))
	}
	for i, a := range ws {
		for _, b := range ws[:i] {
			if a.key.Equal(b.key) {
				return nil, fmt.Errorf("verify: witness keys %s and %s are the same public key: list each witness once", b.ID(), a.ID())
			}
		}
	}
	return &WitnessPolicy{witnesses: ws, needed: needed}, nil
}

// Needed returns how many witnesses must have cosigned.
func (p *WitnessPolicy) Needed() int { return p.needed }

// WithWitnesses returns a copy of the key that, in addition, refuses
// every checkpoint without the cosignatures p needs: every command that
// opens a checkpoint through Key.Checkpoint enforces it. A nil p removes
// the policy.
func (k *Key) WithWitnesses(p *WitnessPolicy) *Key {
	c := *k
	c.witnesses = p
	return &c
}

// WitnessError refuses a checkpoint without enough valid cosignatures. It
// names the witnesses that cosigned and those that did not.
type WitnessError struct {
	Needed   int
	Cosigned []string // the witnesses' "<name>+<hash>" with a valid cosignature
	Missing  []string // those without one
}

func (e *WitnessError) Error() string {
	s := fmt.Sprintf("%d valid witness cosignature(s), %d needed", len(e.Cosigned), e.Needed)
	if len(e.Cosigned) > 0 {
		s += "; cosigned by " + strings.Join(e.Cosigned, ", ")
	}
	if len(e.Missing) > 0 {
		s += "; no cosignature from " + strings.Join(e.Missing, ", ")
	}
	return s + " (fetch the checkpoint again once the witnesses have cosigned it, or ask the log's operator why they have not)"
}

// ErrInvalidCosignature: a signature line with a listed witness's name
// and key ID does not verify (or is not canonical base64). Such a
// checkpoint is refused whatever the other lines say.
var ErrInvalidCosignature = errors.New("a cosignature by a listed witness does not verify")

// checkWitnesses enforces the policy on a signed checkpoint whose log
// signature has been verified.
func (p *WitnessPolicy) check(signed []byte) error {
	e := &WitnessError{Needed: p.needed}
	for _, w := range p.witnesses {
		_, err := signednote.Open(signed, w)
		var unverified *note.UnverifiedNoteError
		var line *signednote.LineError
		switch {
		case err == nil:
			e.Cosigned = append(e.Cosigned, w.ID())
		case errors.As(err, &unverified):
			e.Missing = append(e.Missing, w.ID())
		case errors.As(err, &line) && errors.Is(err, signednote.ErrInvalid),
			errors.As(err, new(*note.InvalidSignatureError)):
			return fmt.Errorf("%w: witness %s", ErrInvalidCosignature, w.ID())
		default:
			return err
		}
	}
	if len(e.Cosigned) < p.needed {
		return e
	}
	return nil
}
