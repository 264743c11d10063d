package ledger

import (
	"bytes"
	"crypto/rand"
	"testing"
)

// TestHashChildren holds the allocation-free interior hash to the
// transparency-dev/merkle one it replaces on the proof and append paths.
func TestHashChildren(t *testing.T) {
	for range 100 {
		a, b := make([]byte, HashSize), make([]byte, HashSize)
		rand.Read(a)
		rand.Read(b)
		if got, want := hashChildren(a, b), hasher.HashChildren(a, b); !bytes.Equal(got, want) {
			t.Fatalf("hashChildren(%x, %x) = %x, want %x", a, b, got, want)
		}
	}
}
