package ledger

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
	"golang.org/x/mod/sumdb/note"
)

// Fsck is the full re-check of a store: everything the ledger wrote, read
// back and checked against everything else it wrote. It reads every entry,
// in chunks, on Workers goroutines (reading and hashing are the cost, so
// they run in parallel; the checks that need the entries in order run on
// the caller's goroutine), and checks:
//
//   - every entry's chain: it is a JSON object whose index is its
//     position, whose origin is the key's name, whose prev is the entry
//     hash of the entry before (zero for entry 0), whose time is not
//     before the entry before's, and whose key id is that of the key
//     signing at its index (the key rotations below);
//   - with Signatures, every entry parsed strictly (entry.Parse) and its
//     Ed25519 signature verified by the key its key id names: about 110 µs
//     of CPU per entry in all, so below 20,000 entries/s on two cores,
//     against about 6 µs without;
//   - every tile: rebuilt from the entries' leaf hashes and compared with
//     the stored one (a partial tile at the tree's edge must not be longer
//     than the tree, except Online, where appends go on);
//   - the latest checkpoint (Online: the checkpoint stored for Size): its
//     signature by the log's key, and its root against the root of the
//     rebuilt tree at its size;
//   - the log's keys and their rotations, as Open checks them (Rotate),
//     and that every entry between two rotations carries the key that
//     signs there.
//
// It goes on after damage, reporting each thing found (up to MaxDamage)
// as a *Damage naming the entry or tile and what differs; damage that
// follows from damage already reported (a tile above a changed entry) is
// not reported again. It writes nothing.
//
// It returns a report, never nil, and an error if it found damage (the
// report's Err: errors.Is ErrCorrupt), if the keys do not match the log
// (errors.Is ErrRotation), or if it could not finish (a done context, a
// store that fails to answer).
func Fsck(ctx context.Context, store Store, key *Key, opts FsckOptions) (*FsckReport, error) {
	started := time.Now()
	opts = opts.withDefaults()
	rep := &FsckReport{Signatures: opts.Signatures}
	err := fsck(ctx, store, key, opts, rep)
	rep.Elapsed = time.Since(started)
	if err != nil {
		return rep, err
	}
	return rep, rep.Err()
}

// FsckOptions configure Fsck. The zero value checks the whole store, all
// but the entries' signatures, on every core.
type FsckOptions struct {
	// PreviousKeys are the log's earlier keys, as Options.PreviousKeys.
	PreviousKeys []string
	// Online says a ledger is appending to the store while it is checked:
	// Fsck checks the tree of size Size, which must have a stored
	// checkpoint (the ledger's latest), and allows the partial tiles at
	// its edge to have grown. Below a checkpoint the store never changes,
	// so the check sees no appends. Without Online, Size is ignored and
	// the whole store is checked against its latest checkpoint.
	Online bool
	Size   uint64
	// Signatures adds the strict parse and signature check of every entry.
	Signatures bool
	// Workers is how many goroutines read and hash entries. Optional;
	// default GOMAXPROCS.
	Workers int
	// MaxDamage bounds the damage reported. Optional; default 100.
	MaxDamage int
	// Progress, if set, is called from the caller's goroutine after each
	// chunk of entries (4,096) is checked, and once at the end. It must
	// return quickly.
	Progress func(FsckProgress)
}

func (o FsckOptions) withDefaults() FsckOptions {
	if o.Workers <= 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	if o.MaxDamage <= 0 {
		o.MaxDamage = 100
	}
	return o
}

// FsckProgress is how far Fsck is.
type FsckProgress struct {
	Checked, Total uint64 // entries
	Elapsed        time.Duration
}

