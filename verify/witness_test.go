package verify_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"filippo.io/torchwood"
	"github.com/decisionledger/ledger/verify"
	"github.com/transparency-dev/formats/log"
	"golang.org/x/mod/sumdb/note"
)

// witnessed is a log key, a checkpoint it signed and three witnesses
// (torchwood's cosignature/v1 signers, the reference implementation
// litewitness uses) with their parsed verifier keys.
type witnessed struct {
	vkey    string
	key     *verify.Key
	log     note.Signer
	text    string
	signers []*torchwood.CosignatureSigner
	keys    []*verify.WitnessKey
}

func newWitnessed(t testing.TB) *witnessed {
	t.Helper()
	skey, vkey, err := note.GenerateKey(rand.Reader, "ledger.example.com/log")
	if err != nil {
		t.Fatal(err)
	}
	w := &witnessed{}
	if w.log, err = note.NewSigner(skey); err != nil {
		t.Fatal(err)
	}
	w.vkey = vkey
	if w.key, err = verify.ParseKey(vkey); err != nil {
		t.Fatal(err)
	}
	w.text = string(log.Checkpoint{Origin: "ledger.example.com/log", Size: 3, Hash: make([]byte, 32)}.Marshal())
	for _, name := range []string{"witness-a.example.com", "witness-b.example.org", "witness-c.example.net"} {
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		s, err := torchwood.NewCosignatureSigner(name, priv)
		if err != nil {
			t.Fatal(err)
		}
		k, err := verify.ParseWitnessKey(s.Verifier().String())
		if err != nil {
			t.Fatal(err)
		}
		if k.String() != s.Verifier().String() || k.KeyHash() != s.KeyHash() || k.Name() != s.Name() {
			t.Fatalf("parsed witness key %s differs from torchwood's %s", k, s.Verifier())
		}
		w.signers = append(w.signers, s)
		w.keys = append(w.keys, k)
	}
	return w
}

