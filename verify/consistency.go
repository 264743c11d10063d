package verify

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/transparency-dev/formats/log"
	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
)

// Consistency proofs, and what a failed one proves.
//
// A consistency proof is unsigned: ledgerd's /v1/consistency answer, or
// nodes a monitor read from the log's tiles, pass through caches, CDNs and
// disks that can damage them. A proof that fails to verify therefore
// proves, by itself, only that something on the way is wrong. It proves a
// fork only when its hashes lead to the newer checkpoint's signed root —
// which binds them to the newer tree (finding other hashes that lead to
// the same root means finding a SHA-256 collision) — while the root they
// give for the newer tree's first older.Size leaves is not the older
// checkpoint's root. Consistency and PrefixConsistency return a
// *Failure wrapping a *ForkError then, and one wrapping ErrUnboundProof
// when the hashes do not lead to the newer root.

// ErrUnboundProof classifies a proof whose hashes do not lead to the newer
// checkpoint's root: it proves neither consistency nor a fork (a damaged
// or stale proof or tile, or one of another tree).
var ErrUnboundProof = errors.New("the proof's hashes do not lead to the newer checkpoint's root: it proves neither that the newer tree extends the older nor that it does not")

// ForkError is proof that two checkpoints, both signed, are of two
// histories: the tree of the newer one does not extend the older one's.
type ForkError struct {
	OlderSize, NewerSize uint64
	// PrefixRoot is the root of the first OlderSize leaves of the newer
	// tree, as the proof bound to the newer root gives it; the older
	// checkpoint has another. Nil for two checkpoints of the same size,
	// which need no proof.
	PrefixRoot []byte
}

func (e *ForkError) Error() string {
	if e.OlderSize == e.NewerSize {
		return fmt.Sprintf("fork: two checkpoints of tree size %d with different roots", e.OlderSize)
	}
	return fmt.Sprintf("fork: the tree of size %d does not extend the tree of size %d: its first %d leaves have another root", e.NewerSize, e.OlderSize, e.OlderSize)
}

// Consistency checks that the tree of checkpoint newer extends the tree of
// checkpoint older, both already opened with the trusted key, by the RFC
// 6962 consistency proof p (empty between equal sizes or from size 0,
// whose root must then be the empty tree's: ErrEmptyTreeRoot).
// On failure the *Failure wraps a *ForkError if p proves a fork (package
// comment), ErrUnboundProof if it proves nothing. When older.Size is a
// power of two the proof holds no hash for the older tree (RFC 9162
// §2.1.4.1 uses the older root itself), so a failed proof between such
// sizes never proves a fork: PrefixConsistency can.
func Consistency(older, newer *log.Checkpoint, p [][]byte) error {
	if older.Size > newer.Size {
		return &Failure{Index: NoIndex, Part: "consistency proof", Check: CheckConsistency,
			Err: fmt.Errorf("trusted checkpoint of size %d is newer than the one of size %d", older.Size, newer.Size)}
	}
	if older.Size == 0 && !bytes.Equal(older.Hash, hasher.EmptyRoot()) {
		// proof.VerifyConsistency takes any root for size 0.
		return &Failure{Index: NoIndex, Part: "checkpoint", Check: CheckConsistency, Err: ErrEmptyTreeRoot}
	}
	err := proof.VerifyConsistency(hasher, older.Size, newer.Size, p, older.Hash, newer.Hash)
	if err == nil {
		return nil
	}
	// The proof library decides consistency; what follows only tells a
	// proven fork from a proof that proves nothing.
	var why error = ErrUnboundProof
	if !errors.As(err, new(proof.RootMismatchError)) { // its text lists both roots' bytes
		why = fmt.Errorf("%w (%v)", ErrUnboundProof, err)
	}
	switch {
	case older.Size == newer.Size && len(p) == 0:
		why = &ForkError{OlderSize: older.Size, NewerSize: newer.Size}
	case older.Size > 0 && older.Size < newer.Size && older.Size&(older.Size-1) != 0:
		if fr, sr, ok := consistencyRoots(older.Size, newer.Size, p); ok && bytes.Equal(sr, newer.Hash) && !bytes.Equal(fr, older.Hash) {
			why = &ForkError{OlderSize: older.Size, NewerSize: newer.Size, PrefixRoot: fr}
		}
	}
	return &Failure{Index: NoIndex, Part: "consistency proof", Check: CheckConsistency, Err: why}
}