// FsckReport is what Fsck checked and found.
type FsckReport struct {
	// StoreSize is the store's tree size when Fsck began; Checked the
	// entries checked (StoreSize, or Size when online).
	StoreSize, Checked uint64
	// CheckpointSize is the tree size of the checkpoint whose root was
	// checked.
	CheckpointSize uint64
	// Tiles is how many stored tiles were compared (a tile at the edge of
	// a chunk is compared once per chunk that changes it).
	Tiles int
	// Signatures says entry signatures were verified.
	Signatures bool
	// Rotations are the log's key rotations, oldest first.
	Rotations []Rotation
	// Damage is what was found: *Damage values, and the errors of the key
	// check (errors.Is ErrRotation), in the order found, at most
	// MaxDamage; More counts those found beyond.
	Damage  []error
	More    int
	Elapsed time.Duration
}

// Err returns the damage found, joined, or nil.
func (r *FsckReport) Err() error {
	if len(r.Damage) == 0 {
		return nil
	}
	errs := r.Damage
	if r.More > 0 {
		errs = append(slices.Clip(errs), fmt.Errorf("%w: and %d more problems", ErrCorrupt, r.More))
	}
	return errors.Join(errs...)
}

// Damage is one thing Fsck found not as the ledger wrote it. It is
// errors.Is ErrCorrupt.
type Damage struct {
	// Entry is the index of the damaged entry, or -1. With a tile, it is
	// the entry whose leaf hash the tile and the entry disagree on.
	Entry int64
	// TileLevel and TileIndex name the damaged tile; TileLevel is -1 if
	// none is.
	TileLevel int
	TileIndex uint64
	// Checkpoint is the tree size of the damaged checkpoint, or -1.
	Checkpoint int64
	// Problem says what differs.
	Problem string
	// Err is the cause, if there is one.
	Err error
}

func (d *Damage) Error() string {
	var where string
	switch {
	case d.TileLevel >= 0 && d.Entry >= 0:
		where = fmt.Sprintf("tile %d/%d, entry %d: ", d.TileLevel, d.TileIndex, d.Entry)
	case d.TileLevel >= 0:
		where = fmt.Sprintf("tile %d/%d: ", d.TileLevel, d.TileIndex)
	case d.Entry >= 0:
		where = fmt.Sprintf("entry %d: ", d.Entry)
	case d.Checkpoint >= 0:
		where = fmt.Sprintf("the checkpoint for tree size %d: ", d.Checkpoint)
	}
	s := fmt.Sprintf("%v: %s%s", ErrCorrupt, where, d.Problem)
	if d.Err != nil {
		s += ": " + d.Err.Error()
	}
	return s
}

func (d *Damage) Unwrap() []error {
	if d.Err == nil {
		return []error{ErrCorrupt}
	}
	return []error{ErrCorrupt, d.Err}
}

func entryDamage(i uint64, err error, format string, args ...any) *Damage {
	return &Damage{Entry: int64(i), TileLevel: -1, Checkpoint: -1, Problem: fmt.Sprintf(format, args...), Err: err}
}

func tileDamage(level uint8, index uint64, format string, args ...any) *Damage {
	return &Damage{Entry: -1, TileLevel: int(level), TileIndex: index, Checkpoint: -1, Problem: fmt.Sprintf(format, args...)}
}

func checkpointDamage(size uint64, err error, format string, args ...any) *Damage {
	return &Damage{Entry: -1, TileLevel: -1, Checkpoint: int64(size), Problem: fmt.Sprintf(format, args...), Err: err}
}

func storeDamage(format string, args ...any) *Damage {
	return &Damage{Entry: -1, TileLevel: -1, Checkpoint: -1, Problem: fmt.Sprintf(format, args...)}
}

