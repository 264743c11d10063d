package ledger_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"testing"
	"time"

	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/storage/memory"
	"github.com/transparency-dev/formats/log"
	"golang.org/x/mod/sumdb/note"
)

// A new log has a signed checkpoint from its first Open, for the empty
// tree, so that a monitor or witness can start at size 0; reopening signs
// no other, and the first appends extend it.
func TestEmptyLogCheckpoint(t *testing.T) {
	k := testKey(t)
	s := memory.New()
	l := openTest(t, s, k)
	cp, size := l.Checkpoint()
	if cp == nil || size != 0 {
		t.Fatalf("Checkpoint of a new log = %q, %d; want one for size 0", cp, size)
	}
	v, err := note.NewVerifier(k.VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	parsed, _, _, err := log.ParseCheckpoint(cp, k.Name(), v)
	if err != nil {
		t.Fatal(err)
	}
	if empty := sha256.Sum256(nil); parsed.Size != 0 || !bytes.Equal(parsed.Hash, empty[:]) {
		t.Fatalf("checkpoint of the empty log: size %d, root %x; want 0 and SHA-256 of nothing", parsed.Size, parsed.Hash)
	}
	if st, err := s.State(context.Background()); err != nil || !bytes.Equal(st.Checkpoint, cp) || st.CheckpointSize != 0 {
		t.Fatalf("the store holds %+v, %v; want the empty log's checkpoint", st, err)
	}
	l.Close()
	again := openTest(t, s, k)
	if cp2, _ := again.Checkpoint(); !bytes.Equal(cp2, cp) {
		t.Fatal("reopening the empty log signed another checkpoint")
	}
	appendN(t, again, 0, 3)
	latest, err := again.Publish(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if parsed, _, _, err := log.ParseCheckpoint(latest, k.Name(), v); err != nil || parsed.Size != 3 {
		t.Fatalf("checkpoint after 3 appends: %v, %+v", err, parsed)
	}
	again.Close()
}

// Entries made durable after the latest checkpoint, by a process that
// stopped before it signed another, are covered by a checkpoint at Open,
// not at the first tick of the publish loop.
func TestOpenCoversDurableEntries(t *testing.T) {
	k := testKey(t)
	s := memory.New()
	l := openTest(t, s, k)
	appendN(t, l, 0, 10)
	if _, err := l.Publish(context.Background()); err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 10, 5)
	l.StopSequencer() // stops without the final checkpoint
	if st, _ := s.State(context.Background()); st.CheckpointSize != 10 || st.Size != 15 {
		t.Fatalf("store state %+v; the test needs entries after the checkpoint", st)
	}
	again, err := ledger.Open(context.Background(), s, k, ledger.Options{CheckpointInterval: time.Hour, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if _, size := again.Checkpoint(); size != 15 {
		t.Fatalf("checkpoint after Open covers %d entries; want all 15", size)
	}
}
