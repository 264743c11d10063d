package ledger

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"
	"unique"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
)

// Approval snapshots. The approval lifecycle's state (approval.go) is a
// function of the log: Open used to rebuild it by reading every entry,
// O(size). A snapshot is that state as the durable entries [0, S) leave
// it, kept by a SnapshotStore, so that Open reads the snapshot and only
// the entries [S, size).
//
// Which state. The sequencer's own state moves when an entry is chained,
// before it is durable, so at no moment while it runs does it describe a
// durable prefix. A snapshot is therefore made from the log itself, in
// the background: the stored snapshot at S0, checked, moved on over the
// durable entries [S0, S) read from the store exactly as Open replays
// them, and written for S. That happens when the durable tree has grown
// by SnapshotEvery entries since the last one (every 65,536 entries by
// default), and costs reading those entries once more and parsing their
// approval entries, off the append path. Two moments are exact without a
// replay: at Open, before the sequencer starts, the state is the durable
// log's, and is written when Open had to read at least 4,096 entries to
// build it; at Close, once the sequencer has stopped with no storage
// failure, every entry chained is durable, and the state is written for
// the final size.
//
// Format (version 1), all integers big-endian:
//
//	"ledger approvals\n"   17 bytes
//	version                1 byte, 1
//	size                   u64: the snapshot is the state of entries [0, size)
//	root                   32 bytes: the tree's root hash at size
//	refused                u64: entries [0, size) the rules refused
//	configured             1 byte, 0 or 1; then pending and execution TTLs,
//	                       i64 nanoseconds each
//	count                  u64, then count approvals in request order:
//	  id [32], request u64, request time i64 (Unix µs), mediator,
//	  principal, action (strings), params digest [32], params size u64,
//	  pending deadline i64, verdict (string), verdict index u64,
//	  approver (string), execution deadline i64, consumption u64,
//	  outcome (string), outcome index u64
//	checksum               32 bytes: SHA-256 of everything before it
//
// A string is a uvarint length and its bytes. A later version changes the
// version byte; a snapshot of a version this build does not know is
// ignored, as is one whose checksum fails, that is malformed, whose size
// is beyond the tree, or whose root is not the one the stored tiles give
// at its size. Open then logs a warning and reads the whole log.
//
// Why the root. It binds the snapshot to the log it describes: a
// snapshot for size S is only used if the tree of the first S stored
// entries has its root, so it cannot describe another history. This is
// what makes a snapshot from a fenced PostgreSQL sequencer (one that lost
// its lease) harmless: it was made from entries [0, S) that were durable
// in that database, and the log only grows, so it describes this log's
// prefix; had the log been different at S, the root would not match.
// storage/postgres refuses a snapshot write from a fenced store as well,
// as it refuses its commits, but correctness does not depend on it.

// SnapshotEvery is how many entries the durable tree grows between two
// approval snapshots, by default.
const SnapshotEvery = 1 << 16

// snapshotOnOpen is the fewest entries Open must have replayed for it to
// write a snapshot at once.
const snapshotOnOpen = 4096

const (
	snapshotMagic   = "ledger approvals\n"
	snapshotVersion = 1
	snapshotHeader  = len(snapshotMagic) + 1 + 8 + HashSize + 8
)

// Why a snapshot is not used; Open logs it and reads the whole log.
var (
	errSnapshotDamaged = errors.New("damaged")
	errSnapshotNewer   = errors.New("from a newer format")
	errSnapshotBeyond  = errors.New("for a size beyond the store")
	errSnapshotOther   = errors.New("of another log")
)

