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

// trustFile is a trust file's text: each line a key's verifier key, with
// " retired-at N" for a retired one (N >= 0).
func trustFile(lines ...any) []byte {
	var b strings.Builder
	for i := 0; i < len(lines); i++ {
		k := lines[i].(*logKey)
		b.WriteString(k.vkey)
		if i+1 < len(lines) {
			if n, ok := lines[i+1].(int); ok {
				fmt.Fprintf(&b, " retired-at %d", n)
				i++
			}
		}
		b.WriteString("\n")
	}
	return []byte(b.String())
}

// TestRetiredKey: a key retired at tree size 10 (a rotation checkpoint
// for size 10 handed over from it) signs no entry from index 10 on and no
// checkpoint of a larger tree alone, in any range: a stolen old key
// cannot continue the log in a history of its own, although within one
// range it never hands over to another key.
func TestRetiredKey(t *testing.T) {
	const origin = "ledger.example.com/keys"
	a, b := newLogKey(t, origin), newLogKey(t, origin)
	retired, err := verify.ParseTrust(trustFile(a, 10, b))
	if err != nil {
		t.Fatal(err)
	}
	if at, ok := retired.RetiredAt(a.id); !ok || at != 10 {
		t.Fatalf("RetiredAt(a) = %d, %v", at, ok)
	}
	if _, ok := retired.RetiredAt(b.id); ok {
		t.Fatal("b retired")
	}
	honest := rotatedExport(t, append(repeat(a, 10), repeat(b, 10)...), b)
	if _, err := verify.VerifyExport(bytes.NewReader(honest), retired, verify.ExportOptions{}); err != nil {
		t.Errorf("honest rotated log: %v", err)
	}
	// The pre-rotation checkpoint of size 10, signed by a alone, is of the
	// rotation checkpoint's tree: still valid.
	if _, err := verify.VerifyExport(bytes.NewReader(rotatedExport(t, repeat(a, 10), a)), retired, verify.ExportOptions{}); err != nil {
		t.Errorf("a's checkpoint of size 10: %v", err)
	}

	// The forgery: entries from 10 on re-signed by a, a checkpoint by a
	// alone. The key set without the retirement accepts it.
	forged := rotatedExport(t, repeat(a, 20), a)
	if _, err := verify.VerifyExport(bytes.NewReader(forged), keys(t, a, b), verify.ExportOptions{}); err != nil {
		t.Fatalf("without the retirement the forgery is accepted, as it was before: %v", err)
	}
	_, err = verify.VerifyExport(bytes.NewReader(forged), retired, verify.ExportOptions{})
	var fail *verify.Failure
	var re *verify.RetiredKeyError
	if !errors.As(err, &fail) || fail.Index != verify.NoIndex || fail.Check != verify.CheckCheckpointSignature ||
		!errors.As(err, &re) || *re != (verify.RetiredKeyError{KeyID: a.id, RetiredAt: 10, Index: verify.NoIndex, Size: 20}) ||
		!errors.Is(err, verify.ErrRetiredKey) ||
		err.Error() != "checkpoint: checkpoint-signature: the checkpoint of tree size 20 is signed only by key "+a.id+", retired at tree size 10: a retired key signs no checkpoint of a larger tree" {
		t.Errorf("forged continuation: %v", err)
	}
	if strings.Contains(err.Error(), a.vkey[len(a.id)+1:]) {
		t.Errorf("the error holds key material: %v", err)
	}
	// Entries by a from 10 on, under a checkpoint b signed: each refused.
	_, err = verify.VerifyExport(bytes.NewReader(rotatedExport(t, repeat(a, 20), b)), retired, verify.ExportOptions{All: true})
	if !errors.As(err, &fail) || fail.Index != 10 || fail.Check != verify.CheckEntryKey || !errors.As(err, &re) || re.Index != 10 || re.KeyID != a.id ||
		!strings.Contains(err.Error(), "entry 10: key: signed by key "+a.id+", retired at tree size 10: a retired key signs no entry from index 10 on") ||
		strings.Count(err.Error(), "retired at tree size 10") != 10 {
		t.Errorf("entries by the retired key: %v", err)
	}
	// One entry, as a client checks a receipt.
	e, _ := entry.Parse(entryOf(t, rotatedExport(t, repeat(a, 12), b), 11))
	if err := retired.VerifyEntry(e); !errors.As(err, &re) || re.Index != 11 || !isCheck(err, verify.CheckEntryKey) {
		t.Errorf("VerifyEntry of entry 11 by the retired key: %v", err)
	}
	e, _ = entry.Parse(entryOf(t, honest, 9))
	if err := retired.VerifyEntry(e); err != nil {
		t.Errorf("VerifyEntry of entry 9: %v", err)
	}

	// Retired at 0: a key of an empty log's rotation signs no entry.
	zero, err := verify.ParseTrust(trustFile(a, 0, b))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := verify.VerifyExport(bytes.NewReader(rotatedExport(t, repeat(b, 3), b)), zero, verify.ExportOptions{}); err != nil {
		t.Errorf("retired at 0, entries by b: %v", err)
	}
	if _, err := verify.VerifyExport(bytes.NewReader(rotatedExport(t, repeat(a, 3), a)), zero, verify.ExportOptions{}); !errors.As(err, &re) {
		t.Errorf("retired at 0, a's checkpoint of size 3: %v", err)
	}
	// A checkpoint signed by the retired key and a key in service opens.
	if _, err := verify.VerifyExport(bytes.NewReader(rotatedExport(t, append(repeat(a, 10), repeat(b, 5)...), a, b)), retired, verify.ExportOptions{}); err != nil {
		t.Errorf("checkpoint by both keys: %v", err)
	}
}

