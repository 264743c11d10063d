package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/storage/memory"
	"github.com/decisionledger/ledger/verify"
	tlog "github.com/transparency-dev/formats/log"
	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/merkle/testonly"
	"golang.org/x/mod/sumdb/note"
)

// Sizes of the rotated fixture: the log's key rotates after rotatedAt
// entries, and rotatedSize entries are in the log after it.
const (
	rotatedAt   = 100
	rotatedSize = 150
)

// writeRotatedFixture writes, for "ledger-fixture rotated", a real log
// whose key rotated from old to new at tree size 100 (ledger.Rotate),
// with 150 entries, and the continuation the old key alone can forge:
// old.vkey, new.vkey; rotation.checkpoint (size 100, signed by both);
// honest.ledger (entries 0-149, new key's checkpoint); honest-tail.ledger
// (100-149, with a consistency proof from 100); forged.ledger and
// forged-tail.ledger, the same with entries 100-149 re-signed by the old
// key (each chained to the one before) and a checkpoint of size 150 the
// old key alone signed; and forged-120.tlog-proof, forged entry 120
// under that checkpoint.
func writeRotatedFixture(dir string) error {
	ctx := context.Background()
	at := func(name string) string { return filepath.Join(dir, name) }
	keyOf := func() (*ledger.Key, error) {
		skey, _, err := ledger.GenerateKey("ledger.example.com/log")
		if err != nil {
			return nil, err
		}
		return ledger.ParseKey([]byte(skey), ledger.KeyOptions{})
	}
	oldKey, err := keyOf()
	if err != nil {
		return err
	}
	newKey, err := keyOf()
	if err != nil {
		return err
	}
	quiet := slog.New(slog.DiscardHandler)
	s := memory.New()
	appendN := func(l *ledger.Ledger, from, to int) error {
		for i := from; i < to; i++ {
			p, err := commit.Params([]byte(fmt.Sprintf(`{"to":"user%d@example.com"}`, i)))
			if err != nil {
				return err
			}
			if _, err := l.Append(ctx, ledger.Record{Mediator: "mediator-1", Principal: "agent-1", Action: "send_email",
				Decision: entry.Allow, Policies: []string{"email.allow"}, Params: p, Tiers: commit.Digest{1}, Attributes: []byte(`{}`)}); err != nil {
				return err
			}
		}
		_, err := l.Publish(ctx)
		return err
	}
	l, err := ledger.Open(ctx, s, oldKey, ledger.Options{CheckpointInterval: -1, Logger: quiet})
	if err != nil {
		return err
	}
	err = appendN(l, 0, rotatedAt)
	l.Close()
	if err != nil {
		return err
	}
	rotation, err := ledger.Rotate(ctx, s, oldKey, newKey, ledger.Options{Logger: quiet})
	if err != nil {
		return err
	}
	l, err = ledger.Open(ctx, s, newKey, ledger.Options{CheckpointInterval: -1, Logger: quiet, PreviousKeys: []string{oldKey.VerifierKey()}})
	if err != nil {
		return err
	}
	defer l.Close()
	if err := appendN(l, rotatedAt, rotatedSize); err != nil {
		return err
	}
	write := func(name string, start, end uint64, opts ledger.ExportOptions) error {
		var b bytes.Buffer
		if err := l.Export(ctx, &b, start, end, opts); err != nil {
			return err
		}
		return os.WriteFile(at(name), b.Bytes(), 0o644)
	}
	if err := write("honest.ledger", 0, rotatedSize, ledger.ExportOptions{}); err != nil {
		return err
	}
	if err := write("honest-tail.ledger", rotatedAt, rotatedSize, ledger.ExportOptions{ConsistencyFrom: rotatedAt}); err != nil {
		return err
	}

	// The forgery: the log's own entries up to the rotation, then its
	// entries from there re-signed by the old key, chained anew.
	tree := testonly.New(rfc6962.DefaultHasher)
	var entries [][]byte
	var prev commit.Digest
	for i := range uint64(rotatedSize) {
		b, err := l.Entry(ctx, i)
		if err != nil {
			return err
		}
		if i >= rotatedAt {
			e, err := entry.Parse(b)
			if err != nil {
				return err
			}
			e.KeyID, e.Prev = oldKey.ID(), prev
			if _, err := e.Sign(oldKey.ID(), oldKey.Sign); err != nil {
				return err
			}
			if b, err = e.Marshal(); err != nil {
				return err
			}
		}
		e, err := entry.Parse(b)
		if err != nil {
			return err
		}
		if prev, err = e.Hash(); err != nil {
			return err
		}
		entries = append(entries, b)
		tree.AppendData(b)
	}
	text := tlog.Checkpoint{Origin: oldKey.Name(), Size: rotatedSize, Hash: tree.Hash()}.Marshal()
	forgedCP, err := note.Sign(&note.Note{Text: string(text)}, oldKey.Signer())
	if err != nil {
		return err
	}
	consistency, err := tree.ConsistencyProof(rotatedAt, rotatedSize)
	if err != nil {
		return err
	}
	export := func(start, end uint64, withProof bool) []byte {
		var b bytes.Buffer
		frame := func(tag string, p []byte) { fmt.Fprintf(&b, "%s %d\n%s\n", tag, len(p), p) }
		b.WriteString(ledger.ExportHeader)
		frame("checkpoint", forgedCP)
		frame("range", fmt.Appendf(nil, "%d %d", start, end))
		var left []byte
		if start > 0 {
			e, _ := entry.Parse(entries[start-1])
			h, _ := e.Hash()
			text, _ := h.MarshalText()
			frame("prev", text)
			// Hashes of the compact range [0, start): here start is
			// 100 = 64 + 32 + 4, three perfect subtrees.
			for _, sub := range [][2]uint64{{0, 64}, {64, 96}, {96, 100}} {
				left = append(left, perfectRoot(entries[sub[0]:sub[1]])...)
			}
		}
		frame("left", left)
		frame("right", nil)
		if withProof {
			frame("consistency", append(fmt.Appendf(nil, "%d\n", start), bytes.Join(consistency, nil)...))
		}
		for _, e := range entries[start:end] {
			frame("entry", e)
		}
		frame("end", nil)
		return b.Bytes()
	}
	inclusion, err := tree.InclusionProof(120, rotatedSize)
	if err != nil {
		return err
	}
	proof := &verify.TlogProof{Extra: entries[120], Index: 120, Proof: inclusion, Checkpoint: forgedCP}
	for name, b := range map[string][]byte{
		"old.vkey":              []byte(oldKey.VerifierKey() + "\n"),
		"new.vkey":              []byte(newKey.VerifierKey() + "\n"),
		"rotation.checkpoint":   rotation,
		"forged.ledger":         export(0, rotatedSize, false),
		"forged-tail.ledger":    export(rotatedAt, rotatedSize, true),
		"forged-120.tlog-proof": proof.Marshal(),
	} {
		if err := os.WriteFile(at(name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// perfectRoot is the RFC 6962 root of a perfect subtree of entries.
func perfectRoot(entries [][]byte) []byte {
	t := testonly.New(rfc6962.DefaultHasher)
	for _, e := range entries {
		t.AppendData(e)
	}
	return t.Hash()
}