// fsck runs Fsck's checks, recording damage in rep; it returns an error
// only when it cannot go on.
func fsck(ctx context.Context, store Store, key *Key, opts FsckOptions, rep *FsckReport) error {
	st, err := store.State(ctx)
	if err != nil {
		return fmt.Errorf("ledger: reading store state: %w", err)
	}
	ring, err := newKeyring(key, opts.PreviousKeys)
	if err != nil {
		return err
	}
	rep.StoreSize = st.Size
	size, signed, cpSize, what := st.Size, st.Checkpoint, st.CheckpointSize, fmt.Sprintf("the latest checkpoint (tree size %d)", st.CheckpointSize)
	if opts.Online {
		if opts.Size > st.Size {
			return fmt.Errorf("%w: tree size %d exceeds the store's %d", ErrSize, opts.Size, st.Size)
		}
		size, cpSize, what = opts.Size, opts.Size, fmt.Sprintf("the checkpoint for tree size %d", opts.Size)
		if signed, err = store.Checkpoint(ctx, size); err != nil {
			return fmt.Errorf("ledger: reading the checkpoint for tree size %d: %w", size, err)
		}
	}
	f := &fsckRun{store: store, ring: ring, opts: opts, rep: rep, online: opts.Online, reported: map[tileID]bool{}}
	l := &Ledger{store: store, key: key, opts: Options{following: opts.Online}.withDefaults(), log: slog.New(slog.DiscardHandler)}
	var root []byte
	var signers, others []string
	switch {
	case signed == nil && size > 0:
		f.damage(storeDamage("it holds %d entries but no signed checkpoint: a log has a checkpoint from its start (for the empty tree), so the latest one was lost", size))
	case signed != nil:
		cp, s, o, err := ring.open(signed, what)
		switch {
		case err != nil:
			f.damage(err)
		case cp.Size != cpSize:
			f.damage(checkpointDamage(cpSize, nil, "it is stored for tree size %d but signs tree size %d", cpSize, cp.Size))
		default:
			root, signers, others = cp.Hash, s, o
			l.cp, l.cpSize, l.cpRoot = signed, cp.Size, cp.Hash
		}
	}
	if cpSize > size {
		f.damage(checkpointDamage(cpSize, nil, "the store holds only %d entries: entries the checkpoint signs are lost", size))
		cpSize, root = size, nil
	}
	rep.Checked, rep.CheckpointSize = size, cpSize
	if _, err := f.scan(ctx, size, cpSize, root); err != nil {
		return err
	}
	if l.cp == nil || cpSize < l.cpSize {
		return nil // the keys cannot be checked without the checkpoint
	}
	rotations, err := l.checkKeys(ctx, ring, signers, others, size)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		f.damage(fmt.Errorf("the key check: %w", err))
		return nil
	}
	rep.Rotations = rotations
	// The entries' key ids change exactly at the rotations.
	want := []keyChange{{0, ring.current.ID()}}
	if len(rotations) > 0 {
		want[0].key = rotations[0].From
	}
	for _, r := range rotations {
		if r.Size < size { // a rotation at the log's end has no entry yet
			want = append(want, keyChange{r.Size, r.To})
		}
	}
	if len(f.keys) > 0 {
		// The first entries may be unreadable: the first key read is the
		// one the log starts with, if the others agree.
		f.keys[0].from = 0
	}
	if p, ok := firstDifference(f.keys, want); ok {
		f.damage(entryDamage(p, nil, "it carries key %s, but key %s signs there (the log's key rotations: %v)", keyIn(f.keys, p), keyIn(want, p), rotations))
	}
	return nil
}

// firstDifference returns the first index at which the keys of got and
// want differ, both lists of changes in index order; got may be empty
// (no entry scanned).
func firstDifference(got, want []keyChange) (uint64, bool) {
	for i := range max(len(got), len(want)) {
		switch {
		case i >= len(got):
			if len(got) == 0 {
				return 0, false
			}
			return want[i].from, true
		case i >= len(want):
			return got[i].from, true
		case got[i] != want[i]:
			return min(got[i].from, want[i].from), true
		}
	}
	return 0, false
}

// keyIn returns the key of changes at index i.
func keyIn(changes []keyChange, i uint64) string {
	key := "(none)"
	for _, c := range changes {
		if c.from > i {
			break
		}
		key = c.key
	}
	return key
}

// keyChange: entries from index from on carry key id key.
type keyChange struct {
	from uint64
	key  string
}