// sign signs the checkpoint with the log key, then cosigns it with the
// witnesses given by index.
func (w *witnessed) sign(t testing.TB, witnesses ...int) []byte {
	t.Helper()
	signers := []note.Signer{w.log}
	for _, i := range witnesses {
		signers = append(signers, w.signers[i])
	}
	b, err := note.Sign(&note.Note{Text: w.text}, signers...)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (w *witnessed) policy(t testing.TB, needed int, witnesses ...int) *verify.Key {
	t.Helper()
	var ks []*verify.WitnessKey
	for _, i := range witnesses {
		ks = append(ks, w.keys[i])
	}
	p, err := verify.NewWitnessPolicy(ks, needed)
	if err != nil {
		t.Fatal(err)
	}
	return w.key.WithWitnesses(p)
}

// TestCosignatureInterop: a checkpoint cosigned by torchwood's signer
// verifies with our verifier, with torchwood's own verifier through
// x/mod/sumdb/note, and with x/mod/sumdb/note alone for the log's
// signature, the cosignature lines left unverified.
func TestCosignatureInterop(t *testing.T) {
	w := newWitnessed(t)
	signed := w.sign(t, 0, 1)

	if _, err := w.policy(t, 2, 0, 1).Checkpoint(signed); err != nil {
		t.Fatalf("our verifier refused torchwood's cosignatures: %v", err)
	}
	n, err := note.Open(signed, note.VerifierList(w.signers[0].Verifier(), w.signers[1].Verifier()))
	if err != nil || len(n.Sigs) != 2 {
		t.Fatalf("torchwood's verifier: %v", err)
	}
	logv, err := note.NewVerifier(w.vkey)
	if err != nil {
		t.Fatal(err)
	}
	n, err = note.Open(signed, note.VerifierList(logv))
	if err != nil || len(n.Sigs) != 1 || len(n.UnverifiedSigs) != 2 {
		t.Fatalf("x/mod/sumdb/note: %v; %d verified, %d unverified signatures", err, len(n.Sigs), len(n.UnverifiedSigs))
	}
	// Our verifier, given to note.Open, agrees with torchwood's on the
	// very same lines.
	ours, err := note.Open(signed, note.VerifierList(w.keys[0], w.keys[1]))
	if err != nil || len(ours.Sigs) != 2 {
		t.Fatalf("our verifier through note.Open: %v", err)
	}
	// x/mod/sumdb/note refuses cosignature/v1 verifier keys: that is why
	// WitnessKey exists.
	if _, err := note.NewVerifier(w.keys[0].String()); err == nil {
		t.Fatal("x/mod/sumdb/note now parses cosignature/v1 keys: use it instead of WitnessKey")
	}
	// The timestamp is part of the signed message: torchwood reads the
	// same one we sign over.
	if ts, err := torchwood.CosignatureTimestamp(ours.Sigs[0]); err != nil || ts <= 0 {
		t.Fatalf("cosignature timestamp %d: %v", ts, err)
	}
}

func TestWitnessPolicy(t *testing.T) {
	w := newWitnessed(t)
	for _, tc := range []struct {
		name      string
		cosigners []int
		needed    int
		listed    []int
		wantErr   string // empty: accepted
	}{
		{"both of two", []int{0, 1}, 2, []int{0, 1}, ""},
		{"two of three", []int{0, 2}, 2, []int{0, 1, 2}, ""},
		{"none needed", nil, 0, []int{0, 1}, ""},
		{"one of two needed, one given", []int{1}, 1, []int{0, 1}, ""},
		{"one missing", []int{0}, 2, []int{0, 1},
			"1 valid witness cosignature(s), 2 needed; cosigned by witness-a.example.com+"},
		{"none", nil, 1, []int{0, 1}, "0 valid witness cosignature(s), 1 needed; no cosignature from witness-a.example.com+"},
		{"unlisted witness does not count", []int{0, 2}, 2, []int{0, 1}, "no cosignature from witness-b.example.org+"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := w.policy(t, tc.needed, tc.listed...).Checkpoint(w.sign(t, tc.cosigners...))
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var we *verify.WitnessError
			var f *verify.Failure
			if !errors.As(err, &we) || !errors.As(err, &f) || f.Check != verify.CheckWitnesses {
				t.Fatalf("got %v, want a WitnessError in a %s failure", err, verify.CheckWitnesses)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("got %q, want it to contain %q", err, tc.wantErr)
			}
		})
	}
}

