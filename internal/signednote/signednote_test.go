package signednote_test

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/decisionledger/ledger/internal/signednote"
	"golang.org/x/mod/sumdb/note"
)

// The note text of a checkpoint; any text does.
const text = "example.com/log\n3\nqG0ACg6N3OIh2Q6fTfpVe4wWCuQ48qrF0wVsiaMwHZc=\n"

type keys struct {
	signer, other note.Signer
	verifier      note.Verifier
}

func newKeys(t testing.TB) keys {
	t.Helper()
	var k keys
	for _, s := range []*note.Signer{&k.signer, &k.other} {
		name := "example.com/log"
		if s == &k.other {
			name = "witness.example.org"
		}
		skey, vkey, err := note.GenerateKey(rand.Reader, name)
		if err != nil {
			t.Fatal(err)
		}
		if *s, err = note.NewSigner(skey); err != nil {
			t.Fatal(err)
		}
		if s == &k.signer {
			if k.verifier, err = note.NewVerifier(vkey); err != nil {
				t.Fatal(err)
			}
		}
	}
	return k
}

// sign returns the note signed by the given signers, in order.
func sign(t testing.TB, signers ...note.Signer) string {
	t.Helper()
	b, err := note.Sign(&note.Note{Text: text}, signers...)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// sigLines splits a signed note into its text block and signature lines.
func sigLines(msg string) (head string, lines []string) {
	i := strings.LastIndex(msg, "\n\n")
	return msg[:i+2], strings.Split(strings.TrimSuffix(msg[i+2:], "\n"), "\n")
}

func join(head string, lines ...string) string {
	return head + strings.Join(lines, "\n") + "\n"
}

// nonCanonical rewrites a signature line's base64 with a padding bit set:
// an Ed25519 signature line holds 68 bytes, so its base64 ends in "x=",
// where x carries four bits of the signature and two zero bits. Setting
// the lowest gives a spelling that decodes to the same bytes.
func nonCanonical(t testing.TB, line string) string {
	t.Helper()
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	if !strings.HasSuffix(line, "=") || strings.HasSuffix(line, "==") {
		t.Fatalf("not a 68-byte signature: %q", line)
	}
	x := strings.IndexByte(alphabet, line[len(line)-2])
	if x&3 != 0 {
		t.Fatalf("canonical base64 with padding bits set: %q", line)
	}
	return line[:len(line)-2] + string(alphabet[x|1]) + "="
}

// badSignature returns a signature line with the same key name and key
// hash as line but another signature.
func badSignature(t testing.TB, line string) string {
	t.Helper()
	i := strings.LastIndexByte(line, ' ')
	sig, err := base64.StdEncoding.DecodeString(line[i+1:])
	if err != nil {
		t.Fatal(err)
	}
	sig[10] ^= 1
	return line[:i+1] + base64.StdEncoding.EncodeToString(sig)
}

// TestOpen runs the vectors: each accepted note is a valid note for
// golang.org/x/mod/sumdb/note too; each refusal says why.
func TestOpen(t *testing.T) {
	k := newKeys(t)
	good := sign(t, k.signer)
	head, lines := sigLines(good)
	withWitness := sign(t, k.signer, k.other)
	_, wlines := sigLines(withWitness)
	is := func(err error) func(error) bool {
		return func(got error) bool { return errors.Is(got, err) }
	}
	isType := func(target any) func(error) bool {
		return func(got error) bool { return errors.As(got, target) }
	}
	for _, v := range []struct {
		name string
		msg  string
		// noteOpens says whether note.Open accepts the note: the
		// vectors it accepts and Open refuses are what this package adds.
		noteOpens bool
		refused   func(error) bool // nil: accepted
	}{
		{name: "good", msg: good, noteOpens: true},
		{name: "good with a witness cosignature", msg: withWitness, noteOpens: true},
		{name: "good, witness first", msg: join(head, wlines[1], wlines[0]), noteOpens: true},
		{name: "the same good signature twice", msg: join(head, lines[0], lines[0]), noteOpens: true},

		{name: "non-canonical base64", msg: join(head, nonCanonical(t, lines[0])), noteOpens: true,
			refused: is(signednote.ErrNonCanonical)},
		{name: "non-canonical base64 in the witness's line", msg: join(head, wlines[0], nonCanonical(t, wlines[1])), noteOpens: true,
			refused: is(signednote.ErrNonCanonical)},
		{name: "good, then non-canonical copy", msg: join(head, lines[0], nonCanonical(t, lines[0])), noteOpens: true,
			refused: is(signednote.ErrNonCanonical)},
		{name: "good, then an invalid signature by the same key", msg: join(head, lines[0], badSignature(t, lines[0])), noteOpens: true,
			refused: is(signednote.ErrInvalid)},
		{name: "good, witness, then an invalid signature by the same key", msg: join(head, wlines[0], wlines[1], badSignature(t, lines[0])), noteOpens: true,
			refused: is(signednote.ErrInvalid)},

		// Refused by note.Open already; kept so that they stay refused.
		{name: "an invalid signature, then good", msg: join(head, badSignature(t, lines[0]), lines[0]),
			refused: isType(new(*note.InvalidSignatureError))},
		{name: "padding inside the base64", msg: join(head, strings.Replace(lines[0], " ", " AA==", 1)),
			refused: func(err error) bool { return err != nil }},
		{name: "padding missing", msg: join(head, strings.TrimSuffix(lines[0], "=")),
			refused: func(err error) bool { return err != nil }},
		{name: "only the witness", msg: join(head, wlines[1]),
			refused: isType(new(*note.UnverifiedNoteError))},
	} {
		t.Run(v.name, func(t *testing.T) {
			_, nerr := note.Open([]byte(v.msg), note.VerifierList(k.verifier))
			if (nerr == nil) != v.noteOpens {
				t.Fatalf("note.Open: %v, want accepted = %v", nerr, v.noteOpens)
			}
			n, err := signednote.Open([]byte(v.msg), k.verifier)
			switch {
			case v.refused == nil && err != nil:
				t.Fatalf("refused: %v", err)
			case v.refused == nil && n.Text != text:
				t.Fatalf("text %q", n.Text)
			case v.refused != nil && err == nil:
				t.Fatal("accepted")
			case v.refused != nil && !v.refused(err):
				t.Fatalf("refused for another reason: %v", err)
			}
			var le *signednote.LineError
			if errors.As(err, &le) && (le.Name != "example.com/log" && le.Name != "witness.example.org" || le.Line < 1) {
				t.Errorf("the error names %+v", le)
			}
		})
	}
}

// FuzzOpen: whatever Open accepts note.Open accepts, with the same text,
// and every signature line of it is canonical base64.
func FuzzOpen(f *testing.F) {
	k := newKeys(f)
	f.Add(sign(f, k.signer))
	f.Add(sign(f, k.signer, k.other))
	f.Fuzz(func(t *testing.T, msg string) {
		n, err := signednote.Open([]byte(msg), k.verifier)
		if err != nil {
			return
		}
		m, err := note.Open([]byte(msg), note.VerifierList(k.verifier))
		if err != nil || m.Text != n.Text {
			t.Fatalf("note.Open: %v", err)
		}
		_, lines := sigLines(msg)
		for _, line := range lines {
			b64 := line[strings.LastIndexByte(line, ' ')+1:]
			sig, err := base64.StdEncoding.DecodeString(b64)
			if err != nil || base64.StdEncoding.EncodeToString(sig) != b64 {
				t.Fatalf("accepted a non-canonical line %q", line)
			}
		}
	})
}

// TestOpenSeveralKeys: with several trusted keys (a log's keys across a
// rotation), a note signed by any one of them opens, and every line by
// any of them must verify: a valid line by the second key followed by an
// invalid one by it is refused, as for the first key.
func TestOpenSeveralKeys(t *testing.T) {
	k := newKeys(t)
	skey, vkey, err := note.GenerateKey(rand.Reader, "example.com/log")
	if err != nil {
		t.Fatal(err)
	}
	next, _ := note.NewSigner(skey)
	nextV, _ := note.NewVerifier(vkey)
	for _, msg := range []string{sign(t, k.signer), sign(t, next), sign(t, k.signer, next), sign(t, next, k.signer, k.other)} {
		if _, err := signednote.Open([]byte(msg), k.verifier, nextV); err != nil {
			t.Errorf("%q: %v", msg, err)
		}
		if _, err := signednote.Open([]byte(msg), nextV, k.verifier); err != nil {
			t.Errorf("%q, keys in the other order: %v", msg, err)
		}
	}
	head, lines := sigLines(sign(t, k.signer, next))
	bad := join(head, lines[0], lines[1], badSignature(t, lines[1]))
	if _, err := note.Open([]byte(bad), note.VerifierList(k.verifier, nextV)); err != nil {
		t.Fatalf("note.Open refuses the vector already: %v", err)
	}
	if _, err := signednote.Open([]byte(bad), k.verifier, nextV); !errors.Is(err, signednote.ErrInvalid) {
		t.Errorf("an invalid second line by the second key: %v", err)
	}
	if _, err := signednote.Open([]byte(sign(t, k.other)), k.verifier, nextV); err == nil {
		t.Error("a note signed by neither trusted key opened")
	}
}