// consistencyRoots computes, from the consistency proof p between sizes
// 0 < size1 < size2, size1 not a power of two, the roots it gives for
// both trees (RFC 9162 §2.1.4.2, fr and sr; for a power of two the
// verifier would prepend the older root itself to p, and fr would be
// that root); ok is false for a proof of the wrong shape.
func consistencyRoots(size1, size2 uint64, p [][]byte) (fr, sr []byte, ok bool) {
	if len(p) == 0 {
		return nil, nil, false
	}
	for _, h := range p {
		if len(h) != hasher.Size() {
			return nil, nil, false
		}
	}
	fn, sn := size1-1, size2-1
	for fn&1 == 1 {
		fn, sn = fn>>1, sn>>1
	}
	fr, sr = p[0], p[0]
	for _, c := range p[1:] {
		if sn == 0 {
			return nil, nil, false
		}
		if fn&1 == 1 || fn == sn {
			fr, sr = hasher.HashChildren(c, fr), hasher.HashChildren(c, sr)
			for fn&1 == 0 && fn != 0 {
				fn, sn = fn>>1, sn>>1
			}
		} else {
			sr = hasher.HashChildren(sr, c)
		}
		fn, sn = fn>>1, sn>>1
	}
	return fr, sr, sn == 0
}

// PrefixConsistency checks a prefix proof: prefix holds the hashes of the
// compact range [0, older.Size) of newer's tree and rest those of
// [older.Size, newer.Size), each as compact.RangeNodes lists them (left
// to right). Merged, they must give newer's root, which binds them to
// newer's tree; then the root of prefix alone is the root of the newer
// tree's first older.Size leaves, and it is older's root exactly when
// newer extends older. So the one proof decides both ways, whatever the
// sizes: nil (consistent), a *Failure wrapping a *ForkError (a proven
// fork), or one wrapping ErrUnboundProof (the hashes prove nothing).
func PrefixConsistency(older, newer *log.Checkpoint, prefix, rest [][]byte) error {
	fail := func(err error) error {
		return &Failure{Index: NoIndex, Part: "prefix proof", Check: CheckConsistency, Err: err}
	}
	m, n := older.Size, newer.Size
	if m > n {
		return fail(fmt.Errorf("trusted checkpoint of size %d is newer than the one of size %d", m, n))
	}
	if len(prefix) != compact.RangeSize(0, m) || len(rest) != compact.RangeSize(m, n) {
		return fail(fmt.Errorf("%w: it has %d+%d hashes, want %d+%d", ErrUnboundProof, len(prefix), len(rest), compact.RangeSize(0, m), compact.RangeSize(m, n)))
	}
	for _, h := range append(append([][]byte{}, prefix...), rest...) {
		if len(h) != hasher.Size() {
			return fail(fmt.Errorf("%w: a hash of %d bytes", ErrUnboundProof, len(h)))
		}
	}
	prefixRoot, err := rangeRoot(m, prefix)
	if err != nil {
		return fail(err)
	}
	// A compact range keeps and rewrites the slice it is built from: give
	// it copies, never the caller's proof.
	whole, err := rangeFactory.NewRange(0, m, append([][]byte(nil), prefix...))
	if err != nil {
		return fail(err)
	}
	tail, err := rangeFactory.NewRange(m, n, append([][]byte(nil), rest...))
	if err != nil {
		return fail(err)
	}
	if err := whole.AppendRange(tail, nil); err != nil {
		return fail(err)
	}
	root, err := rangeRoot(n, whole.Hashes())
	if err != nil {
		return fail(err)
	}
	switch {
	case !bytes.Equal(root, newer.Hash):
		return fail(ErrUnboundProof)
	case !bytes.Equal(prefixRoot, older.Hash):
		return fail(&ForkError{OlderSize: m, NewerSize: n, PrefixRoot: prefixRoot})
	}
	return nil
}

// rangeRoot is the root of the tree of size end whose compact range
// [0, end) is hashes.
func rangeRoot(end uint64, hashes [][]byte) ([]byte, error) {
	if end == 0 {
		return hasher.EmptyRoot(), nil
	}
	r, err := rangeFactory.NewRange(0, end, append([][]byte(nil), hashes...))
	if err != nil {
		return nil, err
	}
	return r.GetRootHash(nil)
}

// ErrEmptyTreeRoot: a checkpoint of tree size 0 whose root is not the
// empty tree's, SHA-256 of nothing (RFC 9162 §2.1.1): no log's.
var ErrEmptyTreeRoot = errors.New("a checkpoint of tree size 0 does not have the empty tree's root hash (SHA-256 of nothing)")
