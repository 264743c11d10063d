package ledger

import (
	"context"
	"time"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
)

// The tests of this package are external (package ledger_test) because they
// run the ledger on the stores in storage/, which import this package. This
// file lends them the few internals they check directly, and nothing else.

// StopSequencer stops l's sequencer without the final Publish of Close,
// as a crash would: entries made durable after the latest checkpoint stay
// uncovered. l must not be used afterwards.
// A later Close does nothing.
func (l *Ledger) StopSequencer() {
	l.closed.Do(func() {
		close(l.stop)
		l.done.Wait()
	})
}

// ParseCheckpoint is parseCheckpoint: signed opened with key alone, as
// Open opens the latest checkpoint.
func ParseCheckpoint(signed []byte, key *Key) error {
	_, err := parseCheckpoint(signed, key)
	return err
}

// PolicySetOf is policySetOf: the policy set an entry's bytes name, read
// without parsing the entry.
func PolicySetOf(b []byte) (commit.Digest, bool, error) { return policySetOf(b) }

// Approvals is the approval lifecycle state (approval.go).
type Approvals = approvals

// NewApprovals returns an empty state with the TTLs of an approval_config.
func NewApprovals(pendingTTL, executionTTL time.Duration) *Approvals {
	s := newApprovals()
	s.configured, s.pendingTTL, s.executionTTL = true, pendingTTL, executionTTL
	return s
}

// RebuildApprovals is rebuildApprovals: the state Open rebuilds from the
// first size entries of store, and the number of entries it refused.
func RebuildApprovals(ctx context.Context, store Store, size uint64) (*Approvals, uint64, error) {
	return rebuildApprovals(ctx, store, size)
}

// Admit is admit: e checked against the state, and the change to make
// once its entry hash is known.
func (s *approvals) Admit(e *entry.Entry, rebuild bool) (func(hash commit.Digest), error) {
	return s.admit(e, rebuild)
}

// SnapshotV1Of is the version 1 snapshot (the format before closed
// approvals were reduced) of the first size entries of store.
func SnapshotV1Of(ctx context.Context, store Store, size uint64) ([]byte, error) {
	return snapshotV1Of(ctx, store, size)
}

// Len is the number of approvals in the state.
func (s *approvals) Len() int { return s.count() }

// Closed is the number of closed approvals the state holds reduced.
func (s *approvals) Closed() int { return len(s.closed) }

// Status returns the verdict and the consumption index (0: none) of the
// approval id, and whether the state holds it.
func (s *approvals) Status(id commit.Digest) (verdict entry.Verdict, consumption uint64, ok bool) {
	if a := s.open[id]; a != nil {
		return a.verdict, 0, true
	}
	c, ok := s.closed[id]
	if !ok || c.state == closedExpired {
		return "", 0, ok
	}
	return c.verdict(), c.consumption, true
}

// Edge is the right edge of a tree (tree.go), for building tiles without
// a ledger.
type Edge = edge

// NewEdge returns the edge of the empty tree.
func NewEdge() *Edge { return newEdge() }

// AppendLeaves is appendLeaves: e extended by leaf hashes, and every tile
// they changed.
func (e *edge) AppendLeaves(leafHashes [][HashSize]byte) ([]Tile, error) {
	return e.appendLeaves(leafHashes)
}

// Root is the root hash of e's tree.
func (e *edge) Root() []byte { return e.root() }

// RootFromTiles is the root of the tree of size entries, read from
// store's tiles as proofs are.
func RootFromTiles(ctx context.Context, store Store, size uint64) ([]byte, error) {
	return newTileReader(ctx, store).rootAt(size)
}

// InclusionProofFromTiles is the inclusion proof of index in the tree of
// size entries, read from store's tiles with a fresh reader.
func InclusionProofFromTiles(ctx context.Context, store Store, index, size uint64) ([][]byte, error) {
	return newTileReader(ctx, store).inclusionProof(index, size)
}

// CountedBytes chains and signs rec alone, as the sequencer does, and
// returns the length of its entry's bytes and what the batch counted for
// it against MaxBatchBytes.
func (l *Ledger) CountedBytes(rec Record) (entryBytes, counted int, err error) {
	r, err := l.prepare(rec)
	if err != nil {
		return 0, 0, err
	}
	var p pendingBatch
	if err := p.add(r, &chainState{}, time.Now); err != nil {
		return 0, 0, err
	}
	p.signing.Add(1)
	signJobs(l.key, []signJob{{r: r, done: &p.signing}})
	return len(r.leaf), p.bytes, r.err
}

// WithSnapshots returns o with an approval snapshot written every every
// entries, looked at every poll.
func WithSnapshots(o Options, every uint64, poll time.Duration) Options {
	o.snapshotEvery, o.snapshotPoll = every, poll
	return o
}

// EncodeSnapshot is encodeSnapshot.
func (s *approvals) EncodeSnapshot(size uint64, root []byte, refused uint64) []byte {
	return s.encodeSnapshot(size, root, refused)
}

// DecodeSnapshot is decodeSnapshot.
func DecodeSnapshot(b []byte) (size uint64, root []byte, refused uint64, s *Approvals, err error) {
	return decodeSnapshot(b)
}

// ApprovalState is the ledger's approval state, and the entries Open
// found refused.
func (l *Ledger) ApprovalState() (*Approvals, uint64) { return l.approvals, l.refused }

// SnapshotSize is the size of the latest approval snapshot l read or
// wrote (0 for none).
func (l *Ledger) SnapshotSize() uint64 { return l.snapSize.Load() }

// Queued is the number of records waiting in l's queue for the sequencer.
func (l *Ledger) Queued() int { return len(l.queue) }

// SubtreeCache is the ledger's cache of the subtrees of the tiles above
// level 0, for ProofsWithSubtrees.
type SubtreeCache = subtreeCache

// NewSubtreeCache returns an empty cache.
func NewSubtreeCache() *SubtreeCache { return newSubtreeCache() }

// ProofsWithSubtrees is the inclusion proof of index and the consistency
// proof from size1, in the tree of size entries, read as the ledger's
// proofs are, with c.
func ProofsWithSubtrees(ctx context.Context, store Store, c *SubtreeCache, index, size1, size uint64) (inclusion, consistency [][]byte, err error) {
	r := newTileReader(ctx, store)
	r.subtrees = c
	if inclusion, err = r.inclusionProof(index, size); err != nil {
		return nil, nil, err
	}
	consistency, err = r.consistencyProof(size1, size)
	return inclusion, consistency, err
}