// encodeSnapshot returns the snapshot of s for the tree of size entries
// with the given root, refused entries of which the rules refused.
func (s *approvals) encodeSnapshot(size uint64, root []byte, refused uint64) []byte {
	s.mu.Lock()
	list := make([]approval, 0, len(s.byID))
	for _, a := range s.byID {
		list = append(list, *a)
	}
	configured, pendingTTL, executionTTL := s.configured, s.pendingTTL, s.executionTTL
	s.mu.Unlock()
	slices.SortFunc(list, func(x, y approval) int { return cmp.Compare(x.request, y.request) })

	b := make([]byte, 0, snapshotHeader+17+8+len(list)*200+sha256.Size)
	b = append(b, snapshotMagic...)
	b = append(b, snapshotVersion)
	b = binary.BigEndian.AppendUint64(b, size)
	b = append(b, root...)
	b = binary.BigEndian.AppendUint64(b, refused)
	if configured {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	b = binary.BigEndian.AppendUint64(b, uint64(pendingTTL))
	b = binary.BigEndian.AppendUint64(b, uint64(executionTTL))
	b = binary.BigEndian.AppendUint64(b, uint64(len(list)))
	str := func(v string) {
		b = binary.AppendUvarint(b, uint64(len(v)))
		b = append(b, v...)
	}
	for _, a := range list {
		b = append(b, a.id[:]...)
		b = binary.BigEndian.AppendUint64(b, a.request)
		b = binary.BigEndian.AppendUint64(b, uint64(a.requestTime))
		str(a.mediator.Value())
		str(a.principal.Value())
		str(a.action.Value())
		b = append(b, a.params.Digest[:]...)
		b = binary.BigEndian.AppendUint64(b, uint64(a.params.Size))
		b = binary.BigEndian.AppendUint64(b, uint64(a.pending))
		str(string(a.verdict))
		b = binary.BigEndian.AppendUint64(b, a.verdictIndex)
		approver := ""
		if a.verdict != "" { // the approver is set with the verdict
			approver = a.approver.Value()
		}
		str(approver)
		b = binary.BigEndian.AppendUint64(b, uint64(a.execution))
		b = binary.BigEndian.AppendUint64(b, a.consumption)
		str(string(a.outcome))
		b = binary.BigEndian.AppendUint64(b, a.outcomeIndex)
	}
	sum := sha256.Sum256(b)
	return append(b, sum[:]...)
}

// snapshotReader reads a snapshot's fields; the first error sticks.
type snapshotReader struct {
	b   []byte
	err error
}

func (r *snapshotReader) bytes(n int) []byte {
	if r.err != nil || len(r.b) < n {
		r.err = errSnapshotDamaged
		return make([]byte, n)
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *snapshotReader) u64() uint64 { return binary.BigEndian.Uint64(r.bytes(8)) }

func (r *snapshotReader) i64() int64 { return int64(r.u64()) }

func (r *snapshotReader) str() string {
	n, k := binary.Uvarint(r.b)
	if r.err != nil || k <= 0 || n > uint64(len(r.b)-k) {
		r.err = errSnapshotDamaged
		return ""
	}
	r.b = r.b[k:]
	return string(r.bytes(int(n)))
}

// minApproval is the fewest bytes one approval takes in a snapshot.
const minApproval = 32 + 8 + 8 + 3 + 32 + 8 + 8 + 1 + 8 + 1 + 8 + 8 + 1 + 8

// decodeSnapshot parses a snapshot, checking its checksum and that every
// field is one the state can hold for entries [0, size). It returns the
// size, the root and the refused count it states, and the state.
func decodeSnapshot(b []byte) (size uint64, root []byte, refused uint64, s *approvals, err error) {
	if len(b) < len(snapshotMagic)+1 || string(b[:len(snapshotMagic)]) != snapshotMagic {
		return 0, nil, 0, nil, fmt.Errorf("%w: not an approval snapshot", errSnapshotDamaged)
	}
	if v := b[len(snapshotMagic)]; v != snapshotVersion {
		if v > snapshotVersion {
			return 0, nil, 0, nil, fmt.Errorf("%w: version %d, this build reads %d", errSnapshotNewer, v, snapshotVersion)
		}
		return 0, nil, 0, nil, fmt.Errorf("%w: version %d", errSnapshotDamaged, v)
	}
	if len(b) < snapshotHeader+sha256.Size {
		return 0, nil, 0, nil, fmt.Errorf("%w: %d bytes", errSnapshotDamaged, len(b))
	}
	body, sum := b[:len(b)-sha256.Size], b[len(b)-sha256.Size:]
	if got := sha256.Sum256(body); !bytes.Equal(got[:], sum) {
		return 0, nil, 0, nil, fmt.Errorf("%w: checksum mismatch", errSnapshotDamaged)
	}
	r := &snapshotReader{b: body[len(snapshotMagic)+1:]}
	size = r.u64()
	root = bytes.Clone(r.bytes(HashSize))
	refused = r.u64()
	s = newApprovals()
	switch r.bytes(1)[0] {
	case 0:
	case 1:
		s.configured = true
	default:
		r.err = errSnapshotDamaged
	}
	s.pendingTTL, s.executionTTL = time.Duration(r.i64()), time.Duration(r.i64())
	count := r.u64()
	if r.err == nil && count > uint64(len(r.b)/minApproval) {
		r.err = errSnapshotDamaged
	}
	for i := uint64(0); i < count && r.err == nil; i++ {
		a := &approval{}
		a.id = commit.Digest(r.bytes(32))
		a.request, a.requestTime = r.u64(), r.i64()
		a.mediator, a.principal, a.action = unique.Make(r.str()), unique.Make(r.str()), unique.Make(r.str())
		a.params.Digest = commit.Digest(r.bytes(32))
		ps := r.u64()
		a.params.Size = int(ps)
		a.pending = r.i64()
		a.verdict = entry.Verdict(r.str())
		a.verdictIndex = r.u64()
		approver := r.str()
		a.execution, a.consumption = r.i64(), r.u64()
		a.outcome = entry.Result(r.str())
		a.outcomeIndex = r.u64()
		if r.err != nil {
			break
		}
		ok := a.request < size && ps <= uint64(commit.MaxSafeInteger) && s.byID[a.id] == nil
		switch a.verdict {
		case "":
			ok = ok && approver == "" && a.verdictIndex == 0 && a.execution == 0 && a.consumption == 0
		case entry.Approve, entry.Reject:
			ok = ok && approver != "" && a.request < a.verdictIndex && a.verdictIndex < size
			a.approver = unique.Make(approver)
		default:
			ok = false
		}
		if a.consumption != 0 {
			ok = ok && a.verdict == entry.Approve && a.verdictIndex < a.consumption && a.consumption < size && s.byConsumption[a.consumption] == nil
			s.byConsumption[a.consumption] = a
		}
		switch a.outcome {
		case "":
			ok = ok && a.outcomeIndex == 0
		case entry.Succeeded, entry.Failed, entry.Unknown:
			ok = ok && a.consumption != 0 && a.consumption < a.outcomeIndex && a.outcomeIndex < size
		default:
			ok = false
		}
		if !ok {
			r.err = fmt.Errorf("%w: approval %d (request %d) is not one the log can hold", errSnapshotDamaged, i, a.request)
			break
		}
		s.byID[a.id] = a
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%w: %d bytes after the last approval", errSnapshotDamaged, len(r.b))
	}
	if r.err != nil {
		return 0, nil, 0, nil, r.err
	}
	return size, root, refused, s, nil
}

// readSnapshot reads the stored snapshot and checks it against the store
// of size entries: its checksum, its format, its size (at most size, and
// the one the store says) and its root (the one the stored tiles give).
func (l *Ledger) readSnapshot(ctx context.Context, ss SnapshotStore, size uint64) (*approvals, uint64, uint64, error) {
	at, b, err := ss.Snapshot(ctx)
	if err != nil {
		return nil, 0, 0, err
	}
	n, root, refused, s, err := decodeSnapshot(b)
	switch {
	case err != nil:
		return nil, 0, 0, err
	case n != at:
		return nil, 0, 0, fmt.Errorf("%w: stored for size %d, says %d", errSnapshotDamaged, at, n)
	case n > size:
		return nil, 0, 0, fmt.Errorf("%w: size %d, the tree has %d entries", errSnapshotBeyond, n, size)
	}
	tree, err := newTileReader(ctx, l.store).rootAt(n)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("ledger: the root at size %d: %w", n, err)
	}
	if !bytes.Equal(tree, root) {
		return nil, 0, 0, fmt.Errorf("%w: its root at size %d is %x, the stored tiles give %x", errSnapshotOther, n, root, tree)
	}
	return s, refused, n, nil
}

// restoreApprovals builds the approval state of the durable entries
// [0, size): from the stored snapshot if there is a usable one, and the
// entries after it; else from every entry. It returns the state, the
// entries the rules refused, and the size of the snapshot used (0 for
// none).
func (l *Ledger) restoreApprovals(ctx context.Context, size uint64) (*approvals, uint64, uint64, error) {
	if ss, ok := l.store.(SnapshotStore); ok {
		s, refused, at, err := l.readSnapshot(ctx, ss, size)
		switch {
		case err == nil:
			more, err := s.replay(ctx, l.store, at, size)
			if err != nil {
				return nil, 0, 0, err
			}
			return s, refused + more, at, nil
		case ctx.Err() != nil:
			return nil, 0, 0, err
		case errors.Is(err, ErrNotFound):
			l.log.InfoContext(ctx, "ledger: no approval snapshot; reading every entry", "size", size)
		default:
			l.log.WarnContext(ctx, "ledger: the approval snapshot is not used; reading every entry", "size", size, "error", err)
		}
	}
	s, refused, err := rebuildApprovals(ctx, l.store, size)
	return s, refused, 0, err
}

// snapshotLoop writes a snapshot whenever the durable tree has grown by
// opts.snapshotEvery entries since the last one, until Close.
func (l *Ledger) snapshotLoop(ss SnapshotStore) {
	defer l.done.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-l.stop
		cancel()
	}()
	t := time.NewTicker(l.opts.snapshotPoll)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		if l.Size() < l.snapSize.Load()+l.opts.snapshotEvery {
			continue
		}
		if err := l.writeSnapshot(ctx, ss); err != nil && ctx.Err() == nil {
			l.log.Warn("ledger: writing the approval snapshot failed", "error", err)
		}
	}
}