// entryOf returns entry i of an export written by rotatedExport.
func entryOf(t testing.TB, export []byte, i int) []byte {
	t.Helper()
	rest := export[len(verify.ExportHeader):]
	for n := 0; ; n++ {
		header, after, _ := bytes.Cut(rest, []byte("\n"))
		var tag string
		var size int
		if _, err := fmt.Sscanf(string(header), "%s %d", &tag, &size); err != nil {
			t.Fatal(err)
		}
		if tag == "entry" {
			if i == 0 {
				return after[:size]
			}
			i--
		}
		rest = after[size+1:]
	}
}

// TestParseTrust: the retired-at syntax, strictly; a file without it
// reads as ParseTrustFile read it, which refuses one with it rather than
// drop the retirement; retirements combine across files at the smallest
// size.
func TestParseTrust(t *testing.T) {
	const origin = "ledger.example.com/keys"
	a, b := newLogKey(t, origin), newLogKey(t, origin)
	old := []byte("# " + origin + ", rotated at tree size 1000\n\n  " + a.vkey + "  \n" + b.vkey + "\n")
	vkeys, err := verify.ParseTrustFile(old)
	if err != nil || len(vkeys) != 2 || vkeys[0] != a.vkey || vkeys[1] != b.vkey {
		t.Fatalf("ParseTrustFile of a file without retired-at: %q %v", vkeys, err)
	}
	set, err := verify.ParseTrust(old)
	if err != nil || strings.Join(set.IDs(), " ") != a.id+" "+b.id {
		t.Fatalf("ParseTrust of a file without retired-at: %v %v", set, err)
	}
	for _, id := range []string{a.id, b.id} {
		if _, ok := set.RetiredAt(id); ok {
			t.Errorf("%s retired", id)
		}
	}
	with := []byte("# rotated\n" + a.vkey + " \t retired-at 1000 \n" + b.vkey + "\n")
	if set, err = verify.ParseTrust(with); err != nil {
		t.Fatal(err)
	}
	if at, ok := set.RetiredAt(a.id); !ok || at != 1000 {
		t.Errorf("RetiredAt %d %v", at, ok)
	}
	if _, err := verify.ParseTrustFile(with); !errors.Is(err, verify.ErrTrustFileRetirement) || !strings.HasPrefix(err.Error(), "line 2: ") {
		t.Errorf("ParseTrustFile of a file with retired-at: %v", err)
	}
	for _, c := range []struct{ text, err string }{
		{a.vkey + " retired-at\n", "line 1: want a verifier key"},
		{a.vkey + " retired-at 10 11\n", "line 1: want a verifier key"},
		{a.vkey + " retired-since 10\n", "line 1: want a verifier key"},
		{a.vkey + " " + b.vkey + "\n", "line 1: want a verifier key"},
		{b.vkey + "\n" + a.vkey + " retired-at 010\n", "line 2: retired-at: want a tree size in decimal"},
		{a.vkey + " retired-at -1\n", "line 1: retired-at: want a tree size"},
		{a.vkey + " retired-at +1\n", "line 1: retired-at: want a tree size"},
		{a.vkey + " retired-at 18446744073709551616\n", "line 1: retired-at: want a tree size"},
		{"not-a-key retired-at 10\n", "line 1: verify: verifier key: "},
		{a.vkey + " retired-at 10\n" + a.vkey + " retired-at 11\n", "line 2: key " + a.id + " again, retired otherwise than on line 1"},
		{a.vkey + " retired-at 10\n" + a.vkey + "\n", "line 2: key " + a.id + " again"},
	} {
		if _, err := verify.ParseTrust([]byte(c.text)); err == nil || !strings.HasPrefix(err.Error(), c.err) {
			t.Errorf("%q: %v, want %q", c.text, err, c.err)
		}
	}
	if _, err := verify.ParseTrust([]byte(a.vkey + " retired-at 10\n" + a.vkey + " retired-at 10\n")); err != nil {
		t.Errorf("a key twice with the same retirement: %v", err)
	}
	// Two files: the smallest retirement holds.
	f1, _ := verify.ParseTrust(trustFile(a, 10, b))
	f2, _ := verify.ParseTrust(trustFile(a, 5))
	both, err := verify.NewKeySet(f1, f2)
	if err != nil {
		t.Fatal(err)
	}
	if at, _ := both.RetiredAt(a.id); at != 5 {
		t.Errorf("combined: a retired at %d, want 5", at)
	}
	one, err := verify.NewKeySet(f2, keys(t, a))
	if at, ok := one.RetiredAt(a.id); err != nil || !ok || at != 5 {
		t.Errorf("one key, retired in one of two: %d %v %v", at, ok, err)
	}
	if _, err := set.Retire(newLogKey(t, origin).id, 3); err == nil {
		t.Error("retiring a key not in the set")
	}
	if r, err := both.Retire(a.id, 7); err != nil || func() uint64 { at, _ := r.RetiredAt(a.id); return at }() != 5 {
		t.Errorf("Retire at a larger size moved the retirement: %v", err)
	}
}

