package verify_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/verify"
	tlog "github.com/transparency-dev/formats/log"
	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"
)

// logKey is one key of a test log, built without the ledger so that a
// test can sign what the ledger never would.
type logKey struct {
	skey, vkey, id string
	signer         note.Signer
	priv           ed25519.PrivateKey
}

func newLogKey(t testing.TB, name string) *logKey {
	t.Helper()
	skey, vkey, err := note.GenerateKey(rand.Reader, name)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := base64.StdEncoding.DecodeString(skey[len(skey)-44:])
	return &logKey{skey: skey, vkey: vkey, signer: signer, priv: ed25519.NewKeyFromSeed(raw[1:]),
		id: fmt.Sprintf("%s+%08x", name, signer.KeyHash())}
}

// rotatedExport writes an export of len(signers) chained entries, entry i
// signed by signers[i], and a checkpoint of them signed by cpSigners.
func rotatedExport(t testing.TB, signers []*logKey, cpSigners ...*logKey) []byte {
	t.Helper()
	name := signers[0].signer.Name()
	c, _ := commit.Params([]byte(`{"to":"a@example.com"}`))
	rng := (&compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}).NewEmptyRange(0)
	var prev commit.Digest
	var entries [][]byte
	for i, k := range signers {
		e := &entry.Entry{Origin: name, Index: uint64(i), Time: time.Date(2026, 11, 1, 0, 0, i, 0, time.UTC),
			Mediator: "mediator-1", Principal: "agent-1", Action: "send_email", Decision: entry.Allow,
			Policies: []string{"mail.allow"}, Params: c, Tiers: sha256.Sum256([]byte("tiers")),
			Attributes: []byte(`{"recipient_domain":"example.com"}`), Prev: prev, KeyID: k.id}
		m, err := e.SignedMessage()
		if err != nil {
			t.Fatal(err)
		}
		e.Signature = ed25519.Sign(k.priv, m)
		b, err := e.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		prev = sha256.Sum256(m)
		entries = append(entries, b)
		rng.Append(rfc6962.DefaultHasher.HashLeaf(b), nil)
	}
	root, _ := rng.GetRootHash(nil)
	var ns []note.Signer
	for _, k := range cpSigners {
		ns = append(ns, k.signer)
	}
	cp, err := note.Sign(&note.Note{Text: string(tlog.Checkpoint{Origin: name, Size: uint64(len(entries)), Hash: root}.Marshal())}, ns...)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	frame := func(tag string, p []byte) { fmt.Fprintf(&b, "%s %d\n%s\n", tag, len(p), p) }
	b.WriteString(verify.ExportHeader)
	frame("checkpoint", cp)
	frame("range", []byte("0 "+strconv.Itoa(len(entries))))
	frame("left", nil)
	frame("right", nil)
	for _, e := range entries {
		frame("entry", e)
	}
	frame("end", nil)
	return b.Bytes()
}

