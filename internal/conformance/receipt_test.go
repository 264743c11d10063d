package conformance

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/verify"
	"github.com/transparency-dev/formats/log"
	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/merkle/testonly"
	"golang.org/x/mod/sumdb/note"
)

// receiptCase is one case of receipt.json.
type receiptCase struct {
	Name       string        `json:"name"`
	Note       string        `json:"note,omitempty"`
	Key        string        `json:"verifier_key"`
	Entry      []byte        `json:"entry_base64"`
	Checkpoint []byte        `json:"checkpoint_base64,omitempty"`
	Inclusion  *inclusion    `json:"inclusion,omitempty"`
	Expect     receiptExpect `json:"expect"`
}

type inclusion struct {
	Index    uint64   `json:"index"`
	TreeSize uint64   `json:"tree_size"`
	Hashes   [][]byte `json:"hashes_base64"`
}

type receiptExpect struct {
	Valid bool   `json:"valid"`
	Check string `json:"check,omitempty"`
}

// receiptResult verifies a receipt with the Go reference. An entry alone
// is checked as Key.VerifyEntry does after entry.Parse; with a checkpoint
// and an inclusion proof, as verify.VerifyTlogProof checks the tlog-proof
// file holding them, once the proof's tree size is the checkpoint's.
func receiptResult(t *testing.T, c *receiptCase) receiptExpect {
	t.Helper()
	key, err := verify.ParseKey(c.Key)
	if err != nil {
		t.Fatalf("%s: %v", c.Name, err)
	}
	failed := func(err error) receiptExpect {
		var f *verify.Failure
		if !errors.As(err, &f) {
			t.Fatalf("%s: %v is not a *verify.Failure", c.Name, err)
		}
		return receiptExpect{Check: string(f.Check)}
	}
	if c.Checkpoint == nil {
		if c.Inclusion != nil {
			t.Fatalf("%s: an inclusion proof needs a checkpoint", c.Name)
		}
		e, err := entry.Parse(c.Entry)
		if err != nil {
			return receiptExpect{Check: string(verify.CheckEntryEncoding)}
		}
		if err := key.VerifyEntry(e); err != nil {
			return failed(err)
		}
		return receiptExpect{Valid: true}
	}
	if c.Inclusion == nil {
		t.Fatalf("%s: a checkpoint needs an inclusion proof", c.Name)
	}
	cp, err := key.Checkpoint(c.Checkpoint)
	if err != nil {
		return failed(err)
	}
	if c.Inclusion.TreeSize != cp.Size {
		return receiptExpect{Check: string(verify.CheckInclusion)}
	}
	p := verify.TlogProof{Extra: c.Entry, Index: c.Inclusion.Index, Proof: c.Inclusion.Hashes, Checkpoint: c.Checkpoint}
	if _, _, err := verify.VerifyTlogProof(p.Marshal(), key); err != nil {
		return failed(err)
	}
	return receiptExpect{Valid: true}
}

// testLog is a fixed signing key and its note signer and verifier key.
type testLog struct {
	name   string
	vkey   string
	keyID  string
	priv   ed25519.PrivateKey
	signer note.Signer
}

