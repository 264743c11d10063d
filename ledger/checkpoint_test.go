package ledger_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/decisionledger/ledger/internal/signednote"
	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/storage/memory"
	"golang.org/x/mod/sumdb/note"
)

// respellStore returns the latest checkpoint with its signature lines
// rewritten.
type respellStore struct {
	ledger.Store
	edit func(lines []string) []string
}

func (s *respellStore) State(ctx context.Context) (ledger.State, error) {
	st, err := s.Store.State(ctx)
	if err == nil && st.Checkpoint != nil {
		st.Checkpoint = respellNote(st.Checkpoint, s.edit)
	}
	return st, err
}

func respellNote(signed []byte, edit func(lines []string) []string) []byte {
	i := bytes.LastIndex(signed, []byte("\n\n"))
	lines := strings.Split(strings.TrimSuffix(string(signed[i+2:]), "\n"), "\n")
	return []byte(string(signed[:i+2]) + strings.Join(edit(lines), "\n") + "\n")
}

// The ledger opens its own checkpoints as strictly as the verifier: a
// signature in non-canonical base64, or an invalid second signature by
// the ledger's key beside the valid one, makes the store corrupt, although
// golang.org/x/mod/sumdb/note accepts both notes.
func TestCheckpointSignatureLines(t *testing.T) {
	ctx := context.Background()
	k := testKey(t)
	s := memory.New()
	l := openTest(t, s, k)
	appendN(t, l, 0, 5)
	signed, err := l.Publish(ctx)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	v, err := note.NewVerifier(k.VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	nonCanonical := func(line string) string {
		// 68 bytes of signature line: the base64 ends in "x=", x holding
		// two padding bits, zero in the canonical spelling.
		const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
		x := strings.IndexByte(alphabet, line[len(line)-2])
		if !strings.HasSuffix(line, "=") || strings.HasSuffix(line, "==") || x&3 != 0 {
			t.Fatalf("not a canonical 68-byte signature line: %q", line)
		}
		return line[:len(line)-2] + string(alphabet[x|1]) + "="
	}
	invalid := func(line string) string {
		i := strings.LastIndexByte(line, ' ')
		sig, err := base64.StdEncoding.DecodeString(line[i+1:])
		if err != nil {
			t.Fatal(err)
		}
		sig[10] ^= 1
		return line[:i+1] + base64.StdEncoding.EncodeToString(sig)
	}
	for _, c := range []struct {
		name string
		edit func([]string) []string
		want error // nil: accepted
	}{
		{"as signed", func(l []string) []string { return l }, nil},
		{"the signature twice", func(l []string) []string { return []string{l[0], l[0]} }, nil},
		{"non-canonical base64", func(l []string) []string { return []string{nonCanonical(l[0])} }, signednote.ErrNonCanonical},
		{"valid, then invalid by the same key", func(l []string) []string { return []string{l[0], invalid(l[0])} }, signednote.ErrInvalid},
	} {
		t.Run(c.name, func(t *testing.T) {
			cp := respellNote(signed, c.edit)
			if _, err := note.Open(cp, note.VerifierList(v)); err != nil {
				t.Fatalf("x/mod/sumdb/note refuses the vector: %v", err)
			}
			err := ledger.ParseCheckpoint(cp, k)
			if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
				t.Fatalf("parseCheckpoint: %v, want %v", err, c.want)
			}
			l, err := ledger.Open(ctx, &respellStore{Store: s.Reopen(), edit: c.edit}, k, ledger.Options{CheckpointInterval: -1, Logger: discardLogger()})
			if c.want == nil {
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				l.Close()
			} else if !errors.Is(err, ledger.ErrCorrupt) || !errors.Is(err, c.want) {
				t.Fatalf("Open: %v, want a corrupt store: %v", err, c.want)
			}
		})
	}
}
