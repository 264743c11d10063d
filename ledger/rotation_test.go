package ledger_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/storage/memory"
	"golang.org/x/mod/sumdb/note"
)

// rotated is a store whose log rotated from key a to key b after n
// entries, with m entries by b after it.
type rotated struct {
	s    *memory.Store
	a, b *ledger.Key
	cp   []byte // the rotation checkpoint
}

func newRotated(t testing.TB, n, m int) *rotated {
	t.Helper()
	ctx := context.Background()
	r := &rotated{s: memory.New(), a: testKey(t), b: testKey(t)}
	l := openTest(t, r.s, r.a)
	appendN(t, l, 0, n)
	l.Close()
	var err error
	if r.cp, err = ledger.Rotate(ctx, r.s, r.a, r.b, ledger.Options{Logger: discardLogger()}); err != nil {
		t.Fatalf("Rotate: %v", err)
	}
	l, err = ledger.Open(ctx, r.s, r.b, ledger.Options{CheckpointInterval: -1, Logger: discardLogger(), PreviousKeys: []string{r.a.VerifierKey()}})
	if err != nil {
		t.Fatalf("Open after the rotation: %v", err)
	}
	appendN(t, l, n, m)
	if _, err := l.Publish(ctx); err != nil {
		t.Fatal(err)
	}
	l.Close()
	return r
}

func (r *rotated) open(t testing.TB, s ledger.Store, k *ledger.Key, previous ...*ledger.Key) (*ledger.Ledger, error) {
	t.Helper()
	var vkeys []string
	for _, p := range previous {
		vkeys = append(vkeys, p.VerifierKey())
	}
	l, err := ledger.Open(context.Background(), s, k, ledger.Options{CheckpointInterval: -1, Logger: discardLogger(), PreviousKeys: vkeys})
	if err == nil {
		t.Cleanup(func() { l.Close() })
	}
	return l, err
}

