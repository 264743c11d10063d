package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"filippo.io/torchwood"
	"golang.org/x/mod/sumdb/note"
)

// writeWitnessFixture writes a fixture of n entries (see fixture) whose
// checkpoints are cosigned, by torchwood's cosignature/v1 signer, by
// witness-a and witness-b of the three witnesses witness-{a,b,c}.vkey:
// export.ledger, tail.ledger, entry-7.tlog-proof and half.checkpoint; and
// a-only.checkpoint, the latest checkpoint cosigned by witness-a only.
func writeWitnessFixture(dir string, n int) error {
	if _, err := fixture(dir, n, ""); err != nil {
		return err
	}
	at := func(name string) string { return filepath.Join(dir, name) }
	var signers []note.Signer
	for _, name := range []string{"a", "b", "c"} {
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return err
		}
		s, err := torchwood.NewCosignatureSigner("witness-"+name+".example.org", priv)
		if err != nil {
			return err
		}
		if err := os.WriteFile(at("witness-"+name+".vkey"), []byte(s.Verifier().String()+"\n"), 0o644); err != nil {
			return err
		}
		signers = append(signers, s)
	}
	// cosign appends the witnesses' signature lines to a signed note.
	cosign := func(signed []byte, ws ...note.Signer) ([]byte, error) {
		text, _, ok := bytes.Cut(signed, []byte("\n\n"))
		if !ok {
			return nil, fmt.Errorf("not a signed note")
		}
		cos, err := note.Sign(&note.Note{Text: string(text) + "\n"}, ws...)
		if err != nil {
			return nil, err
		}
		return append(bytes.Clone(signed), cos[len(text)+2:]...), nil
	}
	// rewrite replaces the signed checkpoint at the end of a file or, in
	// an export, in its checkpoint frame.
	rewrite := func(name string, ws ...note.Signer) ([]byte, error) {
		b, err := os.ReadFile(at(name))
		if err != nil {
			return nil, err
		}
		if rest, ok := bytes.CutPrefix(b, []byte("ledger-export v1\ncheckpoint ")); ok {
			var size int
			if _, err := fmt.Sscanf(string(rest), "%d\n", &size); err != nil {
				return nil, err
			}
			head := len(fmt.Sprintf("%d\n", size))
			cp, err := cosign(rest[head:head+size], ws...)
			if err != nil {
				return nil, err
			}
			return fmt.Appendf(nil, "ledger-export v1\ncheckpoint %d\n%s%s", len(cp), cp, rest[head+size:]), nil
		}
		// tlog-proof and checkpoint files end with the checkpoint, which
		// starts with the origin line after a blank line (or at the top).
		i := strings.LastIndex(string(b), "\n\nledger.example.com/log\n")
		if i >= 0 {
			cp, err := cosign(b[i+2:], ws...)
			return append(b[:i+2:i+2], cp...), err
		}
		return cosign(b, ws...)
	}
	for _, name := range []string{"export.ledger", "tail.ledger", "entry-7.tlog-proof", "half.checkpoint"} {
		b, err := rewrite(name, signers[0], signers[1])
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if err := os.WriteFile(at(name), b, 0o644); err != nil {
			return err
		}
	}
	b, err := os.ReadFile(at("half.checkpoint"))
	if err != nil {
		return err
	}
	i := bytes.Index(b, []byte("\n— witness-a"))
	j := bytes.Index(b, []byte("\n— witness-b"))
	if i < 0 || j < 0 {
		return fmt.Errorf("half.checkpoint was not cosigned")
	}
	// Keep the log's line and witness-a's.
	return os.WriteFile(at("a-only.checkpoint"), append(b[:j+1:j+1], b[bytes.IndexByte(b[j+1:], '\n')+j+2:]...), 0o644)
}