// TestRangeRotations: a range that follows another names the key the
// range's entries replaced, at the index the new key took over.
func TestRangeRotations(t *testing.T) {
	const origin = "ledger.example.com/keys"
	a, b := newLogKey(t, origin), newLogKey(t, origin)
	export := rotatedExport(t, append(repeat(a, 10), repeat(b, 10)...), b)
	key := keys(t, a, b)
	cp, err := key.Checkpoint(checkpointOf(t, export))
	if err != nil {
		t.Fatal(err)
	}
	run := func(start, end int, follow string) *verify.Range {
		r, err := verify.NewRange(key, cp, uint64(start), uint64(end), nil, false)
		if err != nil {
			t.Fatal(err)
		}
		if follow != "" {
			r.FollowKey(follow)
		}
		for i := start; i < end; i++ {
			if err := r.Add(entryOf(t, export, i)); err != nil {
				t.Fatalf("entry %d: %v", i, err)
			}
		}
		return r
	}
	if r := run(0, 20, ""); fmt.Sprint(r.Rotations()) != fmt.Sprintf("map[%s:10]", a.id) || r.LastKeyID() != b.id {
		t.Errorf("whole range: %v %s", r.Rotations(), r.LastKeyID())
	}
	if r := run(10, 20, a.id); fmt.Sprint(r.Rotations()) != fmt.Sprintf("map[%s:10]", a.id) || r.LastKeyID() != b.id {
		t.Errorf("from the rotation, following a: %v %s", r.Rotations(), r.LastKeyID())
	}
	if r := run(10, 20, ""); len(r.Rotations()) != 0 || r.LastKeyID() != b.id {
		t.Errorf("from the rotation, not following: %v %s", r.Rotations(), r.LastKeyID())
	}
	if r := run(12, 12, b.id); len(r.Rotations()) != 0 || r.LastKeyID() != b.id {
		t.Errorf("empty range: %v %s", r.Rotations(), r.LastKeyID())
	}
	// Following a, whose first entry is by b: a may not sign again in
	// the range.
	r, _ := verify.NewRange(key, cp, 10, 12, nil, true)
	r.FollowKey(a.id)
	r.Add(entryOf(t, export, 10))
	r.Add(entryOf(t, rotatedExport(t, repeat(a, 12), b), 11))
	if err := r.Finish(nil, nil); !errors.Is(err, verify.ErrRetiredKey) || !strings.Contains(err.Error(), "entry 11: key: ") {
		t.Errorf("a again after b took over from it: %v", err)
	}
}