// TestRotate: the rotation checkpoint is the latest checkpoint with b's
// signature line added; entries after it carry b's id; the store reopens
// with b and a listed, and Rotations names the rotation.
func TestRotate(t *testing.T) {
	ctx := context.Background()
	r := newRotated(t, 300, 200)
	va, _ := note.NewVerifier(r.a.VerifierKey())
	vb, _ := note.NewVerifier(r.b.VerifierKey())
	if _, err := note.Open(r.cp, note.VerifierList(va)); err != nil {
		t.Errorf("rotation checkpoint not signed by a: %v", err)
	}
	if _, err := note.Open(r.cp, note.VerifierList(vb)); err != nil {
		t.Errorf("rotation checkpoint not signed by b: %v", err)
	}
	if stored, err := r.s.Checkpoint(ctx, 300); err != nil || !bytes.Equal(stored, r.cp) {
		t.Errorf("stored checkpoint for 300: %v", err)
	}
	l, err := r.open(t, r.s, r.b, r.a)
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Rotations(); len(got) != 1 || got[0] != (ledger.Rotation{Size: 300, From: r.a.ID(), To: r.b.ID()}) {
		t.Errorf("Rotations() = %+v", got)
	}
	for i, want := range map[uint64]string{0: r.a.ID(), 299: r.a.ID(), 300: r.b.ID(), 499: r.b.ID()} {
		b, _ := l.Entry(ctx, i)
		if !bytes.Contains(b, []byte(`"key_id":"`+want+`"`)) {
			t.Errorf("entry %d does not carry key %s", i, want)
		}
	}
	// Rotating again to b is a no-op only while the rotation checkpoint is
	// the latest (a rotation interrupted before the switch to b, run
	// again); rotating back to a is refused.
	l.Close()
	s := memory.New()
	appendN(t, openTestClosed(t, s, r.a), 0, 10)
	first, err := ledger.Rotate(ctx, s, r.a, r.b, ledger.Options{Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if again, err := ledger.Rotate(ctx, s, r.a, r.b, ledger.Options{Logger: discardLogger()}); err != nil || !bytes.Equal(again, first) {
		t.Errorf("rotation run again: %v", err)
	}
	if _, err := ledger.Rotate(ctx, r.s, r.a, r.b, ledger.Options{Logger: discardLogger()}); err != nil {
		t.Errorf("rotation run again after entries by the new key (made already): %v", err)
	}
	if _, err := ledger.Rotate(ctx, r.s, r.a, testKey(t), ledger.Options{Logger: discardLogger()}); !errors.As(err, new(*ledger.UnknownKeyError)) {
		t.Errorf("rotation from a key rotated out: %v", err)
	}
	if _, err := ledger.Rotate(ctx, r.s, r.b, r.a, ledger.Options{Logger: discardLogger(), PreviousKeys: []string{r.a.VerifierKey()}}); !errors.Is(err, ledger.ErrRotation) {
		t.Errorf("rotating back to the old key: %v", err)
	}
	if err := ledger.Check(ctx, r.s, r.b, r.a.VerifierKey()); err != nil {
		t.Errorf("Check with the previous key: %v", err)
	}
}

// TestRotateTwice: a → b → c; the chain opens with a and b listed, in
// any order, and not with one of them missing.
func TestRotateTwice(t *testing.T) {
	ctx := context.Background()
	r := newRotated(t, 10, 10)
	c := testKey(t)
	prev := []string{r.a.VerifierKey()}
	if _, err := ledger.Rotate(ctx, r.s, r.b, c, ledger.Options{Logger: discardLogger(), PreviousKeys: prev}); err != nil {
		t.Fatal(err)
	}
	l, err := r.open(t, r.s, c, r.b, r.a)
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 20, 5)
	if got := l.Rotations(); len(got) != 2 || got[0].Size != 10 || got[1] != (ledger.Rotation{Size: 20, From: r.b.ID(), To: c.ID()}) {
		t.Errorf("Rotations() = %+v", got)
	}
	l.Close()
	if _, err := r.open(t, r.s, c, r.b); !errors.As(err, new(*ledger.UnknownKeyError)) || !strings.Contains(err.Error(), r.a.ID()) {
		t.Errorf("without the first key listed: %v", err)
	}
}

// TestRotateRefusesKeys: the new key must have the log's name and be
// another key.
func TestRotateRefusesKeys(t *testing.T) {
	ctx := context.Background()
	a := testKey(t)
	s := memory.New()
	openTest(t, s, a).Close()
	skey, _, _ := ledger.GenerateKey("ledger.example.com/other")
	other, _ := ledger.ParseKey([]byte(skey), ledger.KeyOptions{})
	for name, k := range map[string]*ledger.Key{"another name": other, "the same key": a} {
		if _, err := ledger.Rotate(ctx, s, a, k, ledger.Options{Logger: discardLogger()}); !errors.Is(err, ledger.ErrRotation) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := ledger.Open(ctx, s, a, ledger.Options{Logger: discardLogger(), PreviousKeys: []string{other.VerifierKey()}}); !errors.Is(err, ledger.ErrRotation) || !strings.Contains(err.Error(), "name") {
		t.Errorf("a previous key of another name: %v", err)
	}
}

// TestOpenAfterRotationRefusals: each way of opening a rotated store
// wrongly is refused with an error saying what to do, and none is
// reported as corruption.
func TestOpenAfterRotationRefusals(t *testing.T) {
	r := newRotated(t, 100, 50)
	// The new key without the previous key listed.
	_, err := r.open(t, r.s, r.b)
	var uk *ledger.UnknownKeyError
	if !errors.As(err, &uk) || !strings.Contains(err.Error(), "list the old verifier key as a previous key") ||
		!strings.Contains(err.Error(), "entry 99") || uk.Signers[0] != r.a.ID() || errors.Is(err, ledger.ErrCorrupt) {
		t.Errorf("new key, previous not listed: %v", err)
	}
	// Right after the rotation, before any entry by the new key.
	s := memory.New()
	openTest(t, s, r.a).Close()
	l := openTest(t, s, r.a)
	appendN(t, l, 0, 10)
	l.Close()
	if _, err := ledger.Rotate(context.Background(), s, r.a, r.b, ledger.Options{Logger: discardLogger()}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.open(t, s, r.b); !errors.As(err, &uk) || errors.Is(err, ledger.ErrCorrupt) {
		t.Errorf("just rotated, previous not listed: %v", err)
	}
	// Just rotated, the old key still configured: it must never sign again.
	if _, err := r.open(t, s, r.a); !errors.Is(err, ledger.ErrRotation) || !strings.Contains(err.Error(), "was rotated out") {
		t.Errorf("just rotated, old key configured: %v", err)
	}
	// The old key alone.
	if _, err := r.open(t, r.s, r.a); !errors.As(err, &uk) || uk.Signers[0] != r.b.ID() || errors.Is(err, ledger.ErrCorrupt) {
		t.Errorf("old key: %v", err)
	}
	// A new key configured without a rotation (ledgerd keygen, pointed at
	// the store): not corrupt, but named, with or without the old key
	// listed.
	c := testKey(t)
	if _, err := r.open(t, r.s, c); !errors.As(err, &uk) || uk.Configured != c.ID() || errors.Is(err, ledger.ErrCorrupt) {
		t.Errorf("unrelated key: %v", err)
	}
	s2 := memory.New()
	openTest(t, s2, r.a).Close()
	if _, err := r.open(t, s2, c, r.a); !errors.Is(err, ledger.ErrRotation) || !strings.Contains(err.Error(), "rotation was not made") || errors.Is(err, ledger.ErrCorrupt) {
		t.Errorf("new key, old listed, no rotation: %v", err)
	}
	// An unknown key for the store's own log, listed keys unused.
	if _, err := r.open(t, s2, r.a, c); !errors.Is(err, ledger.ErrRotation) || !strings.Contains(err.Error(), "signs the log from its first entry") {
		t.Errorf("a listed previous key that never signed: %v", err)
	}
}

// forgedStore serves other checkpoints than the store holds: what an
// attacker holding only the new key could write.
type forgedStore struct {
	ledger.Store
	cps    map[uint64][]byte
	latest uint64
}

func (f *forgedStore) State(ctx context.Context) (ledger.State, error) {
	st, err := f.Store.State(ctx)
	if cp, ok := f.cps[f.latest]; ok && err == nil {
		st.Checkpoint, st.CheckpointSize = cp, f.latest
	}
	return st, err
}

func (f *forgedStore) Checkpoint(ctx context.Context, size uint64) ([]byte, error) {
	if cp, ok := f.cps[size]; ok {
		return cp, nil
	}
	return f.Store.Checkpoint(ctx, size)
}

// signOnly signs the note text of signed anew with k alone.
func signOnly(t testing.TB, signed []byte, k *ledger.Key) []byte {
	t.Helper()
	text, _, _ := bytes.Cut(signed, []byte("\n\n"))
	b, err := note.Sign(&note.Note{Text: string(text) + "\n"}, k.Signer())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestOpenRefusesForgedRotation: a rotation checkpoint signed by the new
// key alone, or a history the new key signs from entry 0, is refused
// although every signature verifies; so is a rotation checkpoint whose
// old key's signature is bad, or whose root is not the stored tree's.
func TestOpenRefusesForgedRotation(t *testing.T) {
	ctx := context.Background()
	r := newRotated(t, 100, 50)
	latest, _ := r.s.State(ctx)
	// The rotation checkpoint re-signed by b alone.
	forged := &forgedStore{Store: r.s, cps: map[uint64][]byte{100: signOnly(t, r.cp, r.b)}, latest: latest.CheckpointSize}
	_, err := r.open(t, forged, r.b, r.a)
	if !errors.Is(err, ledger.ErrRotation) || !errors.Is(err, ledger.ErrCorrupt) || !strings.Contains(err.Error(), "no checkpoint for tree size 100 is signed by both") {
		t.Errorf("rotation checkpoint by the new key only: %v", err)
	}
	// Right after a rotation forged by b alone: the latest is b's only.
	s := memory.New()
	l := openTest(t, s, r.a)
	appendN(t, l, 0, 10)
	l.Close()
	st, _ := s.State(ctx)
	cp, _ := s.Checkpoint(ctx, st.CheckpointSize)
	forged = &forgedStore{Store: s, cps: map[uint64][]byte{10: signOnly(t, cp, r.b)}, latest: 10}
	if _, err := r.open(t, forged, r.b, r.a); !errors.Is(err, ledger.ErrRotation) || !errors.Is(err, ledger.ErrCorrupt) {
		t.Errorf("forged rotation, no entries since: %v", err)
	}
	// A whole history by b, with a listed as previous key.
	s = memory.New()
	l = openTest(t, s, r.b)
	appendN(t, l, 0, 10)
	l.Close()
	if _, err := r.open(t, s, r.b, r.a); !errors.Is(err, ledger.ErrRotation) || !strings.Contains(err.Error(), "first entry") {
		t.Errorf("history by the new key from the start: %v", err)
	}
	// The old key's signature line of the rotation checkpoint changed.
	i := bytes.LastIndex(r.cp, []byte("\n\n"))
	lines := strings.Split(strings.TrimSuffix(string(r.cp[i+2:]), "\n"), "\n")
	bad := []byte(string(r.cp[:i+2]) + badLine(t, lines[0]) + "\n" + lines[1] + "\n")
	forged = &forgedStore{Store: r.s, cps: map[uint64][]byte{100: bad}, latest: latest.CheckpointSize}
	if _, err := r.open(t, forged, r.b, r.a); !errors.Is(err, ledger.ErrCorrupt) {
		t.Errorf("rotation checkpoint with a bad old signature: %v", err)
	}
	// A rotation checkpoint, signed by both, for another root.
	other := newRotated(t, 100, 0)
	forged = &forgedStore{Store: r.s, cps: map[uint64][]byte{100: other.cp}, latest: latest.CheckpointSize}
	if _, err := r.open(t, forged, r.b, other.a, r.a); err == nil {
		t.Errorf("rotation checkpoint of another tree accepted")
	}
}

// badLine flips a bit of a signature line's signature.
func badLine(t testing.TB, line string) string {
	t.Helper()
	i := strings.LastIndexByte(line, ' ')
	b := []byte(line)
	if b[i+10] == 'A' {
		b[i+10] = 'B'
	} else {
		b[i+10] = 'A'
	}
	return string(b)
}

// TestRotateCoversUncheckpointedEntries: entries made durable after the
// latest checkpoint (a crash before it was signed) are covered by the
// rotation checkpoint, signed for the tree's size by both keys.
func TestRotateCoversUncheckpointedEntries(t *testing.T) {
	ctx := context.Background()
	a, b := testKey(t), testKey(t)
	s := memory.New()
	l := openTest(t, &noCheckpoints{s}, a)
	appendN(t, l, 0, 20)
	l.Close() // its checkpoint refused: the latest is the empty tree's
	if st, _ := s.State(ctx); st.CheckpointSize != 0 || st.Size != 20 {
		t.Fatalf("state %+v", st)
	}
	cp, err := ledger.Rotate(ctx, s, a, b, ledger.Options{Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(cp, []byte(a.Name()+"\n20\n")) || bytes.Count(cp, []byte("\n— ")) != 2 {
		t.Errorf("rotation checkpoint %q", cp)
	}
	if _, err := ledger.Open(ctx, s, b, ledger.Options{Logger: discardLogger(), CheckpointInterval: -1, PreviousKeys: []string{a.VerifierKey()}}); err != nil {
		t.Error(err)
	}
}

// noCheckpoints refuses every checkpoint but the empty tree's.
type noCheckpoints struct{ ledger.Store }

func (s *noCheckpoints) AddCheckpoint(ctx context.Context, size uint64, signed []byte) error {
	if size > 0 {
		return errors.New("checkpoint refused by the test")
	}
	return s.Store.AddCheckpoint(ctx, size, signed)
}

// entryStore serves entry bytes of its own for some indices: a store
// edited by whoever holds a key (opened by default, which does not rehash
// the entries a checkpoint covers: only the key checks see it).
type entryStore struct {
	ledger.Store
	entries map[uint64][]byte
}

func (s *entryStore) Entry(ctx context.Context, i uint64) ([]byte, error) {
	if b, ok := s.entries[i]; ok {
		return b, nil
	}
	return s.Store.Entry(ctx, i)
}

// TestOpenRefusesKeysOutOfOrder: the entries on each side of a rotation
// must carry the keys the rotation checkpoint names; the old key must
// never sign again after the new key's first entry; and the rotation
// checkpoint's root must be the stored tree's.
func TestOpenRefusesKeysOutOfOrder(t *testing.T) {
	ctx := context.Background()
	r := newRotated(t, 100, 50)
	c := testKey(t)
	withKey := func(i uint64, k *ledger.Key) []byte {
		b, err := r.s.Entry(ctx, i)
		if err != nil {
			t.Fatal(err)
		}
		for _, old := range []*ledger.Key{r.a, r.b} {
			b = bytes.Replace(b, []byte(`"key_id":"`+old.ID()+`"`), []byte(`"key_id":"`+k.ID()+`"`), 1)
		}
		return b
	}
	quick := func(s ledger.Store, k *ledger.Key, previous ...*ledger.Key) error {
		var vkeys []string
		for _, p := range previous {
			vkeys = append(vkeys, p.VerifierKey())
		}
		l, err := ledger.Open(ctx, s, k, ledger.Options{CheckpointInterval: -1, Logger: discardLogger(), PreviousKeys: vkeys})
		if err == nil {
			l.Close()
		}
		return err
	}
	if err := quick(r.s, r.b, r.a); err != nil {
		t.Fatalf("untouched: %v", err)
	}
	// The old key signs the last entry.
	err := quick(&entryStore{r.s, map[uint64][]byte{149: withKey(149, r.a)}}, r.b, r.a)
	if !errors.Is(err, ledger.ErrRotation) || !strings.Contains(err.Error(), "entry 149 carries key "+r.a.ID()) || !strings.Contains(err.Error(), "must never sign again") {
		t.Errorf("old key after the rotation: %v", err)
	}
	// The entry before the rotation carries a third listed key.
	err = quick(&entryStore{r.s, map[uint64][]byte{99: withKey(99, c)}}, r.b, r.a, c)
	if !errors.Is(err, ledger.ErrRotation) || !strings.Contains(err.Error(), "entry 99 carries key "+c.ID()) {
		t.Errorf("entry before the rotation by another key: %v", err)
	}
	// A rotation checkpoint signed by both keys, for another root.
	text := []byte(r.a.Name() + "\n100\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n")
	other, err := note.Sign(&note.Note{Text: string(text)}, r.a.Signer(), r.b.Signer())
	if err != nil {
		t.Fatal(err)
	}
	latest, _ := r.s.State(ctx)
	err = quick(&forgedStore{Store: r.s, cps: map[uint64][]byte{100: other}, latest: latest.CheckpointSize}, r.b, r.a)
	if !errors.Is(err, ledger.ErrCorrupt) || !strings.Contains(err.Error(), "rotation checkpoint signed by") {
		t.Errorf("rotation checkpoint for another root: %v", err)
	}
}

// openTestClosed opens a ledger that the test's cleanup closes.
func openTestClosed(t testing.TB, s ledger.Store, k *ledger.Key) *ledger.Ledger {
	t.Helper()
	l := openTest(t, s, k)
	t.Cleanup(func() { l.Close() })
	return l
}