// newTestLog makes the log key whose Ed25519 seed is SHA-256(seed): the
// same on every run, and never written to a file.
func newTestLog(t *testing.T, seed, name string) *testLog {
	t.Helper()
	s := sha256.Sum256([]byte(seed))
	priv := ed25519.NewKeyFromSeed(s[:])
	vkey, err := note.NewEd25519VerifierKey(name, priv.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	hash := strings.SplitN(vkey, "+", 3)[1]
	skey := "PRIVATE+KEY+" + name + "+" + hash + "+" + base64.StdEncoding.EncodeToString(append([]byte{1}, s[:]...))
	signer, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	return &testLog{name: name, vkey: vkey, keyID: name + "+" + hash, priv: priv, signer: signer}
}

// entryAt builds the decision entry at index i of a test log's history.
func (l *testLog) entryAt(t *testing.T, i uint64, prev commit.Digest, principal string) *entry.Entry {
	t.Helper()
	params, err := commit.Params(fmt.Appendf(nil, `{"amount_minor":%d,"payee":"acct-%d"}`, 1000+i, i))
	if err != nil {
		t.Fatal(err)
	}
	return &entry.Entry{
		Origin: l.name, Index: i, Time: time.Date(2026, 12, 1, 12, 0, int(i), 0, time.UTC),
		Mediator: "mediator-1", Principal: principal, Action: "make_payment",
		Decision: entry.Allow, Policies: []string{"payments.limit"},
		Params: params, Tiers: sha256.Sum256([]byte("tiers")),
		Attributes: fmt.Appendf(nil, `{"amount_minor":%d,"payee":{"payee_known":true}}`, 1000+i),
		Prev:       prev,
	}
}

// sign signs e with key (as keyID, which may be another key's) and returns
// its bytes and entry hash.
func sign(t *testing.T, e *entry.Entry, keyID string, priv ed25519.PrivateKey) ([]byte, commit.Digest) {
	t.Helper()
	h, err := e.Sign(keyID, func(m []byte) []byte { return ed25519.Sign(priv, m) })
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b, h
}

func (l *testLog) checkpoint(t *testing.T, size uint64, root []byte, signer note.Signer) []byte {
	t.Helper()
	text := log.Checkpoint{Origin: l.name, Size: size, Hash: root}.Marshal()
	signed, err := note.Sign(&note.Note{Text: string(text)}, signer)
	if err != nil {
		t.Fatal(err)
	}
	return signed
}

func flip(b []byte, i int) []byte {
	c := bytes.Clone(b)
	c[i] ^= 1
	return c
}

func TestReceiptCorpus(t *testing.T) {
	trusted := newTestLog(t, "ledger/conformance/receipt/trusted", "ledger.example.com/conformance")
	other := newTestLog(t, "ledger/conformance/receipt/other", "ledger.example.com/conformance")
	elsewhere := newTestLog(t, "ledger/conformance/receipt/elsewhere", "ledger.example.org/elsewhere")

	// A log of five entries, and checkpoints at sizes 5 and 3.
	const n = 5
	var entries [][]byte
	var prev commit.Digest
	for i := range uint64(n) {
		b, h := sign(t, trusted.entryAt(t, i, prev, "agent-1"), trusted.keyID, trusted.priv)
		entries, prev = append(entries, b), h
	}
	tree := testonly.New(rfc6962.DefaultHasher)
	tree.AppendData(entries...)
	cp5 := trusted.checkpoint(t, n, tree.Hash(), trusted.signer)
	cp3 := trusted.checkpoint(t, 3, tree.HashAt(3), trusted.signer)
	proof := func(index, size uint64) *inclusion {
		h, err := tree.InclusionProof(index, size)
		if err != nil {
			t.Fatal(err)
		}
		return &inclusion{Index: index, TreeSize: size, Hashes: h}
	}
	sigAt := func(b []byte) int { return bytes.Index(b, []byte(`"sig":"`)) + len(`"sig":"`) + 4 }

	// Tampered entries.
	e2 := entries[2]
	at := sigAt(e2)
	e2FlippedSig := []byte(string(e2[:at]) + flipBase64(e2[at:at+4]) + string(e2[at+4:]))
	e2OtherPrincipal := []byte(strings.Replace(string(e2), `"principal":"agent-1"`, `"principal":"agent-2"`, 1))
	var prev1 commit.Digest
	copy(prev1[:], mustEntryHash(t, entries[1]))
	e2ByOther, _ := sign(t, trusted.entryAt(t, 2, prev1, "agent-1"), other.keyID, other.priv)
	e2ByOtherAsTrusted, _ := sign(t, trusted.entryAt(t, 2, prev1, "agent-1"), trusted.keyID, other.priv)
	e2Elsewhere, _ := sign(t, elsewhere.entryAt(t, 2, prev1, "agent-1"), elsewhere.keyID, elsewhere.priv)
	e2Alternative, _ := sign(t, trusted.entryAt(t, 2, prev1, "agent-9"), trusted.keyID, trusted.priv)
	var indented bytes.Buffer
	if err := json.Indent(&indented, e2, "", " "); err != nil {
		t.Fatal(err)
	}
	cpSigAt := bytes.LastIndex(cp5, []byte(" ")) + 1 + 8 // past the key hash's 4 bytes in base64
	cp5OtherRoot := []byte(strings.Replace(string(cp5), base64.StdEncoding.EncodeToString(tree.Hash()), base64.StdEncoding.EncodeToString(tree.HashAt(4)), 1))
	p2 := proof(2, n)
	flippedProof := &inclusion{Index: 2, TreeSize: n, Hashes: append([][]byte{flip(p2.Hashes[0], 0)}, p2.Hashes[1:]...)}

	k := trusted.vkey
	type src struct {
		c     receiptCase
		valid bool
		check verify.Check
	}
	sources := []src{
		// An entry alone: its encoding, key and signature.
		{c: receiptCase{Name: "entry-valid", Key: k, Entry: e2}, valid: true},
		{c: receiptCase{Name: "entry-valid-first", Note: "index 0: prev is all zeros", Key: k, Entry: entries[0]}, valid: true},
		{c: receiptCase{Name: "entry-flipped-signature", Note: "one bit of the signature changed", Key: k, Entry: e2FlippedSig}, check: verify.CheckEntrySignature},
		{c: receiptCase{Name: "entry-changed-member", Note: "the principal changed after signing", Key: k, Entry: e2OtherPrincipal}, check: verify.CheckEntrySignature},
		{c: receiptCase{Name: "entry-other-key", Note: "signed by another key of the same name, with its own key_id", Key: k, Entry: e2ByOther}, check: verify.CheckEntryKey},
		{c: receiptCase{Name: "entry-other-key-same-key-id", Note: "signed by another key, claiming the trusted key_id", Key: k, Entry: e2ByOtherAsTrusted}, check: verify.CheckEntrySignature},
		{c: receiptCase{Name: "entry-other-origin", Note: "a valid entry of another log", Key: k, Entry: e2Elsewhere}, check: verify.CheckEntryKey},
		{c: receiptCase{Name: "entry-not-canonical", Note: "the same entry, indented", Key: k, Entry: indented.Bytes()}, check: verify.CheckEntryEncoding},
		{c: receiptCase{Name: "entry-truncated", Key: k, Entry: e2[:len(e2)-1]}, check: verify.CheckEntryEncoding},
		{c: receiptCase{Name: "entry-trusting-other-key", Note: "a valid entry, checked with a key the auditor was not told to trust", Key: other.vkey, Entry: e2}, check: verify.CheckEntryKey},

		// An entry with a checkpoint and its inclusion proof.
		{c: receiptCase{Name: "receipt-valid", Key: k, Entry: e2, Checkpoint: cp5, Inclusion: p2}, valid: true},
		{c: receiptCase{Name: "receipt-valid-first", Key: k, Entry: entries[0], Checkpoint: cp5, Inclusion: proof(0, n)}, valid: true},
		{c: receiptCase{Name: "receipt-valid-last", Note: "the last leaf of a tree of 5: a proof of one hash", Key: k, Entry: entries[4], Checkpoint: cp5, Inclusion: proof(4, n)}, valid: true},
		{c: receiptCase{Name: "receipt-valid-older-checkpoint", Key: k, Entry: entries[1], Checkpoint: cp3, Inclusion: proof(1, 3)}, valid: true},
		{c: receiptCase{Name: "receipt-flipped-proof-hash", Key: k, Entry: e2, Checkpoint: cp5, Inclusion: flippedProof}, check: verify.CheckInclusion},
		{c: receiptCase{Name: "receipt-proof-hash-missing", Key: k, Entry: e2, Checkpoint: cp5, Inclusion: &inclusion{Index: 2, TreeSize: n, Hashes: p2.Hashes[:len(p2.Hashes)-1]}}, check: verify.CheckInclusion},
		{c: receiptCase{Name: "receipt-proof-hash-extra", Key: k, Entry: e2, Checkpoint: cp5, Inclusion: &inclusion{Index: 2, TreeSize: n, Hashes: append(append([][]byte{}, p2.Hashes...), p2.Hashes[0])}}, check: verify.CheckInclusion},
		{c: receiptCase{Name: "receipt-proof-of-another-leaf", Note: "entry 2 with the proof of entry 3, at index 3", Key: k, Entry: e2, Checkpoint: cp5, Inclusion: proof(3, n)}, check: verify.CheckIndex},
		{c: receiptCase{Name: "receipt-other-index", Note: "entry 2's proof, claimed for index 3", Key: k, Entry: e2, Checkpoint: cp5, Inclusion: &inclusion{Index: 3, TreeSize: n, Hashes: p2.Hashes}}, check: verify.CheckIndex},
		{c: receiptCase{Name: "receipt-tree-size-mismatch", Note: "the proof's tree size is not the checkpoint's", Key: k, Entry: e2, Checkpoint: cp5, Inclusion: &inclusion{Index: 2, TreeSize: 3, Hashes: proof(2, 3).Hashes}}, check: verify.CheckInclusion},
		{c: receiptCase{Name: "receipt-entry-beyond-tree", Key: k, Entry: entries[4], Checkpoint: cp3, Inclusion: &inclusion{Index: 4, TreeSize: 3, Hashes: [][]byte{}}}, check: verify.CheckInclusion},
		{c: receiptCase{Name: "receipt-entry-not-in-tree", Note: "a validly signed entry 2 that the tree does not hold (a fork)", Key: k, Entry: e2Alternative, Checkpoint: cp5, Inclusion: p2}, check: verify.CheckInclusion},
		{c: receiptCase{Name: "receipt-flipped-entry-signature", Key: k, Entry: e2FlippedSig, Checkpoint: cp5, Inclusion: p2}, check: verify.CheckEntrySignature},
		{c: receiptCase{Name: "receipt-entry-other-key", Key: k, Entry: e2ByOther, Checkpoint: cp5, Inclusion: p2}, check: verify.CheckEntryKey},
		{c: receiptCase{Name: "receipt-checkpoint-flipped-signature", Key: k, Entry: e2, Checkpoint: []byte(string(cp5[:cpSigAt]) + flipBase64(cp5[cpSigAt:cpSigAt+4]) + string(cp5[cpSigAt+4:])), Inclusion: p2}, check: verify.CheckCheckpointSignature},
		{c: receiptCase{Name: "receipt-checkpoint-other-key", Note: "the same checkpoint text signed by another key", Key: k, Entry: e2, Checkpoint: trusted.checkpoint(t, n, tree.Hash(), other.signer), Inclusion: p2}, check: verify.CheckCheckpointSignature},
		{c: receiptCase{Name: "receipt-checkpoint-changed-root", Note: "the root hash replaced, the signature kept", Key: k, Entry: e2, Checkpoint: cp5OtherRoot, Inclusion: p2}, check: verify.CheckCheckpointSignature},
		{c: receiptCase{Name: "receipt-checkpoint-other-origin", Note: "a checkpoint of another log, with its own valid signature", Key: k, Entry: e2, Checkpoint: elsewhere.checkpoint(t, n, tree.Hash(), elsewhere.signer), Inclusion: p2}, check: verify.CheckCheckpointSignature},
	}
	var names []string
	var cases []any
	invalid := 0
	for _, s := range sources {
		c := s.c
		c.Expect = receiptResult(t, &c)
		if !c.Expect.Valid {
			invalid++
		}
		if c.Expect.Valid != s.valid || c.Expect.Check != string(s.check) {
			t.Errorf("%s: Go gives valid %v check %q, the case says valid %v check %q", c.Name, c.Expect.Valid, c.Expect.Check, s.valid, s.check)
		}
		names = append(names, c.Name)
		cases = append(cases, c)
	}
	if len(cases) < 12 || invalid < 8 {
		t.Errorf("receipt corpus too small: %d cases, %d invalid", len(cases), invalid)
	}
	checkCorpus(t, "receipt", names, cases)
}

// flipBase64 changes the first of four base64 characters so that the bytes
// they encode differ in one bit and the text stays canonical base64.
func flipBase64(quad []byte) string {
	raw, err := base64.StdEncoding.DecodeString(string(quad))
	if err != nil {
		panic(err)
	}
	raw[0] ^= 0x80
	return base64.StdEncoding.EncodeToString(raw)
}

func mustEntryHash(t *testing.T, b []byte) []byte {
	t.Helper()
	e, err := entry.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	h, err := e.Hash()
	if err != nil {
		t.Fatal(err)
	}
	return h[:]
}

// TestReceiptCorpusReader reads receipt.json the way another language's
// test does, and checks every case against Go.
func TestReceiptCorpusReader(t *testing.T) {
	cases := readCases[receiptCase](t, "receipt")
	for _, c := range cases {
		if got := receiptResult(t, &c); got != c.Expect {
			t.Errorf("%s: Go gives %+v, the corpus says %+v", c.Name, got, c.Expect)
		}
	}
	t.Logf("%d receipt cases", len(cases))
}
