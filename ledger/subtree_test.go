package ledger_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"

	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/storage/memory"
)

// The proofs the ledger serves read the subtrees of the tiles above level
// 0 from a cache kept between proofs: they are the proofs a fresh reader
// computes from the tiles, and verify, at sizes where those tiles are
// full and partial (one cache for every size, as the ledger's grows).
func TestProofsWithSubtreeCache(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	e := ledger.NewEdge()
	c := ledger.NewSubtreeCache()
	rng := rand.New(rand.NewPCG(29, 1))
	var start uint64
	// Past 65,536 entries the tree has a full level-1 tile and a partial
	// level-2 one.
	for _, size := range []uint64{600, 5_000, 65_536, 70_001, 140_000} {
		bt := ledger.Batch{Start: start}
		for i := start; i < size; i++ {
			entry := strconv.AppendUint([]byte("entry "), i, 10)
			bt.Entries = append(bt.Entries, entry)
			bt.LeafHashes = append(bt.LeafHashes, leafHash(entry))
		}
		var err error
		if bt.Tiles, err = e.AppendLeaves(bt.LeafHashes); err != nil {
			t.Fatal(err)
		}
		if err := s.Commit(ctx, bt); err != nil {
			t.Fatal(err)
		}
		start = size
		root := e.Root()
		for range 200 {
			index, size1 := rng.Uint64N(size), 1+rng.Uint64N(size)
			want, err := ledger.InclusionProofFromTiles(ctx, s, index, size)
			if err != nil {
				t.Fatal(err)
			}
			got, consistency, err := ledger.ProofsWithSubtrees(ctx, s, c, index, size1, size)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.EqualFunc(got, want, func(a, b []byte) bool { return string(a) == string(b) }) {
				t.Fatalf("size %d: the inclusion proof of %d with the cache differs from the one without", size, index)
			}
			lh := leafHash(strconv.AppendUint([]byte("entry "), index, 10))
			if err := proof.VerifyInclusion(rfc6962.DefaultHasher, index, size, lh[:], got, root); err != nil {
				t.Fatalf("size %d, index %d: %v", size, index, err)
			}
			root1, err := ledger.RootFromTiles(ctx, s, size1)
			if err != nil {
				t.Fatal(err)
			}
			if err := proof.VerifyConsistency(rfc6962.DefaultHasher, size1, size, consistency, root1, root); err != nil {
				t.Fatalf("consistency %d -> %d: %v", size1, size, err)
			}
		}
	}
}