// TestCosignatureTampering: every altered cosignature is refused, not
// just left uncounted: the checkpoint, the timestamp or the signature
// changed, a line repeated with a bad signature, a cosignature moved to
// another witness's name.
func TestCosignatureTampering(t *testing.T) {
	w := newWitnessed(t)
	signed := w.sign(t, 0, 1)
	key := w.policy(t, 1, 0, 1)
	if _, err := key.Checkpoint(signed); err != nil {
		t.Fatal(err)
	}
	flip := func(byteIndex int) func([]string) []string {
		return func(lines []string) []string {
			i := strings.LastIndexByte(lines[1], ' ')
			sig, _ := base64.StdEncoding.DecodeString(lines[1][i+1:])
			sig[byteIndex] ^= 1
			lines[1] = lines[1][:i+1] + base64.StdEncoding.EncodeToString(sig)
			return lines
		}
	}
	for name, edit := range map[string]func([]string) []string{
		"timestamp":                     flip(4 + 7),
		"signature":                     flip(4 + 8 + 10),
		"second line invalid":           func(l []string) []string { return append(l, badSignature(t, l[1])) },
		"second witness's line invalid": func(l []string) []string { return append(l, badSignature(t, l[2])) },
	} {
		t.Run(name, func(t *testing.T) {
			_, err := key.Checkpoint(respell(t, signed, edit))
			if !errors.Is(err, verify.ErrInvalidCosignature) {
				t.Fatalf("got %v, want ErrInvalidCosignature", err)
			}
		})
	}
	t.Run("non-canonical", func(t *testing.T) {
		// A cosignature is 4+8+64 = 76 bytes: its base64 ends in "x==",
		// x carrying 2 bits and 4 zero padding bits. Setting one of
		// those spells the same bytes another way.
		_, err := key.Checkpoint(respell(t, signed, func(l []string) []string {
			const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
			s := l[1]
			x := strings.IndexByte(alphabet, s[len(s)-3])
			if !strings.HasSuffix(s, "==") || x&15 != 0 {
				t.Fatalf("not a canonical 76-byte signature line: %q", s)
			}
			l[1] = s[:len(s)-3] + string(alphabet[x|1]) + "=="
			return l
		}))
		if !errors.Is(err, verify.ErrNonCanonicalSignature) {
			t.Fatalf("got %v, want ErrNonCanonicalSignature", err)
		}
	})
	t.Run("text changed", func(t *testing.T) {
		// Re-sign with the log key over other text, keeping the
		// cosignature lines: the log's signature verifies, the
		// cosignatures do not.
		other := *w
		other.text = strings.Replace(w.text, "\n3\n", "\n4\n", 1)
		resigned := other.sign(t)
		_, cos := splitSigs(signed)
		head, logLine := splitSigs(resigned)
		_, err := key.Checkpoint([]byte(head + logLine[0] + "\n" + strings.Join(cos[1:], "\n") + "\n"))
		if !errors.Is(err, verify.ErrInvalidCosignature) {
			t.Fatalf("got %v, want ErrInvalidCosignature", err)
		}
	})
	t.Run("renamed", func(t *testing.T) {
		// Witness a's line, relabelled with b's name: b's key hash does
		// not match the line's, so it is no cosignature by b, and a's
		// is gone.
		_, err := w.policy(t, 2, 0, 1).Checkpoint(respell(t, signed, func(l []string) []string {
			return []string{l[0], strings.Replace(l[1], "witness-a.example.com", "witness-b.example.org", 1)}
		}))
		var we *verify.WitnessError
		if !errors.As(err, &we) || len(we.Cosigned) != 0 {
			t.Fatalf("got %v, want no cosignature counted", err)
		}
	})
}

func splitSigs(signed []byte) (head string, lines []string) {
	i := strings.LastIndex(string(signed), "\n\n")
	return string(signed[:i+2]), strings.Split(strings.TrimSuffix(string(signed[i+2:]), "\n"), "\n")
}

func TestParseWitnessKey(t *testing.T) {
	w := newWitnessed(t)
	good := w.keys[0].String()
	name, rest, _ := strings.Cut(good, "+")
	hash, key64, _ := strings.Cut(rest, "+")
	raw, _ := base64.StdEncoding.DecodeString(key64)
	retype := func(b byte) string {
		r := append([]byte{b}, raw[1:]...)
		return name + "+" + hash + "+" + base64.StdEncoding.EncodeToString(r)
	}
	for _, bad := range []string{
		"",
		"witness-a.example.com",
		name + "+" + hash,
		name + "+00000000+" + key64,          // wrong key hash
		"other.example.com+" + rest,          // the hash covers the name
		retype(1),                            // a log key type
		retype(6),                            // ML-DSA-44, not supported
		name + "+" + hash + "+" + key64[:20], // short key
		w.vkey,
	} {
		if _, err := verify.ParseWitnessKey(bad); err == nil {
			t.Errorf("ParseWitnessKey(%q) accepted", bad)
		}
	}
	if _, err := verify.NewWitnessPolicy(w.keys[:2], 3); err == nil {
		t.Error("a threshold above the number of witnesses was accepted")
	}
	same, err := verify.ParseWitnessKey(w.keys[0].String())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := verify.NewWitnessPolicy([]*verify.WitnessKey{w.keys[0], same}, 2); err == nil {
		t.Error("the same witness key listed twice was accepted")
	}
}