// fsckRun is one Fsck's state.
type fsckRun struct {
	store  Store
	ring   *keyring
	opts   FsckOptions
	rep    *FsckReport
	online bool
	// stopAtFirst stops the scan at the first damage (Open with
	// FullCheck: the first is enough to refuse).
	stopAtFirst bool

	// damaged are the entries and leaves reported damaged, in index order,
	// so that a tile above them is not reported again.
	damaged []uint64
	// reported are the tile hashes reported damaged (by tile level and
	// index at that level), so that a tile compared again as it grows is
	// not reported again.
	reported map[tileID]bool
	// keys are where the entries' key ids change.
	keys []keyChange
}

// damage records err (a *Damage or a key error) in the report.
func (f *fsckRun) damage(err error) {
	if len(f.rep.Damage) < f.opts.MaxDamage {
		f.rep.Damage = append(f.rep.Damage, err)
	} else {
		f.rep.More++
	}
}

func (f *fsckRun) damageEntry(i uint64, err error) {
	f.damaged = append(f.damaged, i)
	f.damage(err)
}

// damageBelow reports whether damage was recorded for an entry in
// [from, to).
func (f *fsckRun) damageBelow(from, to uint64) bool {
	i, _ := slices.BinarySearch(f.damaged, from)
	return i < len(f.damaged) && f.damaged[i] < to
}

// fsckChunk is a range of entries read and hashed by a worker.
type fsckChunk struct {
	start, end uint64
	leaves     [][HashSize]byte
	heads      []fsckHead
	err        error // a failure that stops the check (a done context)
	done       chan struct{}
}

// fsckHead is what a worker found of one entry.
type fsckHead struct {
	hash, prev commit.Digest
	time       int64
	index      uint64
	key        string
	// bad is the damage found in the entry alone (a *Damage, or an
	// *UnknownKeyError), nil if none; unread says its bytes could not be
	// read; scanned that its head was read.
	bad     error
	unread  bool
	scanned bool
}

const fsckChunkSize = 4096

