package verify_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/decisionledger/ledger/verify"
	"github.com/transparency-dev/formats/log"
	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/merkle/testonly"
)

// consistencyTrees are an honest tree and a forked one (another first
// leaf) of 40 leaves, and the checkpoint of each tree's first n leaves.
type consistencyTrees struct {
	honest, forked *testonly.Tree
	leaves         [][]byte // the honest tree's leaf hashes
}

func newConsistencyTrees() *consistencyTrees {
	c := &consistencyTrees{honest: testonly.New(rfc6962.DefaultHasher), forked: testonly.New(rfc6962.DefaultHasher)}
	for i := range 40 {
		d := []byte(fmt.Sprintf("entry %d", i))
		c.honest.AppendData(d)
		c.leaves = append(c.leaves, rfc6962.DefaultHasher.HashLeaf(d))
		if i == 0 {
			d = []byte("another entry 0")
		}
		c.forked.AppendData(d)
	}
	return c
}

func treeCheckpoint(t *testonly.Tree, size uint64) *log.Checkpoint {
	return &log.Checkpoint{Origin: "ledger.example.com/log", Size: size, Hash: t.HashAt(size)}
}

// node is the hash of a node of the honest tree.
func (c *consistencyTrees) node(id compact.NodeID) []byte {
	if id.Level == 0 {
		return c.leaves[id.Index]
	}
	return rfc6962.DefaultHasher.HashChildren(c.node(compact.NewNodeID(id.Level-1, 2*id.Index)), c.node(compact.NewNodeID(id.Level-1, 2*id.Index+1)))
}

func (c *consistencyTrees) rangeHashes(begin, end uint64) [][]byte {
	var hs [][]byte
	for _, id := range compact.RangeNodes(begin, end, nil) {
		hs = append(hs, c.node(id))
	}
	return hs
}

// flipped returns a deep copy of hs with one bit of hash i flipped.
func flipped(hs [][]byte, i int) [][]byte {
	out := make([][]byte, len(hs))
	for j, h := range hs {
		out[j] = bytes.Clone(h)
	}
	out[i][7] ^= 0x10
	return out
}

// wantClass checks what err says of the proof: "consistent", "fork"
// (with the honest tree's prefix root) or "unbound".
func wantClass(t *testing.T, err error, want string, prefixRoot []byte) {
	t.Helper()
	var fe *verify.ForkError
	var got string
	switch {
	case err == nil:
		got = "consistent"
	case errors.As(err, &fe):
		got = "fork"
		if errors.Is(err, verify.ErrUnboundProof) {
			t.Errorf("a fork that is also unbound: %v", err)
		}
		if prefixRoot != nil && !bytes.Equal(fe.PrefixRoot, prefixRoot) {
			t.Errorf("fork's prefix root %x, want %x", fe.PrefixRoot, prefixRoot)
		}
	case errors.Is(err, verify.ErrUnboundProof):
		got = "unbound"
	default:
		got = fmt.Sprintf("another error (%v)", err)
	}
	if got != want {
		t.Errorf("%s, want %s: %v", got, want, err)
	}
	var f *verify.Failure
	if err != nil && (!errors.As(err, &f) || f.Check != verify.CheckConsistency) {
		t.Errorf("not a consistency *Failure: %v", err)
	}
}

// A failed RFC 6962 consistency proof is a fork only when its hashes lead
// to the newer signed root; a damaged proof, whatever the checkpoints,
// proves nothing; and a proof from a power-of-two size never proves a
// fork (it holds no hash of the older tree).
func TestConsistencyTellsForkFromDamage(t *testing.T) {
	c := newConsistencyTrees()
	for n := uint64(1); n <= 40; n++ {
		for m := uint64(1); m < n; m++ {
			p, err := c.honest.ConsistencyProof(m, n)
			if err != nil {
				t.Fatal(err)
			}
			older, newer, forkedOlder := treeCheckpoint(c.honest, m), treeCheckpoint(c.honest, n), treeCheckpoint(c.forked, m)
			t.Run(fmt.Sprintf("%d-%d", m, n), func(t *testing.T) {
				wantClass(t, verify.Consistency(older, newer, p), "consistent", nil)
				if m&(m-1) == 0 {
					wantClass(t, verify.Consistency(forkedOlder, newer, p), "unbound", nil)
				} else {
					wantClass(t, verify.Consistency(forkedOlder, newer, p), "fork", c.honest.HashAt(m))
				}
				for i := range p {
					wantClass(t, verify.Consistency(older, newer, flipped(p, i)), "unbound", nil)
					wantClass(t, verify.Consistency(forkedOlder, newer, flipped(p, i)), "unbound", nil)
				}
				wantClass(t, verify.Consistency(older, newer, p[1:]), "unbound", nil)
				wantClass(t, verify.Consistency(older, newer, append(p, p[0])), "unbound", nil)
			})
		}
	}
	same := treeCheckpoint(c.honest, 7)
	wantClass(t, verify.Consistency(treeCheckpoint(c.forked, 7), same, nil), "fork", nil)
	wantClass(t, verify.Consistency(same, same, nil), "consistent", nil)
	wantClass(t, verify.Consistency(treeCheckpoint(c.forked, 7), same, [][]byte{same.Hash}), "unbound", nil)
}

// A prefix proof decides both ways, for every pair of sizes: consistent,
// a proven fork (with the newer tree's prefix root), or, with one bit of
// any hash flipped or a hash missing, nothing.
func TestPrefixConsistency(t *testing.T) {
	c := newConsistencyTrees()
	for n := uint64(0); n <= 40; n++ {
		for m := uint64(0); m <= n; m++ {
			prefix, rest := c.rangeHashes(0, m), c.rangeHashes(m, n)
			older, newer, forkedOlder := treeCheckpoint(c.honest, m), treeCheckpoint(c.honest, n), treeCheckpoint(c.forked, m)
			t.Run(fmt.Sprintf("%d-%d", m, n), func(t *testing.T) {
				wantClass(t, verify.PrefixConsistency(older, newer, prefix, rest), "consistent", nil)
				if m > 0 {
					wantClass(t, verify.PrefixConsistency(forkedOlder, newer, prefix, rest), "fork", c.honest.HashAt(m))
				}
				for i := range prefix {
					wantClass(t, verify.PrefixConsistency(older, newer, flipped(prefix, i), rest), "unbound", nil)
					wantClass(t, verify.PrefixConsistency(forkedOlder, newer, flipped(prefix, i), rest), "unbound", nil)
					wantClass(t, verify.PrefixConsistency(older, newer, prefix[1:], rest), "unbound", nil)
				}
				for i := range rest {
					wantClass(t, verify.PrefixConsistency(older, newer, prefix, flipped(rest, i)), "unbound", nil)
					wantClass(t, verify.PrefixConsistency(forkedOlder, newer, prefix, flipped(rest, i)), "unbound", nil)
					wantClass(t, verify.PrefixConsistency(older, newer, prefix, rest[1:]), "unbound", nil)
				}
				// The proof is not changed by checking it.
				if again := c.rangeHashes(0, m); len(again) != len(prefix) || (m > 0 && !bytes.Equal(again[0], prefix[0])) {
					t.Error("the proof's slice was rewritten")
				}
			})
		}
	}
}
