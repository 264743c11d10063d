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
// the final size. A log without approval entries (the state empty: no
// approval_config, no approval) gets a snapshot only when it saves the
// next Open at least 4,096 entries since the stored one, as at Open and
// in the background: not at the Close of every short run (every
// sequencer's term in a cluster).
//
// Format (version 2), all integers big-endian:
//
//	"ledger approvals\n"   17 bytes
//	version                1 byte, 2
//	size                   u64: the snapshot is the state of entries [0, size)
//	root                   32 bytes: the tree's root hash at size
//	refused                u64: entries [0, size) the rules refused
//	configured             1 byte, 0 or 1; then pending and execution TTLs,
//	                       i64 nanoseconds each
//	settled                i64 (Unix µs), then the latest lifecycle entry
//	                       admitted: 1 byte 0 or 1 (none, one), its index
//	                       u64 and time i64 (approval.go, "When")
//	open count             u64, then the open approvals in request order:
//	  id [32], request u64, request time i64 (Unix µs), mediator,
//	  principal, action (strings), params digest [32], params size u64,
//	  pending deadline i64, verdict (string), verdict index u64,
//	  approver (string), execution deadline i64, consumption u64,
//	  outcome (string), outcome index u64
//	mediators              u64 count, then that many strings: the table
//	                       of the consumed approvals' mediators
//	closed count           u64, then the closed approvals in request order:
//	  id [32], request u64, pending deadline i64, verdict index u64,
//	  execution deadline i64, consumption u64, outcome index u64,
//	  mediator u32 (its number in the table), state u8 (1 expired,
//	  2 denied, 3 lapsed, 4 consumed), outcome u8 (0 none, 1 unknown,
//	  2 succeeded, 3 failed)
//	checksum               32 bytes: SHA-256 of everything before it
//
// An open approval has no consumption and no outcome, and no verdict but
// approve. Version 1, which kept every approval whole (the open layout,
// for all of them, after the TTLs; no settled time, mediators or closed
// list), is still read: its denied and consumed approvals are reduced as
// it is read, its expired ones by the next lifecycle entry replayed or
// chained after it.
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
	snapshotVersion = 2
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
//
// It holds s.mu while it encodes: the closed approvals, most of the state
// on a log with many approvals, are ordered by a list of their ids and
// requests (40 bytes each) and read from the map as they are written,
// not copied whole first, which would double the state in memory while
// the snapshot is made (the background snapshot already holds a second
// state, the stored one moved on). Its callers hold a state no other
// goroutine writes: Open's and Close's, around the sequencer, and the
// background snapshot's own.
func (s *approvals) encodeSnapshot(size uint64, root []byte, refused uint64) []byte {
	type closedRef struct {
		request uint64
		id      commit.Digest
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	open := make([]approval, 0, len(s.open))
	for _, a := range s.open {
		open = append(open, *a)
	}
	list := make([]closedRef, 0, len(s.closed))
	for id, c := range s.closed {
		list = append(list, closedRef{c.request, id})
	}
	mediators := make([]string, len(s.mediators))
	for i, m := range s.mediators {
		mediators[i] = m.Value()
	}
	configured, pendingTTL, executionTTL := s.configured, s.pendingTTL, s.executionTTL
	settled, last := s.settled, s.last
	if last.ok && last.index >= size {
		// Admitted, but not chained (its batch failed, or signing it):
		// not an entry of [0, size).
		last.ok, last.index, last.time = false, 0, 0
	}
	slices.SortFunc(open, func(x, y approval) int { return cmp.Compare(x.request, y.request) })
	slices.SortFunc(list, func(x, y closedRef) int { return cmp.Compare(x.request, y.request) })

	b := make([]byte, 0, snapshotHeader+17+25+8+len(open)*200+16+len(mediators)*20+8+len(list)*closedSize+sha256.Size)
	b = append(b, snapshotMagic...)
	b = append(b, snapshotVersion)
	b = binary.BigEndian.AppendUint64(b, size)
	b = append(b, root...)
	b = binary.BigEndian.AppendUint64(b, refused)
	flag := func(v bool) {
		if v {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
	}
	flag(configured)
	b = binary.BigEndian.AppendUint64(b, uint64(pendingTTL))
	b = binary.BigEndian.AppendUint64(b, uint64(executionTTL))
	b = binary.BigEndian.AppendUint64(b, uint64(settled))
	flag(last.ok)
	b = binary.BigEndian.AppendUint64(b, last.index)
	b = binary.BigEndian.AppendUint64(b, uint64(last.time))
	str := func(v string) {
		b = binary.AppendUvarint(b, uint64(len(v)))
		b = append(b, v...)
	}
	b = binary.BigEndian.AppendUint64(b, uint64(len(open)))
	for _, a := range open {
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
	b = binary.BigEndian.AppendUint64(b, uint64(len(mediators)))
	for _, m := range mediators {
		str(m)
	}
	b = binary.BigEndian.AppendUint64(b, uint64(len(list)))
	for _, ref := range list {
		c := s.closed[ref.id]
		b = append(b, ref.id[:]...)
		b = binary.BigEndian.AppendUint64(b, c.request)
		b = binary.BigEndian.AppendUint64(b, uint64(c.pending))
		b = binary.BigEndian.AppendUint64(b, c.verdictIndex)
		b = binary.BigEndian.AppendUint64(b, uint64(c.execution))
		b = binary.BigEndian.AppendUint64(b, c.consumption)
		b = binary.BigEndian.AppendUint64(b, c.outcomeIndex)
		b = binary.BigEndian.AppendUint32(b, c.mediator)
		b = append(b, byte(c.state), c.outcome)
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

func (r *snapshotReader) u32() uint32 { return binary.BigEndian.Uint32(r.bytes(4)) }

func (r *snapshotReader) flag() bool {
	switch r.bytes(1)[0] {
	case 0:
		return false
	case 1:
		return true
	}
	r.err = errSnapshotDamaged
	return false
}

// minApproval is the fewest bytes one whole approval takes in a
// snapshot, closedSize the bytes of a closed one.
const (
	minApproval = 32 + 8 + 8 + 3 + 32 + 8 + 8 + 1 + 8 + 1 + 8 + 8 + 1 + 8
	closedSize  = 32 + 6*8 + 4 + 2
)

// decodeSnapshot parses a snapshot of version 2 or 1, checking its
// checksum and that every field is one the state can hold for entries
// [0, size). It returns the size, the root and the refused count it
// states, and the state.
func decodeSnapshot(b []byte) (size uint64, root []byte, refused uint64, s *approvals, err error) {
	if len(b) < len(snapshotMagic)+1 || string(b[:len(snapshotMagic)]) != snapshotMagic {
		return 0, nil, 0, nil, fmt.Errorf("%w: not an approval snapshot", errSnapshotDamaged)
	}
	version := b[len(snapshotMagic)]
	switch {
	case version > snapshotVersion:
		return 0, nil, 0, nil, fmt.Errorf("%w: version %d, this build reads %d", errSnapshotNewer, version, snapshotVersion)
	case version < 1:
		return 0, nil, 0, nil, fmt.Errorf("%w: version %d", errSnapshotDamaged, version)
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
	s.configured = r.flag()
	s.pendingTTL, s.executionTTL = time.Duration(r.i64()), time.Duration(r.i64())
	if version >= 2 {
		s.settled = r.i64()
		s.last.ok, s.last.index, s.last.time = r.flag(), r.u64(), r.i64()
		if r.err == nil && (s.last.ok && s.last.index >= size || !s.last.ok && (s.last.index != 0 || s.last.time != 0)) {
			r.err = fmt.Errorf("%w: the latest lifecycle entry is not one the log can hold", errSnapshotDamaged)
		}
	}
	ids := map[commit.Digest]bool{}
	var prev uint64 // the previous approval's request: they are in request order
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
		ok := a.request < size && ps <= uint64(commit.MaxSafeInteger) && !ids[a.id] && (i == 0 || a.request > prev)
		prev = a.request
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
			ok = ok && a.verdict == entry.Approve && a.verdictIndex < a.consumption && a.consumption < size
		}
		switch a.outcome {
		case "":
			ok = ok && a.outcomeIndex == 0
		case entry.Succeeded, entry.Failed, entry.Unknown:
			ok = ok && a.consumption != 0 && a.consumption < a.outcomeIndex && a.outcomeIndex < size
		default:
			ok = false
		}
		closes := a.verdict == entry.Reject || a.consumption != 0
		if !ok || version >= 2 && closes {
			r.err = fmt.Errorf("%w: approval %d (request %d) is not one the log can hold", errSnapshotDamaged, i, a.request)
			break
		}
		ids[a.id] = true
		switch {
		case a.verdict == entry.Reject: // version 1 only
			s.addOpen(a)
			s.close(a, closedApproval{state: closedDenied})
		case a.consumption != 0: // version 1 only
			s.addOpen(a)
			s.consumed(a, a.consumption, a.mediator)
			if a.outcome != "" {
				c := s.closed[a.id]
				c.outcome, c.outcomeIndex = resultNumber(a.outcome), a.outcomeIndex
				s.closed[a.id] = c
			}
		default:
			s.addOpen(a)
		}
	}
	if version >= 2 {
		s.decodeClosed(r, size, ids)
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%w: %d bytes after the last approval", errSnapshotDamaged, len(r.b))
	}
	if r.err == nil {
		for i := 1; i < len(s.consumptions); i++ {
			if s.consumptions[i] == s.consumptions[i-1] {
				r.err = fmt.Errorf("%w: two approvals consumed at %d", errSnapshotDamaged, s.consumptions[i])
			}
		}
	}
	if r.err != nil {
		return 0, nil, 0, nil, r.err
	}
	return size, root, refused, s, nil
}

// decodeClosed reads a version 2 snapshot's mediators and closed
// approvals into s, for entries [0, size); ids are the open approvals'.
func (s *approvals) decodeClosed(r *snapshotReader, size uint64, ids map[commit.Digest]bool) {
	count := r.u64()
	if r.err == nil && count > uint64(len(r.b)) {
		r.err = errSnapshotDamaged
	}
	for i := uint64(0); i < count && r.err == nil; i++ {
		m := unique.Make(r.str())
		if _, dup := s.mediatorNum[m]; dup {
			r.err = fmt.Errorf("%w: mediator %d is listed twice", errSnapshotDamaged, i)
		}
		s.mediatorNum[m] = uint32(len(s.mediators))
		s.mediators = append(s.mediators, m)
	}
	var prev uint64 // the previous closed approval's request
	count = r.u64()
	if r.err == nil && count > uint64(len(r.b)/closedSize) {
		r.err = errSnapshotDamaged
	}
	if r.err == nil && len(s.closed) == 0 {
		// Sized once: grown as it fills, the map would leave its
		// smaller tables behind, as much garbage again as the state.
		s.closed = make(map[commit.Digest]closedApproval, count)
	}
	for i := uint64(0); i < count && r.err == nil; i++ {
		id := commit.Digest(r.bytes(32))
		c := closedApproval{request: r.u64(), pending: r.i64(), verdictIndex: r.u64(), execution: r.i64(),
			consumption: r.u64(), outcomeIndex: r.u64(), mediator: r.u32()}
		c.state, c.outcome = closedState(r.bytes(1)[0]), r.bytes(1)[0]
		if r.err != nil {
			break
		}
		_, dup := s.closed[id]
		ok := c.request < size && !ids[id] && !dup && (i == 0 || c.request > prev)
		prev = c.request
		decided := c.request < c.verdictIndex && c.verdictIndex < size
		none := c.consumption == 0 && c.outcome == 0 && c.outcomeIndex == 0 && c.mediator == 0
		switch c.state {
		case closedExpired:
			ok = ok && c.verdictIndex == 0 && c.execution == 0 && none
		case closedDenied:
			ok = ok && decided && c.execution == 0 && none
		case closedLapsed:
			ok = ok && decided && none
		case closedConsumed:
			ok = ok && decided && c.verdictIndex < c.consumption && c.consumption < size && int(c.mediator) < len(s.mediators) &&
				int(c.outcome) < len(results) && (c.outcome == 0) == (c.outcomeIndex == 0) &&
				(c.outcome == 0 || c.consumption < c.outcomeIndex && c.outcomeIndex < size)
		default:
			ok = false
		}
		if !ok {
			r.err = fmt.Errorf("%w: closed approval %d (request %d) is not one the log can hold", errSnapshotDamaged, i, c.request)
			break
		}
		s.closed[id] = c
		if c.state == closedConsumed {
			s.consumptions = append(s.consumptions, c.consumption)
		}
	}
	slices.Sort(s.consumptions)
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

// worthSnapshot reports whether Close writes the snapshot of the state
// for size: always when the log holds approval entries; for a log without
// any (the state empty: no approval_config, request or other lifecycle
// entry, none refused), only when it saves the next Open at least
// snapshotOnOpen entries since the stored snapshot, as Open and the
// background loop (SnapshotEvery) write one only then too.
func (l *Ledger) worthSnapshot(size uint64) bool {
	return !l.approvals.empty() || l.refused > 0 || size-l.snapSize.Load() >= snapshotOnOpen
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