// scan checks entries [0, size) and the tiles, and the root of the tree
// of size cpSize against root (unless root is nil), and returns the tree's
// edge.
func (f *fsckRun) scan(ctx context.Context, size, cpSize uint64, root []byte) (*edge, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	workers := f.opts.Workers
	jobs := make(chan *fsckChunk)
	window := make(chan *fsckChunk, 2*workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := f.newWorker()
			for c := range jobs {
				w.read(ctx, c)
				close(c.done)
			}
		}()
	}
	go func() {
		defer close(window)
		defer close(jobs)
		for _, bounds := range [][2]uint64{{0, cpSize}, {cpSize, size}} {
			for start := bounds[0]; start < bounds[1]; {
				end := min(bounds[1], (start/fsckChunkSize+1)*fsckChunkSize)
				c := &fsckChunk{start: start, end: end, done: make(chan struct{})}
				select {
				case window <- c:
				case <-ctx.Done():
					return
				}
				select {
				case jobs <- c:
				case <-ctx.Done():
					close(c.done)
					return
				}
				start = end
			}
		}
	}()
	defer wg.Wait()
	defer cancel()

	started := time.Now()
	o := &fsckOrder{f: f, edge: newEdge(), ctx: ctx}
	if cpSize == 0 && root != nil && !bytes.Equal(root, hasher.EmptyRoot()) {
		f.damage(checkpointDamage(0, nil, "it signs a root that is not the empty tree's"))
	}
	for c := range window {
		<-c.done
		if c.err != nil {
			return nil, c.err
		}
		if err := o.chunk(c, size); err != nil {
			return nil, err
		}
		if c.end == cpSize && root != nil {
			if got := o.edge.root(); !bytes.Equal(got, root) {
				d := checkpointDamage(cpSize, nil, "the stored entries give root %x, the signed checkpoint says %x", got, root)
				if f.damageBelow(0, cpSize) {
					d.Problem += " (it follows from the damage above)"
				}
				f.damage(d)
			}
		}
		if f.opts.Progress != nil {
			f.opts.Progress(FsckProgress{Checked: c.end, Total: size, Elapsed: time.Since(started)})
		}
		if f.stopAtFirst && len(f.rep.Damage) > 0 {
			return nil, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if f.opts.Progress != nil && size == 0 {
		f.opts.Progress(FsckProgress{Elapsed: time.Since(started)})
	}
	return o.edge, nil
}

// fsckWorker reads and hashes chunks.
type fsckWorker struct {
	f        *fsckRun
	origin   []byte
	verifier map[string]note.Verifier // by key id, for Signatures
}

func (f *fsckRun) newWorker() *fsckWorker {
	w := &fsckWorker{f: f, origin: []byte(f.ring.current.Name()), verifier: map[string]note.Verifier{}}
	for _, v := range f.ring.verifiers {
		w.verifier[keyID(v)] = v
	}
	return w
}

// read fills c: every entry's leaf hash and head. An entry that cannot be
// read is marked unread; the chunk is then read again entry by entry, so
// that the others are checked.
func (w *fsckWorker) read(ctx context.Context, c *fsckChunk) {
	n := int(c.end - c.start)
	c.leaves = make([][HashSize]byte, n)
	c.heads = make([]fsckHead, n)
	h := sha256.New()
	next := c.start
	err := w.f.store.ReadEntries(ctx, c.start, c.end, func(i uint64, b []byte) error {
		if i != next {
			return fmt.Errorf("%w: the store returned entry %d where entry %d comes", ErrCorrupt, i, next)
		}
		next++
		w.entry(c, i, b, h)
		return nil
	})
	if err == nil && next != c.end {
		err = fmt.Errorf("%w: the store returned entries %d to %d of %d to %d", ErrCorrupt, c.start, next, c.start, c.end)
	}
	if err == nil {
		return
	}
	if ctx.Err() != nil {
		c.err = ctx.Err()
		return
	}
	for i := c.start; i < c.end; i++ {
		b, err := w.f.store.Entry(ctx, i)
		if err != nil {
			if ctx.Err() != nil {
				c.err = ctx.Err()
				return
			}
			c.heads[i-c.start] = fsckHead{unread: true, bad: entryDamage(i, err, "it cannot be read")}
			continue
		}
		w.entry(c, i, b, h)
	}
}

// entry checks entry i, b, on its own.
func (w *fsckWorker) entry(c *fsckChunk, i uint64, b []byte, h hash.Hash) {
	at := i - c.start
	c.leaves[at] = entry.LeafHash(b)
	head := &c.heads[at]
	e, err := scanEntry(b, h)
	if err != nil {
		head.bad = entryDamage(i, err, "its bytes are not an entry")
		return
	}
	head.hash, head.prev, head.time, head.index, head.scanned = e.hash, e.prev, e.time, e.index, true
	// Most entries carry the key of the entry before: keep its string.
	if at > 0 && c.heads[at-1].key == string(e.keyID) {
		head.key = c.heads[at-1].key
	} else {
		head.key = string(e.keyID)
	}
	if !bytes.Equal(e.origin, w.origin) {
		head.bad = entryDamage(i, nil, "it names origin %q, the log's is %q", e.origin, w.origin)
		return
	}
	if w.f.opts.Signatures {
		if err := w.strict(i, b, &e); err != nil {
			head.bad = err
		}
	}
}

// strict parses entry i as every reader does and verifies its signature.
// It also compares what scanEntry read with the parsed entry: they must
// agree, byte for byte of the signed message.
func (w *fsckWorker) strict(i uint64, b []byte, head *entryHead) error {
	e, err := entry.Parse(b)
	if err != nil {
		return entryDamage(i, err, "it is not a valid entry")
	}
	m, err := e.SignedMessage()
	if err != nil {
		return entryDamage(i, err, "it is not a valid entry")
	}
	if sha256.Sum256(m) != head.hash || e.Index != head.index || e.Prev != head.prev || e.Time.UnixMicro() != head.time || e.KeyID != string(head.keyID) {
		return entryDamage(i, nil, "the entry as parsed and as scanned differ")
	}
	v, ok := w.verifier[e.KeyID]
	if !ok {
		// Not damage: a key not configured (the key check names it).
		return &UnknownKeyError{What: fmt.Sprintf("entry %d", i), Signers: []string{e.KeyID},
			Configured: w.f.ring.current.ID(), Previous: w.f.ring.prevIDs}
	}
	if !v.Verify(m, e.Signature) {
		return entryDamage(i, entry.ErrSignature, "its signature by key %s does not verify", e.KeyID)
	}
	return nil
}

// fsckOrder makes the checks that need the entries in order.
type fsckOrder struct {
	f    *fsckRun
	ctx  context.Context
	edge *edge
	// The entry before: its hash and time, if it could be read.
	prevHash  commit.Digest
	prevTime  int64
	prevKnown bool
}

// chunk checks c's entries against the entries before them, and the
// tiles they change; size is the tree size checked.
func (o *fsckOrder) chunk(c *fsckChunk, size uint64) error {
	f := o.f
	// The chunk's damage is reported in entry order, its chain's and its
	// tiles' together.
	from := len(f.rep.Damage)
	defer func() {
		slices.SortStableFunc(f.rep.Damage[from:], func(a, b error) int {
			return cmpEntry(a) - cmpEntry(b)
		})
	}()
	if c.start == 0 {
		o.prevKnown = true
	}
	for at := range c.heads {
		i := c.start + uint64(at)
		h := &c.heads[at]
		if h.bad != nil {
			f.damageEntry(i, h.bad)
			if h.unread {
				// The stored tile's hash stands in for it, so that the
				// tiles above are still checked.
				leaf, err := o.storedLeaf(i)
				if err != nil {
					return err
				}
				c.leaves[at] = leaf
			}
			// The next entry's link is checked if this one's hash is
			// known.
			o.prevHash, o.prevTime, o.prevKnown = h.hash, h.time, h.scanned
			continue
		}
		switch {
		case h.index != i:
			f.damageEntry(i, entryDamage(i, nil, "it says index %d", h.index))
		case o.prevKnown && h.prev != o.prevHash:
			f.damageEntry(i, entryDamage(i, nil, "its prev is not the entry hash of entry %d", int64(i)-1))
		case o.prevKnown && h.time < o.prevTime:
			f.damageEntry(i, entryDamage(i, nil, "its time %s is before entry %d's, %s", fromMicros(h.time).Format(entry.TimeLayout), i-1, fromMicros(o.prevTime).Format(entry.TimeLayout)))
		}
		o.prevHash, o.prevTime, o.prevKnown = h.hash, h.time, true
		if n := len(f.keys); n == 0 || f.keys[n-1].key != h.key {
			f.keys = append(f.keys, keyChange{i, h.key})
		}
	}
	tiles, err := o.edge.appendLeaves(c.leaves)
	if err != nil {
		return err
	}
	slices.SortFunc(tiles, func(a, b Tile) int {
		if a.Level != b.Level {
			return int(a.Level) - int(b.Level)
		}
		return int(a.Index) - int(b.Index)
	})
	for _, t := range tiles {
		if err := o.tile(t, c.end == size); err != nil {
			return err
		}
	}
	return nil
}

// cmpEntry orders damage by the entry it names; other damage comes
// after.
func cmpEntry(err error) int {
	if d, ok := errors.AsType[*Damage](err); ok && d.Entry >= 0 {
		return int(min(d.Entry, 1<<62))
	}
	return 1 << 62
}

// storedLeaf returns entry i's leaf hash from its stored tile, or zero if
// that tile cannot be read either.
func (o *fsckOrder) storedLeaf(i uint64) ([HashSize]byte, error) {
	var leaf [HashSize]byte
	t, err := o.f.store.Tile(o.ctx, 0, i/TileWidth)
	if err != nil {
		return leaf, o.ctx.Err()
	}
	at := (i % TileWidth) * HashSize
	if uint64(len(t)) >= at+HashSize {
		copy(leaf[:], t[at:])
	}
	return leaf, nil
}

// tile compares the rebuilt tile t with the stored one; last says t is
// at the tree's edge, where a stored tile longer than t is damage unless
// the check is online.
func (o *fsckOrder) tile(t Tile, last bool) error {
	f := o.f
	f.rep.Tiles++
	stored, err := f.store.Tile(o.ctx, t.Level, t.Index)
	var damage []*Damage
	// span is how many entries one hash of the tile covers.
	span := uint64(1) << (TileHeight * uint(t.Level))
	first := t.Index * TileWidth
	whole := tileID{t.Level, ^uint64(0) - t.Index} // the tile as a whole, not one hash
	switch {
	case err != nil && o.ctx.Err() != nil:
		return o.ctx.Err()
	case err != nil:
		damage = append(damage, tileDamage(t.Level, t.Index, "it cannot be read: %v", err))
	case len(stored)%HashSize != 0:
		damage = append(damage, tileDamage(t.Level, t.Index, "it holds %d bytes, not a whole number of hashes", len(stored)))
	case len(stored) < len(t.Hashes):
		damage = append(damage, tileDamage(t.Level, t.Index, "it holds %d hashes, the entries give %d", len(stored)/HashSize, len(t.Hashes)/HashSize))
	case !bytes.HasPrefix(stored, t.Hashes):
		for at := range uint64(len(t.Hashes) / HashSize) {
			if bytes.Equal(stored[at*HashSize:(at+1)*HashSize], t.Hashes[at*HashSize:(at+1)*HashSize]) {
				continue
			}
			node := tileID{t.Level, first + at}
			from := node.index * span
			if f.reported[node] || t.Level > 0 && f.damageBelow(from, from+span) {
				continue // reported, or it follows from the damage below
			}
			var d *Damage
			if t.Level == 0 {
				// The chain tells which changed: an entry whose signed
				// part changed no longer matches the next entry's prev.
				d = tileDamage(t.Level, t.Index, "hash %d is not the leaf hash of the stored entry", at)
				d.Entry = int64(from)
				if f.damageBelow(from, from+2) {
					d.Problem += ": the entry was changed (see its chain)"
				} else {
					d.Problem += ": the tile was changed, or the entry's signature"
				}
			} else {
				d = tileDamage(t.Level, t.Index, "hash %d is not the hash of entries %d to %d", at, from, from+span-1)
			}
			f.reported[node] = true
			f.damaged = append(f.damaged, from)
			damage = append(damage, d)
		}
		slices.Sort(f.damaged)
	case last && !f.online && len(stored) > len(t.Hashes):
		damage = append(damage, tileDamage(t.Level, t.Index, "it holds %d hashes, more than the tree of %d entries has", len(stored)/HashSize, o.edge.size()))
	}
	for _, d := range damage {
		if d.Entry < 0 {
			// Reported once, however often the tile is compared.
			if f.reported[whole] {
				continue
			}
			f.reported[whole] = true
		}
		f.damage(d)
	}
	return nil
}

// openFull rehashes every stored entry, rebuilds every tile, checks the
// chain and compares them with the stored tiles and the latest
// checkpoint's root, as Fsck does, stopping at the first damage.
func (l *Ledger) openFull(ctx context.Context, size uint64) error {
	ring, err := newKeyring(l.key, l.opts.PreviousKeys)
	if err != nil {
		return err
	}
	rep := &FsckReport{}
	f := &fsckRun{store: l.store, ring: ring, opts: FsckOptions{}.withDefaults(), rep: rep, online: l.opts.following, stopAtFirst: true, reported: map[tileID]bool{}}
	var root []byte
	if l.cp != nil {
		root = l.cpRoot
	}
	e, err := f.scan(ctx, size, l.cpSize, root)
	if err != nil {
		return err
	}
	if err := rep.Err(); err != nil {
		return err
	}
	l.edge = e
	return nil
}

// Fsck checks the ledger's store, as the package function Fsck does,
// while the ledger appends: online, up to the latest signed checkpoint,
// below which the store does not change. opts.Online, opts.Size and
// opts.PreviousKeys are the ledger's.
func (l *Ledger) Fsck(ctx context.Context, opts FsckOptions) (*FsckReport, error) {
	_, size := l.Checkpoint()
	opts.Online, opts.Size, opts.PreviousKeys = true, size, l.opts.PreviousKeys
	return Fsck(ctx, l.store, l.key, opts)
}