// writeSnapshot writes the snapshot of the durable tree as it is now:
// the stored snapshot moved on over the entries after it.
func (l *Ledger) writeSnapshot(ctx context.Context, ss SnapshotStore) error {
	l.mu.Lock()
	e := l.edge
	l.mu.Unlock()
	size, root := e.size(), e.root()
	s, refused, at, err := l.readSnapshot(ctx, ss, size)
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		// Open logged why, or wrote the snapshot since; start over.
		s, refused, at = newApprovals(), 0, 0
	}
	more, err := s.replay(ctx, l.store, at, size)
	if err != nil {
		return err
	}
	if err := ss.PutSnapshot(ctx, size, s.encodeSnapshot(size, root, refused+more)); err != nil {
		return err
	}
	l.snapSize.Store(size)
	l.log.DebugContext(ctx, "ledger: approval snapshot written", "size", size, "replayed", size-at)
	return nil
}

// putSnapshot writes snap, the snapshot for size, and records it.
func (l *Ledger) putSnapshot(ctx context.Context, ss SnapshotStore, size uint64, snap []byte) {
	if err := ss.PutSnapshot(ctx, size, snap); err != nil {
		if ctx.Err() == nil {
			l.log.WarnContext(ctx, "ledger: writing the approval snapshot failed", "size", size, "error", err)
		}
		return
	}
	l.snapSize.Store(size)
}
