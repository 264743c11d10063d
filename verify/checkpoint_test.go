package verify_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/verify"
	"golang.org/x/mod/sumdb/note"
)

// respell rewrites the signature lines of a signed note: edit gets them
// in order and returns the new ones.
func respell(t testing.TB, signed []byte, edit func(lines []string) []string) []byte {
	t.Helper()
	i := bytes.LastIndex(signed, []byte("\n\n"))
	lines := strings.Split(strings.TrimSuffix(string(signed[i+2:]), "\n"), "\n")
	return []byte(string(signed[:i+2]) + strings.Join(edit(lines), "\n") + "\n")
}

// nonCanonical sets a padding bit of an Ed25519 signature line's base64
// (68 bytes, so it ends in "x=", x holding two zero bits): the line still
// decodes to the same bytes.
func nonCanonical(t testing.TB, line string) string {
	t.Helper()
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	x := strings.IndexByte(alphabet, line[len(line)-2])
	if !strings.HasSuffix(line, "=") || strings.HasSuffix(line, "==") || x&3 != 0 {
		t.Fatalf("not a canonical 68-byte signature line: %q", line)
	}
	return line[:len(line)-2] + string(alphabet[x|1]) + "="
}

// badSignature is a line with line's key name and key hash and another
// signature.
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

// withCheckpoint replaces the checkpoint frame of an export.
func withCheckpoint(t testing.TB, export, cp []byte) []byte {
	t.Helper()
	rest, ok := bytes.CutPrefix(export, []byte(verify.ExportHeader))
	header, rest, ok2 := bytes.Cut(rest, []byte("\n"))
	var n int
	if _, err := fmt.Sscanf(string(header), "checkpoint %d", &n); !ok || !ok2 || err != nil {
		t.Fatalf("no checkpoint frame: %v", err)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%scheckpoint %d\n%s\n", verify.ExportHeader, len(cp), cp)
	b.Write(rest[n+1:])
	return b.Bytes()
}

// TestCheckpointSignatureLines: a checkpoint whose signature is spelled in
// non-canonical base64, or which carries beside the trusted key's valid
// signature an invalid one by the same key, is refused wherever a
// checkpoint is opened: alone (as --trusted is), in an export, in a
// tlog-proof file. golang.org/x/mod/sumdb/note accepts all of them.
func TestCheckpointSignatureLines(t *testing.T) {
	f := newFixture(t, 20)
	ctx := context.Background()
	export := f.export(t, 0, 20, ledger.ExportOptions{})
	tlogProof, err := f.l.TlogProof(ctx, 7, 0)
	if err != nil {
		t.Fatal(err)
	}
	p, err := verify.ParseTlogProof(tlogProof)
	if err != nil {
		t.Fatal(err)
	}
	witness, _, _ := ledger.GenerateKey("witness.example.org")
	ws, err := note.NewSigner(witness)
	if err != nil {
		t.Fatal(err)
	}
	cosigned, err := note.Sign(&note.Note{Text: string(f.cp.Marshal())}, f.signWith.Signer(), ws)
	if err != nil {
		t.Fatal(err)
	}
	v, err := note.NewVerifier(f.signWith.VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		cp   []byte
		want error // nil: accepted
	}{
		{"as signed", f.checkpoint, nil},
		{"with a witness cosignature", cosigned, nil},
		{"the signature twice", respell(t, f.checkpoint, func(l []string) []string { return []string{l[0], l[0]} }), nil},
		{"non-canonical base64", respell(t, f.checkpoint, func(l []string) []string { return []string{nonCanonical(t, l[0])} }),
			verify.ErrNonCanonicalSignature},
		{"non-canonical witness line", respell(t, cosigned, func(l []string) []string { return []string{l[0], nonCanonical(t, l[1])} }),
			verify.ErrNonCanonicalSignature},
		{"valid, then invalid by the same key", respell(t, f.checkpoint, func(l []string) []string { return []string{l[0], badSignature(t, l[0])} }),
			verify.ErrInvalidSignature},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := note.Open(c.cp, note.VerifierList(v)); err != nil {
				t.Fatalf("x/mod/sumdb/note refuses the vector: %v", err)
			}
			check := func(what string, err error) {
				t.Helper()
				switch {
				case c.want == nil && err != nil:
					t.Errorf("%s: refused: %v", what, err)
				case c.want != nil && (!errors.Is(err, c.want) || !isCheck(err, verify.CheckCheckpointSignature)):
					t.Errorf("%s: got %v, want %v", what, err, c.want)
				}
			}
			_, err := f.key.Checkpoint(c.cp)
			check("checkpoint", err)
			_, err = verify.VerifyExport(bytes.NewReader(withCheckpoint(t, export, c.cp)), f.key, verify.ExportOptions{})
			check("export", err)
			q := *p
			q.Checkpoint = c.cp
			_, _, err = verify.VerifyTlogProof(q.Marshal(), f.key)
			check("tlog-proof", err)
		})
	}
}