func keys(t testing.TB, ks ...*logKey) *verify.Key {
	t.Helper()
	var vkeys []string
	for _, k := range ks {
		vkeys = append(vkeys, k.vkey)
	}
	key, err := verify.ParseKeys(vkeys...)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func repeat(k *logKey, n int) []*logKey {
	s := make([]*logKey, n)
	for i := range s {
		s[i] = k
	}
	return s
}

// TestKeySet: an export across a rotation (entries 0-9 by A, 10-19 by B,
// the checkpoint by B) verifies with the set {A, B} in either order, and
// with one key fails at the first entry of the other, naming its key id.
func TestKeySet(t *testing.T) {
	const origin = "ledger.example.com/keys"
	a, b := newLogKey(t, origin), newLogKey(t, origin)
	export := rotatedExport(t, append(repeat(a, 10), repeat(b, 10)...), b)
	for _, set := range [][]*logKey{{a, b}, {b, a}, {a, b, a}} {
		if _, err := verify.VerifyExport(bytes.NewReader(export), keys(t, set...), verify.ExportOptions{}); err != nil {
			t.Errorf("verified with both keys: %v", err)
		}
	}
	// Only B: the checkpoint opens, entry 0 names A.
	_, err := verify.VerifyExport(bytes.NewReader(export), keys(t, b), verify.ExportOptions{})
	var fail *verify.Failure
	var uk *verify.UntrustedKeyError
	if !errors.As(err, &fail) || fail.Index != 0 || fail.Check != verify.CheckEntryKey || !errors.As(err, &uk) || uk.KeyID != a.id ||
		!strings.Contains(err.Error(), "entry 0: key: signed by key "+a.id+", which is not trusted") || !errors.Is(err, entry.ErrKeyID) {
		t.Errorf("only the new key: %v", err)
	}
	// Only A: the checkpoint, signed by B alone, is refused naming B.
	_, err = verify.VerifyExport(bytes.NewReader(export), keys(t, a), verify.ExportOptions{})
	var us *verify.UnknownSignerError
	if !errors.As(err, &us) || us.Trusted != a.id || len(us.Signers) != 1 || us.Signers[0] != b.id {
		t.Errorf("only the old key, checkpoint by the new: %v", err)
	}
	// Only A, a checkpoint signed by both (the rotation's): entry 10 names B.
	both := rotatedExport(t, append(repeat(a, 10), repeat(b, 10)...), a, b)
	_, err = verify.VerifyExport(bytes.NewReader(both), keys(t, a), verify.ExportOptions{})
	if !errors.As(err, &fail) || fail.Index != 10 || !errors.As(err, &uk) || uk.KeyID != b.id {
		t.Errorf("only the old key: %v", err)
	}
	// --all reports every entry of the untrusted key.
	_, err = verify.VerifyExport(bytes.NewReader(both), keys(t, a), verify.ExportOptions{All: true})
	if n := strings.Count(err.Error(), "which is not trusted"); n != 10 {
		t.Errorf("--all: %d untrusted entries reported, want 10: %v", n, err)
	}
	// A third key of the same name is not trusted either.
	c := newLogKey(t, origin)
	other := rotatedExport(t, append(repeat(a, 10), repeat(c, 10)...), a, b)
	_, err = verify.VerifyExport(bytes.NewReader(other), keys(t, a, b), verify.ExportOptions{})
	if !errors.As(err, &uk) || uk.KeyID != c.id || !errors.As(err, &fail) || fail.Index != 10 {
		t.Errorf("a third key: %v", err)
	}
}

// TestKeySetSwappedKey: a verifier key with one byte of its public key
// changed is refused (its key hash no longer matches); an entry whose
// key_id has one byte changed names a key nobody trusts.
func TestKeySetSwappedKey(t *testing.T) {
	const origin = "ledger.example.com/keys"
	a, b := newLogKey(t, origin), newLogKey(t, origin)
	parts := strings.SplitN(b.vkey, "+", 3) // the base64 may hold '+'
	raw, _ := base64.StdEncoding.DecodeString(parts[2])
	raw[7] ^= 1
	swapped := parts[0] + "+" + parts[1] + "+" + base64.StdEncoding.EncodeToString(raw)
	if _, err := verify.ParseKeys(a.vkey, swapped); err == nil {
		t.Error("a verifier key with a changed byte accepted")
	}
	if _, err := verify.ParseTrustFile([]byte(a.vkey + "\n" + swapped + "\n")); err == nil || !strings.HasPrefix(err.Error(), "line 2: ") {
		t.Errorf("trust file with a changed key byte: %v", err)
	}
	export := rotatedExport(t, append(repeat(a, 5), repeat(b, 5)...), a, b)
	// Entry 7's key_id with its last hash digit changed.
	at := bytes.Index(export, []byte(`"index":7,`))
	k := at + bytes.Index(export[at:], []byte(b.id)) + len(b.id) - 1
	// Another lower-case hex digit, whatever this one was (^1 would turn
	// 'a' and 'f' into non-hex characters, a parse error instead).
	if export[k] == '0' {
		export[k] = '1'
	} else {
		export[k] = '0'
	}
	_, err := verify.VerifyExport(bytes.NewReader(export), keys(t, a, b), verify.ExportOptions{})
	var fail *verify.Failure
	var uk *verify.UntrustedKeyError
	if !errors.As(err, &fail) || fail.Index != 7 || fail.Check != verify.CheckEntryKey || !errors.As(err, &uk) {
		t.Errorf("entry with a changed key_id byte: %v", err)
	}
}

// TestRotationCheckpointBothSignaturesChecked: a checkpoint signed by
// both keys is refused if either signature is bad, although the other
// one verifies.
func TestRotationCheckpointBothSignaturesChecked(t *testing.T) {
	const origin = "ledger.example.com/keys"
	a, b := newLogKey(t, origin), newLogKey(t, origin)
	export := rotatedExport(t, repeat(a, 3), a, b)
	key := keys(t, a, b)
	cp, err := key.Checkpoint(checkpointOf(t, export))
	if err != nil || cp.Size != 3 {
		t.Fatalf("rotation checkpoint: %v", err)
	}
	for line := range 2 {
		bad := respell(t, checkpointOf(t, export), func(lines []string) []string {
			lines[line] = badSignature(t, lines[line])
			return lines
		})
		_, err := key.Checkpoint(bad)
		var fail *verify.Failure
		if !errors.As(err, &fail) || fail.Check != verify.CheckCheckpointSignature {
			t.Errorf("signature line %d bad: %v", line+1, err)
		}
	}
}

func checkpointOf(t testing.TB, export []byte) []byte {
	t.Helper()
	rest, _ := bytes.CutPrefix(export, []byte(verify.ExportHeader))
	header, rest, _ := bytes.Cut(rest, []byte("\n"))
	var n int
	if _, err := fmt.Sscanf(string(header), "checkpoint %d", &n); err != nil {
		t.Fatal(err)
	}
	return rest[:n]
}

func TestNewKeySet(t *testing.T) {
	a, b := newLogKey(t, "ledger.example.com/keys"), newLogKey(t, "ledger.example.com/keys")
	other := newLogKey(t, "ledger.example.org/other")
	if _, err := verify.ParseKeys(a.vkey, other.vkey); err == nil || !strings.Contains(err.Error(), "one log") {
		t.Errorf("keys of two origins: %v", err)
	}
	if _, err := verify.ParseKeys(); err == nil {
		t.Error("empty set accepted")
	}
	set := keys(t, a, b, a)
	if ids := set.IDs(); len(ids) != 2 || ids[0] != a.id || ids[1] != b.id {
		t.Errorf("IDs %v", ids)
	}
	one := keys(t, a)
	if ids := one.IDs(); len(ids) != 1 || one.Origin() != "ledger.example.com/keys" {
		t.Errorf("one key: %v", ids)
	}
}

func TestParseTrustFile(t *testing.T) {
	a, b := newLogKey(t, "ledger.example.com/keys"), newLogKey(t, "ledger.example.com/keys")
	got, err := verify.ParseTrustFile([]byte("# ledger.example.com/keys, rotated 2026-11-01\n\n  " + a.vkey + "  \n# new key\n" + b.vkey))
	if err != nil || len(got) != 2 || got[0] != a.vkey || got[1] != b.vkey {
		t.Fatalf("%q, %v", got, err)
	}
	for _, bad := range []string{"", "# only a comment\n", a.vkey + "\nnot-a-key\n", a.vkey + " " + b.vkey} {
		if _, err := verify.ParseTrustFile([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if _, err := verify.ParseTrustFile([]byte(a.vkey + "\nx\n")); err == nil || !strings.HasPrefix(err.Error(), "line 2: ") {
		t.Errorf("bad line not named: %v", err)
	}
}

// TestKeySetOldKeyAfterRotation: an entry by the old key after the new
// key's first entry is refused, although both keys are trusted and its
// signature verifies; so is a return to the old key's chain later on.
func TestKeySetOldKeyAfterRotation(t *testing.T) {
	const origin = "ledger.example.com/keys"
	a, b := newLogKey(t, origin), newLogKey(t, origin)
	signers := append(repeat(a, 5), repeat(b, 5)...)
	signers[7] = a
	export := rotatedExport(t, signers, b)
	_, err := verify.VerifyExport(bytes.NewReader(export), keys(t, a, b), verify.ExportOptions{All: true})
	var fail *verify.Failure
	if !errors.Is(err, verify.ErrRetiredKey) || !errors.As(err, &fail) || fail.Index != 7 || fail.Check != verify.CheckEntryKey ||
		!strings.Contains(err.Error(), "entry 7: key: ") || !strings.Contains(err.Error(), "signed entries up to 4") {
		t.Errorf("old key after the new one: %v", err)
	}
	if n := strings.Count(err.Error(), "must never sign again"); n != 1 {
		t.Errorf("%d entries refused, want 1 (entry 7; entry 8, by the new key, follows): %v", n, err)
	}
	// Three keys in order are fine; back to the first is not.
	c := newLogKey(t, origin)
	if _, err := verify.VerifyExport(bytes.NewReader(rotatedExport(t, append(append(repeat(a, 3), repeat(b, 3)...), repeat(c, 3)...), c)), keys(t, a, b, c), verify.ExportOptions{}); err != nil {
		t.Errorf("a, b, c: %v", err)
	}
	_, err = verify.VerifyExport(bytes.NewReader(rotatedExport(t, append(append(repeat(a, 3), repeat(b, 3)...), repeat(a, 1)...), b)), keys(t, a, b), verify.ExportOptions{})
	if !errors.Is(err, verify.ErrRetiredKey) {
		t.Errorf("a, b, a: %v", err)
	}
}
