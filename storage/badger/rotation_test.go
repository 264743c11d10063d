package badger_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/storage/badger"
)

// TestBadgerRestoresAddedSignature: a crash after AddCheckpoint wrote the
// checkpoint file with the added signature but before the index held it:
// the reopened store serves the rotation checkpoint, and a ledger opened
// with the new key on it follows the rotation.
func TestBadgerRestoresAddedSignature(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	logger := slog.New(slog.DiscardHandler)
	a, b := rotationKey(t), rotationKey(t)
	s, err := badger.Open(ctx, dir, badger.Options{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledger.Open(ctx, s, a, ledger.Options{CheckpointInterval: -1, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		params, err := commit.Params(fmt.Appendf(nil, `{"to":"user%d@example.com"}`, i))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(ctx, ledger.Record{Mediator: "mediator-1", Principal: "agent-1", Action: "send_email",
			Decision: entry.Allow, Policies: []string{"mail.allow"}, Params: params, Tiers: sha256.Sum256([]byte("tiers")),
			Attributes: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Publish(ctx); err != nil {
		t.Fatal(err)
	}
	l.Close()
	st, _ := s.State(ctx)
	cp := st.Checkpoint
	s.Close()
	text, _, _ := bytes.Cut(cp, []byte("\n\n"))
	sig, _ := note.Sign(&note.Note{Text: string(text) + "\n"}, b.Signer())
	_, line, _ := bytes.Cut(sig, []byte("\n\n"))
	rotation := append(bytes.Clone(cp), line...)
	if err := badger.WriteCheckpointFile(dir, 30, rotation); err != nil {
		t.Fatal(err)
	}
	s, err = badger.Open(ctx, dir, badger.Options{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, err := s.Checkpoint(ctx, 30); err != nil || !bytes.Equal(got, rotation) {
		t.Errorf("Checkpoint(30) after the crash: %v\n%s", err, got)
	}
	if _, err := ledger.Open(ctx, s, b, ledger.Options{Logger: logger, CheckpointInterval: -1, PreviousKeys: []string{a.VerifierKey()}}); err != nil {
		t.Error(err)
	}
}

// rotationKey returns a new signing key named ledger.example.com/test.
func rotationKey(t *testing.T) *ledger.Key {
	t.Helper()
	skey, _, err := ledger.GenerateKey("ledger.example.com/test")
	if err != nil {
		t.Fatal(err)
	}
	k, err := ledger.ParseKey([]byte(skey), ledger.KeyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return k
}
