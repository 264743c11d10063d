package ledger

import (
	"bytes"
	"crypto/sha256"
	"testing"
)

// appendLeaves must not keep references into its argument: openFull
// reuses one buffer for every chunk of leaf hashes.
func TestAppendLeavesCopiesHashes(t *testing.T) {
	a, b := newEdge(), newEdge()
	buf := make([][HashSize]byte, 3)
	var all [][HashSize]byte
	for round := range 5 {
		for i := range buf {
			buf[i] = sha256.Sum256([]byte{byte(round), byte(i)})
		}
		all = append(all, buf...)
		if _, err := a.appendLeaves(buf); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.appendLeaves(all); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.root(), b.root()) {
		t.Fatal("root depends on how the leaf hashes were buffered")
	}
}
