package ledger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
	"github.com/transparency-dev/formats/log"
	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
)

// Errors of the ledger, wrapped with detail; test with errors.Is.
var (
	// ErrQueueFull: the append queue is at its bound; retry later. Nothing
	// was appended.
	ErrQueueFull = errors.New("ledger: append queue full")
	// ErrClosed: the ledger is closed, or stopped after a storage failure.
	ErrClosed = errors.New("ledger: closed")
	// ErrInvalidRecord: the decision record breaks a rule of the entry
	// format. Nothing was appended.
	ErrInvalidRecord = errors.New("ledger: invalid record")
	// ErrIdempotencyConflict: an idempotency key was reused by the same
	// mediator for a different decision. Nothing was appended.
	ErrIdempotencyConflict = errors.New("ledger: idempotency key reused for another decision")
	// ErrSize: a tree size beyond the latest checkpoint, or an index
	// outside the tree.
	ErrSize = errors.New("ledger: size or index out of range")
)

// Options configure a Ledger. The zero value is the default configuration.
type Options struct {
	// MaxBatch bounds the entries in one group commit. Optional; default
	// 256.
	MaxBatch int
	// MaxBatchBytes bounds the bytes of entries in one group commit, so a
	// batch stays one modest write. Optional; default 512 KiB.
	MaxBatchBytes int
	// MaxBatchWait is how long an idle committer waits for more records
	// after the first of a batch arrives (less if the batch fills).
	// Optional; default 0: a batch is what queued while the previous
	// batch was being made durable.
	MaxBatchWait time.Duration
	// MinCommitInterval is the least time from the start of one commit to
	// the start of the next, when the first held more than one entry and
	// the pending batch is not full. Under concurrent load it makes
	// batches larger, and so each entry cheaper: a commit's write, sync
	// and index transaction are shared by more entries. It delays an
	// append by at most this much; a lone caller appending one entry after
	// another is never delayed (its batches hold one entry). Optional;
	// default 1 ms. Negative: commit as soon as the store is free.
	MinCommitInterval time.Duration
	// QueueSize bounds the records waiting to be sequenced; Append
	// returns ErrQueueFull beyond it. Optional; default 8192.
	QueueSize int
	// CheckpointInterval is the least time between the starts of two
	// checkpoint signings. A checkpoint is signed as soon as the tree has
	// grown and this much has passed since the latest one began: an idle
	// log signs nothing, an entry appended to an idle log is covered at
	// once, and under load an entry waits at most this much (plus the
	// signing and storing) for a checkpoint. Optional; default
	// DefaultCheckpointInterval. Negative disables signing in the
	// background (Publish still signs on demand).
	CheckpointInterval time.Duration
	// SignWorkers is how many goroutines sign entries in parallel.
	// Optional; default GOMAXPROCS.
	SignWorkers int
	// FullCheck makes Open rehash every stored entry and rebuild every
	// tile, checking them against the stored tiles and the latest
	// checkpoint's root, as fsck does: O(size). By default Open checks the
	// latest checkpoint's signature, the root the stored tiles give at its
	// size and the tiles on the tree's right edge, and rehashes only the
	// entries after the latest checkpoint (those no signature covers yet,
	// bounded by CheckpointInterval), against their stored tiles: its cost
	// does not grow with the log. Optional; default false.
	FullCheck bool
	// OnBatch, if set, is called after each durable batch with its number
	// of entries (for metrics). It must return quickly. Optional.
	OnBatch func(entries int)
	// Now is the clock. Optional; default time.Now.
	Now func() time.Time
	// Logger receives operational events. Optional; default slog.Default().
	// It never receives attribute values or keys.
	Logger *slog.Logger
	// PreviousKeys are the note verifier keys of the log's earlier keys,
	// after a key rotation (see Rotate and docs/operations.md): the
	// stored checkpoints and entries they signed before the rotation
	// checkpoint are accepted. Every one has the key's name. Optional;
	// default none: the configured key must be the log's only key.
	PreviousKeys []string
	// FollowInterval is how often a follower (see Follow) refreshes its
	// view of the log. Optional; default 200 ms. Negative disables the
	// timer (Refresh still catches up on demand).
	FollowInterval time.Duration

	// following is set by Follow: another process may grow the store
	// while it is being checked.
	following bool
	// snapshotEvery (default SnapshotEvery) and snapshotPoll (default
	// 1 s): an approval snapshot is written when the durable tree has
	// grown by snapshotEvery entries, looked at every snapshotPoll
	// (snapshot.go). Tests make them small.
	snapshotEvery uint64
	snapshotPoll  time.Duration
}

// DefaultCheckpointInterval is the default CheckpointInterval: an entry
// is covered by a signed checkpoint within about 100 ms plus its commit
// and the signing, well inside the 250 ms the ledger promises (p99 under
// load), for at most 10 checkpoints a second (docs/log.md §3,
// docs/performance.md "Checkpoint latency").
const DefaultCheckpointInterval = 100 * time.Millisecond

func (o Options) withDefaults() Options {
	if o.MaxBatch <= 0 {
		o.MaxBatch = 256
	}
	if o.MaxBatchBytes <= 0 {
		o.MaxBatchBytes = 512 << 10
	}
	if o.MinCommitInterval == 0 {
		o.MinCommitInterval = time.Millisecond
	}
	if o.QueueSize <= 0 {
		o.QueueSize = 8192
	}
	if o.CheckpointInterval == 0 {
		o.CheckpointInterval = DefaultCheckpointInterval
	}
	if o.SignWorkers <= 0 {
		o.SignWorkers = runtime.GOMAXPROCS(0)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.FollowInterval == 0 {
		o.FollowInterval = 200 * time.Millisecond
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.snapshotEvery == 0 {
		o.snapshotEvery = SnapshotEvery
	}
	if o.snapshotPoll <= 0 {
		o.snapshotPoll = time.Second
	}
	return o
}

// Record is a mediator's decision as submitted for appending. The ledger
// adds origin, index, time, prev, key id and signature.
type Record struct {
	Mediator  string // from the mediator's credential
	Principal string
	Action    string
	Decision  entry.Decision
	// Policies are the determining policy ids, in any order; the ledger
	// sorts them. Repeats are refused.
	Policies []string
	Params   commit.Commitment
	Tiers    commit.Digest
	// Definition is the digest of the action definition the record was
	// checked against (ledgerd's catalog), or zero; a non-zero one makes a
	// version 2 entry.
	Definition commit.Digest
	// Attributes is a JSON object inside the strict domain; the ledger
	// stores its canonical form.
	Attributes []byte
	// Kind, PolicySet and PolicyErrors make a version 3 entry
	// (docs/entry.md): entry.KindDecision for a decision the caller made
	// by evaluating the policy set PolicySet (PolicyErrors are the ids of
	// the policies that errored, in any order), or entry.KindPolicySet to
	// publish a policy set, with every decision field left zero.
	Kind         entry.Kind
	PolicySet    commit.Digest
	PolicyErrors []string
	// The version 4 kinds (docs/approvals.md §Lifecycle) are checked
	// against the approval lifecycle in the sequencer and refused with an
	// *ApprovalError (errors.Is ErrApproval) when they break it:
	//   - entry.KindApprovalConfig: PendingTTL and ExecutionTTL;
	//   - entry.KindApproval: ApprovalID, Approver, Verdict, PreviewDigest;
	//   - entry.KindConsumption: ApprovalID, Mediator, Principal, Action,
	//     Params;
	//   - entry.KindOutcome: ApprovalID, Consumption, Mediator, Result and
	//     OperationID (optional).
	// Every other field is left zero. The entry's request index is the
	// ledger's to fill, from its state: a Record has none.
	//
	// A Record of kind entry.KindOutcome without an ApprovalID is the
	// outcome of an allowed act (version 5, docs/entry.md "Outcomes of
	// allowed acts"): DecisionIndex, Mediator, Result and OperationID
	// (optional). Append refuses it with an *ApprovalError unless the
	// durable entry at DecisionIndex is an allow decision (decision_not_found)
	// by the same mediator (outcome_mismatch, term mediator), and refuses
	// a second final one (succeeded or failed) of a decision with
	// outcome_final: a final outcome is stored under an idempotency key
	// of the ledger's own, its decision's, in place of the caller's. A
	// retry of a final outcome with an IdempotencyKey, recording the same
	// outcome, gets the first one's receipt, Replayed (the caller's key
	// is not stored, so its later reuse for another record is not
	// detected).
	ApprovalID    commit.Digest
	Approver      string
	Verdict       entry.Verdict
	PreviewDigest commit.Digest
	Consumption   uint64
	DecisionIndex uint64
	Result        entry.Result
	OperationID   string
	PendingTTL    time.Duration
	ExecutionTTL  time.Duration
	// IdempotencyKey, if set, makes retries safe: a record with the key of
	// an entry the same mediator already appended (or is appending) is
	// not appended again; Append returns that entry's receipt, marked
	// Replayed, or ErrIdempotencyConflict if the decision differs. Keys
	// are kept durably with the entries, so this holds across restarts.
	// At most 128 bytes of printable ASCII.
	IdempotencyKey string
}

// MaxIdempotencyKey bounds Record.IdempotencyKey.
const MaxIdempotencyKey = 128

// Receipt acknowledges a durable entry.
type Receipt struct {
	Index    uint64
	Entry    []byte // the signed entry, as stored
	LeafHash [HashSize]byte
	// Replayed says the record's idempotency key named an entry appended
	// before: this is that entry's receipt, and nothing was appended.
	Replayed bool
}

// Ledger sequences, signs and stores decision entries and publishes signed
// checkpoints. Its methods are safe for concurrent use.
type Ledger struct {
	store Store
	key   *Key
	// rotations are the log's key rotations, as Open found them.
	rotations []Rotation
	opts      Options
	log       *slog.Logger
	queue     chan *request
	stop      chan struct{}
	done      sync.WaitGroup
	closed    sync.Once

	// follow is set on a read-only follower (follow.go).
	follow *follower

	// mu guards the state below, which the sequencer changes after each
	// durable batch.
	mu       sync.Mutex
	edge     *edge         // the durable tree
	lastHash commit.Digest // entry hash of the last durable entry
	lastTime time.Time
	failed   error // set when storage failed: the ledger stops appending

	// approvals is the approval lifecycle's state (approval.go), changed
	// by the sequencer as it chains entries. refused counts the durable
	// entries the lifecycle's rules refused (Open found them; the
	// sequencer appends none). snapSize is the size of the latest approval
	// snapshot this ledger read or wrote (snapshot.go).
	approvals *approvals
	refused   uint64
	snapSize  atomic.Uint64

	// keyMu guards inflight: the idempotency keys of records chained but
	// not yet durable, so that a retry arriving meanwhile joins the
	// original instead of being appended again.
	keyMu    sync.Mutex
	inflight map[string]*request

	// cpMu serializes checkpoint signing and guards the latest checkpoint.
	cpMu   sync.Mutex
	cp     []byte // latest signed checkpoint
	cpSize uint64
	cpRoot []byte
	cpTime time.Time // when this process signed or loaded it
	// cpSigned is closed, and replaced, whenever a checkpoint is signed.
	cpSigned chan struct{}
	// grown wakes the publish loop when a batch has made the tree grow
	// (a send that would block is dropped: one wake-up is pending). Nil
	// without the loop, and then never sent on.
	grown chan struct{}

	// subtrees keeps the interior nodes of the tiles above level 0 for
	// the proofs the ledger serves (tree.go).
	subtrees *subtreeCache
}

type request struct {
	entry *entry.Entry
	// tmpl is the entry checked and encoded by prepare, with index, time
	// and prev to be set when it is chained, and the signature when it is
	// signed, in one buffer (nil for a version 4 entry, which is encoded
	// again then).
	tmpl  *entry.Template
	reply chan result
	// Set when the record is chained (message) and signed (leaf, the
	// signed entry; hash, its leaf hash; err).
	message []byte
	leaf    []byte
	hash    [HashSize]byte
	err     error
	// key is the stored idempotency key (nil without one); followers are
	// retries with the same key that arrived while this request was in
	// flight, answered with its receipt.
	key       []byte
	followers []*request
	// final marks a final outcome of an allowed act, whose key is its
	// decision's (finalOutcomeKey): another request with that key is
	// refused outcome_final, unless retry (the record had an idempotency
	// key) and it records the same outcome.
	final, retry bool
	// finalKey, on an unknown outcome of an allowed act, is its
	// decision's final outcome key: if an entry holds it, or a request in
	// flight, the outcome is refused outcome_final.
	finalKey []byte
}

// answer replies to r and to its followers, whose receipts say they
// replay r's.
func (r *request) answer(res result) {
	r.reply <- res
	for _, f := range r.followers {
		fres := res
		fres.receipt.Replayed = res.err == nil
		f.reply <- fres
	}
}

type result struct {
	receipt Receipt
	err     error
}

// check builds a ledger on store, checked as Open documents, without
// starting it.
func check(ctx context.Context, store Store, key *Key, opts Options) (*Ledger, error) {
	l := &Ledger{
		subtrees: newSubtreeCache(),
		store:    store, key: key, opts: opts, log: opts.Logger,
		queue: make(chan *request, opts.QueueSize),
		stop:  make(chan struct{}),

		inflight:  map[string]*request{},
		cpSigned:  make(chan struct{}),
		approvals: newApprovals(),
	}
	st, err := store.State(ctx)
	if err != nil {
		return nil, fmt.Errorf("ledger: reading store state: %w", err)
	}
	ring, err := newKeyring(key, opts.PreviousKeys)
	if err != nil {
		return nil, err
	}
	if st.Checkpoint == nil && st.Size > 0 {
		return nil, fmt.Errorf("%w: the store holds %d entries but no signed checkpoint: a log signs the empty tree's before its first entry, "+
			"so its latest checkpoint was lost; starting would sign a tree that may be smaller than one signed before, and give "+
			"its indices to new entries, forking the log: restore the store, or at least its latest checkpoint, from a backup", ErrCorrupt, st.Size)
	}
	var latestSigners, latestOthers []string
	if st.Checkpoint != nil {
		var cp *log.Checkpoint
		cp, latestSigners, latestOthers, err = ring.open(st.Checkpoint, fmt.Sprintf("the latest checkpoint (tree size %d)", st.CheckpointSize))
		if err != nil {
			return nil, err
		}
		if cp.Size != st.CheckpointSize || cp.Size > st.Size {
			return nil, fmt.Errorf("%w: latest checkpoint is for size %d, stored as %d, tree size %d", ErrCorrupt, cp.Size, st.CheckpointSize, st.Size)
		}
		l.cp, l.cpSize, l.cpRoot, l.cpTime = st.Checkpoint, cp.Size, cp.Hash, opts.Now()
	}
	switch {
	case opts.FullCheck:
		err = l.openFull(ctx, st.Size)
	case opts.following:
		// Another process grows the store: its tail is not ours to
		// rehash, and Refresh checks every state it moves to.
		err = l.openQuick(ctx, st.Size)
	default:
		err = l.openRecent(ctx, st.Size)
	}
	if err != nil {
		return nil, err
	}
	if l.rotations, err = l.checkKeys(ctx, ring, latestSigners, latestOthers, st.Size); err != nil {
		return nil, err
	}
	for _, r := range l.rotations {
		l.log.InfoContext(ctx, "ledger key rotation", "size", r.Size, "from", r.From, "to", r.To)
	}
	if st.Size > 0 {
		last, err := store.Entry(ctx, st.Size-1)
		if err != nil {
			return nil, fmt.Errorf("ledger: reading last entry: %w", err)
		}
		e, err := entry.Parse(last)
		if err != nil {
			return nil, fmt.Errorf("%w: entry %d: %w", ErrCorrupt, st.Size-1, err)
		}
		if l.lastHash, err = e.Hash(); err != nil {
			return nil, fmt.Errorf("%w: entry %d: %w", ErrCorrupt, st.Size-1, err)
		}
		l.lastTime = e.Time
	}
	l.log.InfoContext(ctx, "ledger opened", "size", st.Size, "checkpoint_size", l.cpSize, "origin", key.Name())
	return l, nil
}

// Check makes every check Open makes with FullCheck, and starts
// nothing: the latest checkpoint's signature by key, every stored entry
// rehashed, every tile rebuilt and compared with the stored one, and the
// root at the latest checkpoint. It writes nothing to the store.
//
// previousKeys are the log's earlier keys, as Options.PreviousKeys.
func Check(ctx context.Context, store Store, key *Key, previousKeys ...string) error {
	_, err := check(ctx, store, key, Options{Logger: slog.New(slog.DiscardHandler), PreviousKeys: previousKeys, FullCheck: true}.withDefaults())
	return err
}

// Open checks the store against its own tiles and latest checkpoint, and
// starts the ledger. It refuses to start, with an error wrapping a clear
// cause, if the store holds entries but no signed checkpoint (it was
// lost: ErrCorrupt), if the stored tree does not match the latest signed checkpoint,
// if that checkpoint was not signed by key (or, with Options.PreviousKeys,
// the log's keys do not follow each other through rotation checkpoints:
// see Rotate; then the error is errors.Is ErrRotation), if a tile on the
// tree's right edge or an entry after the latest checkpoint was changed,
// or, with FullCheck, if any stored entry or tile was changed. Entries made
// durable after the latest checkpoint are kept.
func Open(ctx context.Context, store Store, key *Key, opts Options) (*Ledger, error) {
	opts = opts.withDefaults()
	l, err := check(ctx, store, key, opts)
	if err != nil {
		return nil, err
	}
	// The approval state is rebuilt from the durable log (from its
	// latest snapshot and the entries after it), so that the lifecycle's
	// rules hold across restarts.
	started := time.Now()
	size := l.edge.size()
	a, refused, at, err := l.restoreApprovals(ctx, size)
	if err != nil {
		return nil, fmt.Errorf("ledger: rebuilding the approval state: %w", err)
	}
	l.approvals, l.refused = a, refused
	l.snapSize.Store(at)
	l.log.InfoContext(ctx, "ledger approval state rebuilt", "entries", size, "snapshot_size", at, "approvals", a.count(),
		"refused_entries", refused, "duration", time.Since(started))
	if refused > 0 {
		l.log.WarnContext(ctx, "ledger: the log holds approval entries that break the lifecycle's rules; they were ignored", "count", refused)
	}
	ss, snapshots := store.(SnapshotStore)
	var snap []byte
	if snapshots && size-at >= snapshotOnOpen {
		// The state is the durable log's until the sequencer starts:
		// encode it now, store it in the background.
		snap = a.encodeSnapshot(size, l.edge.root(), refused)
	}
	if l.cp == nil || l.cpSize < l.edge.size() {
		// A log has a checkpoint from its start, the empty tree's for a
		// new one, so that a monitor or a witness can begin at size 0;
		// and entries made durable after the latest checkpoint (by a
		// process that stopped before it could sign one) are covered at
		// once, not at the first tick.
		if _, err := l.Publish(ctx); err != nil {
			return nil, fmt.Errorf("ledger: signing the first checkpoint: %w", err)
		}
	}
	if opts.CheckpointInterval > 0 {
		l.grown = make(chan struct{}, 1)
	}
	l.done.Add(1)
	go l.sequence()
	if opts.CheckpointInterval > 0 {
		l.done.Add(1)
		go l.publishLoop()
	}
	if snapshots {
		l.done.Add(1)
		go func() {
			if snap != nil {
				ctx, cancel := context.WithCancel(context.Background())
				go func() {
					select {
					case <-l.stop:
						cancel()
					case <-ctx.Done():
					}
				}()
				l.putSnapshot(ctx, ss, size, snap)
				cancel()
			}
			l.snapshotLoop(ss)
		}()
	}
	return l, nil
}

// openQuick rebuilds the right edge from stored tiles and checks the root
// at the latest checkpoint.
func (l *Ledger) openQuick(ctx context.Context, size uint64) error {
	r := newTileReader(ctx, l.store)
	e, err := r.edgeAt(size, l.opts.following)
	if err != nil {
		return fmt.Errorf("ledger: rebuilding the tree edge: %w", err)
	}
	root, err := r.rootAt(l.cpSize)
	if err != nil {
		return fmt.Errorf("ledger: root at checkpoint size %d: %w", l.cpSize, err)
	}
	if l.cp != nil && !bytes.Equal(root, l.cpRoot) {
		return fmt.Errorf("%w: stored tiles give root %x at size %d, the signed checkpoint says %x", ErrCorrupt, root, l.cpSize, l.cpRoot)
	}
	l.edge = e
	return nil
}

// Append submits a decision and returns its receipt once the entry is
// durable. Many goroutines may call it at once; their records are
// sequenced in the order the sequencer receives them and committed in
// groups. When the queue is full it returns ErrQueueFull at once. If ctx
// ends first, the entry may still be appended.
func (l *Ledger) Append(ctx context.Context, rec Record) (Receipt, error) {
	if l.follow != nil {
		return Receipt{}, l.errReadOnly("append")
	}
	req, err := l.prepare(rec)
	if err != nil {
		return Receipt{}, err
	}
	req.reply = make(chan result, 1)
	v5 := req.entry.Kind == entry.KindOutcome && req.entry.Version() == entry.Version5
	if v5 {
		if err := l.checkOutcomeDecision(ctx, req.entry); err != nil {
			return Receipt{}, err
		}
	}
	if rec.IdempotencyKey != "" {
		req.key = storedKey(rec.Mediator, rec.IdempotencyKey)
		if r, found, err := l.replay(ctx, req); found || err != nil {
			return r, err
		}
	}
	switch {
	case v5 && req.entry.Result != entry.Unknown:
		req.key, req.final, req.retry = finalOutcomeKey(req.entry.DecisionIndex), true, rec.IdempotencyKey != ""
		if r, found, err := l.replay(ctx, req); found || err != nil {
			return r, err
		}
	case v5:
		req.finalKey = finalOutcomeKey(req.entry.DecisionIndex)
		if err := l.afterFinal(ctx, req); err != nil {
			return Receipt{}, err
		}
	}
	l.mu.Lock()
	failed := l.failed
	l.mu.Unlock()
	if failed != nil {
		return Receipt{}, fmt.Errorf("%w: %w", ErrClosed, failed)
	}
	select {
	case <-l.stop:
		return Receipt{}, ErrClosed
	default:
	}
	select {
	case l.queue <- req:
	default:
		return Receipt{}, ErrQueueFull
	}
	select {
	case res := <-req.reply:
		return res.receipt, res.err
	case <-ctx.Done():
		return Receipt{}, ctx.Err()
	}
}

// prepare checks a record against the entry format, in the caller's
// goroutine, so that one bad record never fails a batch, and returns its
// request, without a reply channel.
func (l *Ledger) prepare(rec Record) (*request, error) {
	if k := rec.IdempotencyKey; len(k) > MaxIdempotencyKey || strings.IndexFunc(k, func(r rune) bool { return r < 0x21 || r > 0x7e }) >= 0 {
		return nil, fmt.Errorf("%w: idempotency key: not 1 to %d printable ASCII characters", ErrInvalidRecord, MaxIdempotencyKey)
	}
	if rec.Kind == entry.KindApprovalConfig || rec.Kind == entry.KindApproval ||
		rec.Kind == entry.KindConsumption || rec.Kind == entry.KindOutcome {
		e, err := l.prepareV4(rec) // and version 5
		if err != nil {
			return nil, err
		}
		return &request{entry: e}, nil
	}
	policies := entry.SortPolicies(rec.Policies)
	if len(policies) != len(rec.Policies) {
		return nil, fmt.Errorf("%w: policies: repeated id", ErrInvalidRecord)
	}
	e := &entry.Entry{
		Origin: l.key.Name(), Time: time.Unix(0, 0).UTC(),
		Mediator: rec.Mediator, Principal: rec.Principal, Action: rec.Action,
		Decision: rec.Decision, Policies: policies,
		Params: rec.Params, Tiers: rec.Tiers, Definition: rec.Definition,
		Kind: rec.Kind, PolicySet: rec.PolicySet, PolicyErrors: entry.SortPolicies(rec.PolicyErrors),
		KeyID: l.key.ID(),
	}
	if len(e.PolicyErrors) != len(rec.PolicyErrors) {
		return nil, fmt.Errorf("%w: policy_errors: repeated id", ErrInvalidRecord)
	}
	if rec.Kind == entry.KindDecision && e.PolicyErrors == nil {
		e.PolicyErrors = []string{}
	}
	// A publication has no attributes; the entry refuses any given.
	if rec.Kind != entry.KindPolicySet || rec.Attributes != nil {
		if err := e.SetAttributes(rec.Attributes); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidRecord, err)
		}
	}
	// Encoding the entry checks it. The encoding is kept, as a template
	// whose index, time and prev the sequencer sets when it chains the
	// entry: the single sequencer then copies three values instead of
	// checking and encoding every member again (docs/performance.md,
	// "Append CPU").
	t, err := e.Template()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidRecord, err)
	}
	return &request{entry: e, tmpl: t}, nil
}

// prepareV4 checks a record of a version 4 kind (or a version 5
// outcome) against the entry format; the lifecycle's rules are the
// sequencer's to check (a version 5 outcome's, Append's).
func (l *Ledger) prepareV4(rec Record) (*entry.Entry, error) {
	if rec.Decision != "" || rec.Policies != nil || rec.Tiers != (commit.Digest{}) || rec.Definition != (commit.Digest{}) ||
		rec.Attributes != nil || rec.PolicySet != (commit.Digest{}) || rec.PolicyErrors != nil {
		return nil, fmt.Errorf("%w: a %s record has no decision fields", ErrInvalidRecord, rec.Kind)
	}
	e := &entry.Entry{
		Origin: l.key.Name(), Time: time.Unix(0, 0).UTC(), KeyID: l.key.ID(), Kind: rec.Kind,
		Mediator: rec.Mediator, Principal: rec.Principal, Action: rec.Action, Params: rec.Params,
		ApprovalID: rec.ApprovalID, Approver: rec.Approver, Verdict: rec.Verdict, PreviewDigest: rec.PreviewDigest,
		Consumption: rec.Consumption, DecisionIndex: rec.DecisionIndex, Result: rec.Result, OperationID: rec.OperationID,
		PendingTTL: rec.PendingTTL, ExecutionTTL: rec.ExecutionTTL,
		// The request and index are set when the entry is chained; the
		// largest index stands in for it so that the format's "earlier
		// entry" rules can be checked now.
		Index: commit.MaxSafeInteger,
	}
	if _, err := e.SignedMessage(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidRecord, err)
	}
	return e, nil
}

// sequence is the single writer. It chains each record as it arrives
// (index, time, prev) into the pending batch and hands it to the signing
// workers at once, so that signing runs on every core while the previous
// batch is being stored. The committer (commitLoop), as soon as a commit
// returns, takes everything chained so far as the next batch itself:
// commits run back to back, each carrying what arrived during the one
// before, with no goroutine hand-off between them.
func (l *Ledger) sequence() {
	defer l.done.Done()
	jobs := make(chan signJob, l.opts.MaxBatch)
	var workers sync.WaitGroup
	for range l.opts.SignWorkers {
		workers.Add(1)
		go func() {
			defer workers.Done()
			var batch []signJob
			var next signJob // taken from jobs, not yet signed
			for {
				first := next
				if first.r == nil {
					var ok bool
					if first, ok = <-jobs; !ok {
						return
					}
				}
				batch, next = takeJobs(batch[:0], first, jobs, l.opts.SignWorkers)
				signJobs(l.key, batch)
				clear(batch) // let the answered requests go
				// A group of signatures is 30–40 µs of CPU each and the
				// workers, one per core, rarely block while records keep
				// coming: without a yield the committer (woken when a
				// batch's last signature is done, or by the sequencer)
				// and the appenders answered by a commit wait in the run
				// queue until the scheduler preempts a worker, up to
				// 10 ms, while the disk idles and no new records are
				// chained. Yielding after each group lets them run
				// first (docs/performance.md, "Append CPU").
				runtime.Gosched()
			}
		}()
	}
	l.mu.Lock()
	p := &pipeline{
		cur:     &pendingBatch{start: l.edge.size(), approvals: l.approvals},
		chain:   chainState{hash: l.lastHash, time: l.lastTime},
		ready:   make(chan struct{}, 1),
		filled:  make(chan struct{}, 1),
		taken:   make(chan struct{}, 1),
		stopped: make(chan struct{}),
	}
	edge := l.edge
	l.mu.Unlock()
	committed := make(chan struct{})
	go func() {
		defer close(committed)
		l.commitLoop(p, edge)
	}()
	defer func() {
		close(p.stopped) // the committer stores what is pending, then returns
		<-committed
		close(jobs)
		workers.Wait()
	}()

	for {
		queue := l.queue
		if p.full(l.opts) {
			queue = nil // wait for the committer to take the batch
		}
		select {
		case r := <-queue:
			if err := l.failure(); err != nil {
				r.reply <- result{err: fmt.Errorf("%w: %w", ErrClosed, err)}
				continue
			}
			if r.key != nil && l.deduplicate(r) {
				continue
			}
			if r.finalKey != nil {
				// Checked again here, where no final outcome can be
				// chained between the check and this one's chaining.
				if err := l.afterFinal(context.Background(), r); err != nil {
					l.forgetKeys([]*request{r})
					r.answer(result{err: err})
					continue
				}
			}
			job, first, full, err := p.add(r, l.opts)
			if err != nil {
				l.forgetKeys([]*request{r})
				r.answer(result{err: err})
				continue
			}
			jobs <- job
			if first {
				signal(p.ready)
			}
			if full {
				signal(p.filled)
			}
		case <-p.taken:
			// The committer took the batch: there is room again.
		case <-l.stop:
			l.drain()
			return
		}
	}
}

// pipeline is where the sequencer leaves chained records and the
// committer takes them.
type pipeline struct {
	mu    sync.Mutex
	cur   *pendingBatch // chained, not yet taken
	chain chainState    // the chain's end, including cur

	ready   chan struct{} // cur became non-empty
	filled  chan struct{} // cur became full
	taken   chan struct{} // the committer took cur
	stopped chan struct{} // closed when the sequencer stops
}

// signal wakes the goroutine waiting on c, if it is not awake already.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// chainState is the end of the hash chain: the entry hash and time of the
// last entry chained.
type chainState struct {
	hash commit.Digest
	time time.Time
}

func (p *pipeline) full(o Options) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cur.full(o)
}

// add chains r into the pending batch and returns its signing job, and
// whether it is the batch's first record and whether the batch is now
// full.
func (p *pipeline) add(r *request, o Options) (job signJob, first, full bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.cur
	if err := c.add(r, &p.chain, o.Now); err != nil {
		return signJob{}, false, false, err
	}
	c.signing.Add(1)
	return signJob{r: r, done: &c.signing}, len(c.requests) == 1, c.full(o), nil
}

// take returns the pending batch, or nil if it is empty, and starts a new
// one. The batch records the chain's end after it.
func (p *pipeline) take() *pendingBatch {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.cur
	if len(c.requests) == 0 {
		return nil
	}
	c.end = p.chain
	p.cur = &pendingBatch{start: c.start + uint64(len(c.requests)), approvals: c.approvals}
	signal(p.taken)
	return c
}

// pendingBatch collects chained records until the committer takes them.
// The signing workers write each record's results into its request, never
// into the batch, so that chaining may grow the batch while they run.
type pendingBatch struct {
	// approvals is the lifecycle state, checked and changed as each
	// record is chained (nil: none is kept, in tests of batching only).
	approvals *approvals
	start     uint64
	requests  []*request
	bytes     int
	signing   sync.WaitGroup
	end       chainState // the chain's end after this batch, set when taken
}

// keys returns the batch's idempotency keys, or nil if it has none.
func (p *pendingBatch) keys() [][]byte {
	var keys [][]byte
	for i, r := range p.requests {
		if r.key != nil && keys == nil {
			keys = make([][]byte, len(p.requests))
		}
		if keys != nil {
			keys[i] = r.key
		}
	}
	return keys
}

func (p *pendingBatch) full(o Options) bool {
	return len(p.requests) >= o.MaxBatch || p.bytes >= o.MaxBatchBytes
}

// add chains r onto tip. A record of the approval lifecycle is checked
// here, at the moment it gets its index and time, against the state of
// every entry chained before it, and the state moves in the same step:
// this is what makes the check and the append one (of N simultaneous
// consumptions of one approval, one is chained first and the others see
// it consumed). A refused record changes nothing: no index, no time.
func (p *pendingBatch) add(r *request, tip *chainState, now func() time.Time) error {
	e := r.entry
	e.Index = p.start + uint64(len(p.requests))
	t := now().UTC().Truncate(time.Microsecond)
	if t.Before(tip.time) {
		t = tip.time // entry times never go backwards
	}
	e.Time, e.Prev = t, tip.hash
	var apply func(commit.Digest)
	if p.approvals != nil {
		var err error
		if apply, err = p.approvals.admit(e, false); err != nil {
			return err
		}
	}
	var m []byte
	var err error
	if r.tmpl != nil {
		m, err = r.tmpl.Message(e.Index, e.Time, e.Prev) // its buffer is now the message
	} else {
		m, err = e.SignedMessage()
	}
	if err != nil { // prepare checked the record: a bug, not bad input
		return fmt.Errorf("ledger: entry %d: %w", e.Index, err)
	}
	tip.time, tip.hash = t, sumSHA256(m)
	if apply != nil {
		apply(tip.hash)
	}
	r.message = m
	p.requests = append(p.requests, r)
	// The stored entry is the message, less its domain separator, plus
	// the signature member: len(m) + signatureMember bounds it from above.
	p.bytes += len(m) + signatureMember
	return nil
}

// finish waits for the batch's signatures and extends the tree edge,
// returning the batch to store and the edge after it.
func (p *pendingBatch) finish(e *edge) (*built, error) {
	p.signing.Wait()
	leaves := make([][]byte, len(p.requests))
	hashes := make([][HashSize]byte, len(p.requests))
	var errs []error
	for i, r := range p.requests {
		leaves[i], hashes[i] = r.leaf, r.hash
		if r.err != nil {
			errs = append(errs, r.err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("ledger: encoding batch: %w", err)
	}
	next := e.clone()
	tiles, err := next.appendLeaves(hashes)
	if err != nil {
		return nil, err
	}
	return &built{
		requests: p.requests,
		batch:    Batch{Start: p.start, Entries: leaves, LeafHashes: hashes, Tiles: tiles, Keys: p.keys()},
		edge:     next,
		end:      p.end,
	}, nil
}

// signJob signs one chained record.
type signJob struct {
	r    *request
	done *sync.WaitGroup
}

// maxSignBatch bounds the jobs a signing worker takes at once: 16
// signatures sharing one field inversion save nearly all there is to save
// (docs/performance.md, "Batch signing"), and a larger group would keep its
// first records waiting longer for the last.
const maxSignBatch = 16

// takeJobs appends first to batch, then the jobs already waiting in jobs,
// up to a share of them for each of the workers and at most maxSignBatch,
// so that one worker does not take the whole queue while the others idle.
// It never waits for a job. It stops at the first job of another pending
// batch and returns it as next, to start the worker's next group: a group
// never mixes two pending batches, so a commit never waits for the
// signatures of records chained after it.
func takeJobs(batch []signJob, first signJob, jobs <-chan signJob, workers int) (_ []signJob, next signJob) {
	n := min(1+len(jobs)/max(workers, 1), maxSignBatch)
	batch = append(batch, first)
	for len(batch) < n {
		select {
		case j, ok := <-jobs:
			if !ok {
				return batch, signJob{}
			}
			if j.done != first.done {
				return batch, j
			}
			batch = append(batch, j)
		default:
			return batch, signJob{}
		}
	}
	return batch, signJob{}
}

// signJobs signs the jobs' records with one Key.SignBatch, which costs
// less CPU per signature than signing them one by one, and builds their
// signed entries.
func signJobs(key *Key, jobs []signJob) {
	msgs := make([][]byte, len(jobs))
	for i, j := range jobs {
		msgs[i] = j.r.message
	}
	sigs := key.SignBatch(msgs)
	for i, j := range jobs {
		j.finish(sigs[i])
	}
}

// finish records the signature of j's record and its signed entry.
func (j signJob) finish(sig []byte) {
	defer j.done.Done()
	r := j.r
	r.entry.Signature = sig
	// The message was built from the checked entry: inserting the
	// signature into it spares checking and encoding it again, and the
	// template inserts it in place, where the message was.
	if r.tmpl != nil {
		r.leaf, r.err = r.tmpl.Signed(sig)
		r.tmpl, r.message = nil, nil // spent
	} else {
		r.leaf, r.err = entry.SignedEntry(r.message, sig)
	}
	if r.err == nil {
		r.hash = entry.LeafHash(r.leaf)
	}
}

// built is a signed batch on its way to the store.
type built struct {
	requests []*request
	batch    Batch
	edge     *edge      // the tree after this batch
	end      chainState // the chain after this batch
}

func answerAll(batch []*request, err error) {
	for _, r := range batch {
		r.answer(result{err: err})
	}
}

// Failure returns the storage failure that stopped appends, or nil; on a
// follower, the *FollowError that stopped its view from moving.
func (l *Ledger) Failure() error { return l.failure() }

func (l *Ledger) failure() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failed
}

// signatureMember is the length of ,"sig":"<88 base64 characters>".
const signatureMember = len(`,"sig":""`) + 88

// drain answers everything still queued at Close with ErrClosed.
func (l *Ledger) drain() {
	for {
		select {
		case r := <-l.queue:
			r.reply <- result{err: ErrClosed}
		default:
			return
		}
	}
}

// commitLoop stores batches in order and answers their requests once
// durable: whenever it is free it takes the pending batch, waits for its
// signatures and commits it. After a storage failure it stores nothing
// more: the store may be unable to say whether the failed batch is durable
// (a failed fsync), and the batches built on top of it would reuse or skip
// indices. Reopening reads the truth from the store. When the sequencer
// stops, it stores what is pending and returns.
func (l *Ledger) commitLoop(p *pipeline, e *edge) {
	var started time.Time // when the latest commit started
	var size int          // its entries
	pace := time.NewTimer(time.Hour)
	pace.Stop()
	for {
		select {
		case <-p.ready:
			if w := l.opts.MaxBatchWait; w > 0 {
				// The store was idle: give the batch time to grow.
				t := time.NewTimer(w)
				select {
				case <-t.C:
				case <-p.filled:
				case <-p.stopped:
				}
				t.Stop()
			}
		case <-p.stopped:
			if c := p.take(); c != nil {
				l.commitBatch(c, &e)
			}
			return
		}
		for {
			if size > 1 {
				l.pace(p, started, pace)
			}
			c := p.take()
			if c == nil {
				break
			}
			started, size = time.Now(), len(c.requests)
			l.commitBatch(c, &e)
		}
	}
}

// pace waits until MinCommitInterval has passed since the latest commit
// started, unless the pending batch is full or fills, or the ledger stops.
func (l *Ledger) pace(p *pipeline, started time.Time, t *time.Timer) {
	wait := l.opts.MinCommitInterval - time.Since(started)
	if wait <= 0 {
		return
	}
	select {
	case <-p.filled: // from a batch taken before
	default:
	}
	if p.full(l.opts) {
		return
	}
	t.Reset(wait)
	select {
	case <-t.C:
	case <-p.filled:
	case <-p.stopped:
	}
	t.Stop()
}

// commitBatch finishes, stores and answers one batch, moving e on.
func (l *Ledger) commitBatch(c *pendingBatch, e **edge) {
	b, err := c.finish(*e)
	if err != nil {
		// The chain already holds these entries: nothing after them may
		// be appended.
		l.mu.Lock()
		l.failed = err
		l.mu.Unlock()
		l.forgetKeys(c.requests)
		answerAll(c.requests, err)
		return
	}
	if !l.store1(b) {
		return
	}
	*e = b.edge
	for i, r := range b.requests {
		r.answer(result{receipt: Receipt{Index: b.batch.Start + uint64(i), Entry: b.batch.Entries[i], LeafHash: b.batch.LeafHashes[i]}})
	}
}

// store1 commits b and makes it the durable tree, or, if storage failed,
// answers b's requests with the failure. It reports whether b is durable
// (its requests are then still to be answered).
func (l *Ledger) store1(b *built) bool {
	if err := l.failure(); err != nil {
		l.forgetKeys(b.requests)
		answerAll(b.requests, fmt.Errorf("%w: %w", ErrClosed, err))
		return false
	}
	// Not cancelled, not bounded here: a Commit given up half-way may
	// leave its outcome unknown. A store bounds its own waits where the
	// database may stop answering (storage/postgres: each round trip
	// within twice Options.StallTimeout, then a storage failure).
	err := l.store.Commit(context.Background(), b.batch)
	if err != nil {
		l.mu.Lock()
		l.failed = err
		l.mu.Unlock()
		l.log.Error("ledger: storing a batch failed; appends stopped", "start", b.batch.Start, "entries", len(b.requests), "error", err)
		l.forgetKeys(b.requests)
		answerAll(b.requests, fmt.Errorf("%w: storing the batch: %w", ErrClosed, err))
		return false
	}
	l.mu.Lock()
	l.edge, l.lastHash, l.lastTime = b.edge, b.end.hash, b.end.time
	l.mu.Unlock()
	select {
	case l.grown <- struct{}{}:
	default:
	}
	l.forgetKeys(b.requests)
	if l.opts.OnBatch != nil {
		l.opts.OnBatch(len(b.requests))
	}
	return true
}

// Close stops the ledger: queued records not yet in a batch are refused
// with ErrClosed, a batch being stored is finished and acknowledged, and a
// final checkpoint is signed. The store is not closed.
func (l *Ledger) Close() error {
	var err error
	l.closed.Do(func() {
		close(l.stop)
		l.done.Wait()
		if l.follow != nil {
			return
		}
		_, err = l.Publish(context.Background())
		if errors.Is(err, ErrClosed) {
			err = nil
		}
		// With the sequencer stopped and no storage failure, every entry
		// chained is durable: the live approval state is the durable
		// log's.
		if ss, ok := l.store.(SnapshotStore); ok && l.failure() == nil {
			l.mu.Lock()
			e := l.edge
			l.mu.Unlock()
			if size := e.size(); size != l.snapSize.Load() && l.worthSnapshot(size) {
				l.putSnapshot(context.Background(), ss, size, l.approvals.encodeSnapshot(size, e.root(), l.refused))
			}
		}
	})
	return err
}

// Size returns the number of durable entries.
func (l *Ledger) Size() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.edge.size()
}

// VerifierKey returns the note verifier key of the ledger's signing key.
func (l *Ledger) VerifierKey() string { return l.key.VerifierKey() }

// Entry returns the stored bytes of the entry at index.
func (l *Ledger) Entry(ctx context.Context, index uint64) ([]byte, error) {
	if l.follow != nil && index >= l.Size() {
		// Beyond the view: stored, perhaps, but not checked yet.
		return nil, fmt.Errorf("entry %d is beyond the follower's view (size %d): %w", index, l.Size(), ErrNotFound)
	}
	return l.store.Entry(ctx, index)
}

// InclusionProof returns the proof that the entry at index is in the tree
// of the given size, which must not exceed the latest checkpoint's.
func (l *Ledger) InclusionProof(ctx context.Context, index, size uint64) ([][]byte, error) {
	if err := l.checkSize(size); err != nil {
		return nil, err
	}
	if index >= size {
		return nil, fmt.Errorf("%w: index %d not below size %d", ErrSize, index, size)
	}
	return l.proofReader(ctx).inclusionProof(index, size)
}

// InclusionProofByHash finds the entry with the given leaf hash and returns
// its index and its inclusion proof in the tree of the given size.
func (l *Ledger) InclusionProofByHash(ctx context.Context, leafHash [HashSize]byte, size uint64) (uint64, [][]byte, error) {
	if err := l.checkSize(size); err != nil {
		return 0, nil, err
	}
	index, err := l.store.IndexOf(ctx, leafHash)
	if err != nil {
		return 0, nil, err
	}
	if index >= size {
		return 0, nil, fmt.Errorf("%w: leaf %x is entry %d, not in the tree of size %d", ErrNotFound, leafHash, index, size)
	}
	// The tree's own leaf hash at index, from the tile the proof reads
	// anyway: a leaf-hash index that names another entry is damaged, and
	// its proof would be of another entry.
	r := l.proofReader(ctx)
	leaf, err := r.node(compact.NodeID{Level: 0, Index: index})
	if err != nil {
		return 0, nil, err
	}
	if !bytes.Equal(leaf, leafHash[:]) {
		return 0, nil, fmt.Errorf("%w: the leaf-hash index gives entry %d for a leaf hash, but the tree's leaf hash there is another", ErrCorrupt, index)
	}
	p, err := r.inclusionProof(index, size)
	return index, p, err
}

// ConsistencyProof returns the proof that the tree of size1 is a prefix of
// the tree of size2 (size1 <= size2 <= the latest checkpoint's size).
func (l *Ledger) ConsistencyProof(ctx context.Context, size1, size2 uint64) ([][]byte, error) {
	if err := l.checkSize(size2); err != nil {
		return nil, err
	}
	if size1 > size2 {
		return nil, fmt.Errorf("%w: size1 %d exceeds size2 %d", ErrSize, size1, size2)
	}
	return l.proofReader(ctx).consistencyProof(size1, size2)
}

func (l *Ledger) checkSize(size uint64) error {
	l.cpMu.Lock()
	defer l.cpMu.Unlock()
	if size > l.cpSize {
		return fmt.Errorf("%w: size %d exceeds the latest checkpoint's %d", ErrSize, size, l.cpSize)
	}
	return nil
}

// verifyConsistency checks, from stored tiles, that the tree of size2 with
// root2 extends the tree of size1 with root1.
func (l *Ledger) verifyConsistency(ctx context.Context, size1 uint64, root1 []byte, size2 uint64, root2 []byte) error {
	if size1 == 0 {
		return nil
	}
	p, err := l.proofReader(ctx).consistencyProof(size1, size2)
	if err != nil {
		return err
	}
	return proof.VerifyConsistency(hasher, size1, size2, p, root1, root2)
}

// RangeProof returns the hashes that prove entries [start, end) are leaves
// of the tree of the given size (at most the latest checkpoint's): the
// compact range of [0, start) and that of [end, size), in the order
// compact.RangeNodes lists their nodes. A verifier hashes the entries into
// the compact range of [start, end) and merges the three into the root.
func (l *Ledger) RangeProof(ctx context.Context, start, end, size uint64) (left, right [][]byte, err error) {
	if err := l.checkSize(size); err != nil {
		return nil, nil, err
	}
	if start > end || end > size {
		return nil, nil, fmt.Errorf("%w: range [%d, %d) not inside size %d", ErrSize, start, end, size)
	}
	r := newTileReader(ctx, l.store)
	if left, err = r.nodes(compact.RangeNodes(0, start, nil)); err != nil {
		return nil, nil, err
	}
	if right, err = r.nodes(compact.RangeNodes(end, size, nil)); err != nil {
		return nil, nil, err
	}
	return left, right, nil
}

// storedKey is the store's form of an idempotency key: scoped to the
// mediator, whose name is length-prefixed so that no two (mediator, key)
// pairs meet.
func storedKey(mediator, key string) []byte {
	return fmt.Appendf(nil, "%d:%s%s", len(mediator), mediator, key)
}

// sameDecision reports whether two prepared entries record the same
// decision: everything the mediator submitted.
func sameDecision(a, b *entry.Entry) bool {
	sameRequest := a.Kind == b.Kind && a.Mediator == b.Mediator && a.Principal == b.Principal && a.Action == b.Action &&
		a.Params.Equal(b.Params) && a.Tiers.Equal(b.Tiers) && bytes.Equal(a.Attributes, b.Attributes)
	switch a.Kind {
	case entry.KindPolicySet:
		return sameRequest && a.PolicySet.Equal(b.PolicySet)
	case entry.KindDecision:
		// The ledger's decision is its answer to the request: a retry
		// evaluated again, after a policy reload say, gets the first
		// answer, whatever the second evaluation said.
		return sameRequest
	case entry.KindApprovalConfig, entry.KindApproval, entry.KindConsumption, entry.KindOutcome:
		// Everything the caller gave; the request index is the ledger's
		// (set on one side only while the other is being chained).
		return sameRequest && a.ApprovalID == b.ApprovalID && a.Approver == b.Approver && a.Verdict == b.Verdict &&
			a.PreviewDigest == b.PreviewDigest && a.Consumption == b.Consumption && a.DecisionIndex == b.DecisionIndex && a.Result == b.Result &&
			a.OperationID == b.OperationID && a.PendingTTL == b.PendingTTL && a.ExecutionTTL == b.ExecutionTTL
	}
	return sameRequest && a.Decision == b.Decision && slices.Equal(a.Policies, b.Policies)
}

// replay looks r's idempotency key up among durable entries and, if it is
// there, returns that entry's receipt (or ErrIdempotencyConflict).
func (l *Ledger) replay(ctx context.Context, r *request) (Receipt, bool, error) {
	index, err := l.store.IndexOfKey(ctx, r.key)
	if errors.Is(err, ErrNotFound) {
		return Receipt{}, false, nil
	}
	if err != nil {
		return Receipt{}, false, err
	}
	b, err := l.store.Entry(ctx, index)
	if err != nil {
		return Receipt{}, false, err
	}
	stored, err := entry.Parse(b)
	if err != nil {
		return Receipt{}, false, fmt.Errorf("%w: entry %d: %w", ErrCorrupt, index, err)
	}
	if err := r.repeats(stored); err != nil {
		return Receipt{}, true, err
	}
	return Receipt{Index: index, Entry: b, LeafHash: entry.LeafHash(b), Replayed: true}, true, nil
}

// repeats says whether r, whose key is that of the entry first (appended
// or being appended), may be answered with first's receipt: nil if so,
// else the refusal.
func (r *request) repeats(first *entry.Entry) error {
	switch {
	case r.final && (!r.retry || !sameDecision(first, r.entry)):
		return refuseOutcome(CodeOutcomeFinal, "")
	case !sameDecision(first, r.entry):
		return ErrIdempotencyConflict
	}
	return nil
}

// finalOutcomeKey is the stored idempotency key of the final outcome of
// the allowed act of the decision at index decision: no stored key of a
// caller's (storedKey) begins with a zero byte.
func finalOutcomeKey(decision uint64) []byte {
	return strconv.AppendUint([]byte("\x00final-outcome:"), decision, 10)
}

// afterFinal refuses r, an unknown outcome of an allowed act, with
// outcome_final if a final outcome of its decision is durable or in
// flight.
func (l *Ledger) afterFinal(ctx context.Context, r *request) error {
	l.keyMu.Lock()
	_, inflight := l.inflight[string(r.finalKey)]
	l.keyMu.Unlock()
	if inflight {
		return refuseOutcome(CodeOutcomeFinal, "")
	}
	switch _, err := l.store.IndexOfKey(ctx, r.finalKey); {
	case err == nil:
		return refuseOutcome(CodeOutcomeFinal, "")
	case !errors.Is(err, ErrNotFound):
		return err
	}
	return nil
}

// checkOutcomeDecision checks the rules of an outcome of an allowed act
// that need its decision: the durable entry at e.DecisionIndex (a
// mediator holds a receipt for it, so it is durable) is an allow
// decision (version 1 or 2, or a version 3 decision) by e's mediator.
func (l *Ledger) checkOutcomeDecision(ctx context.Context, e *entry.Entry) error {
	b, err := l.store.Entry(ctx, e.DecisionIndex)
	if errors.Is(err, ErrNotFound) {
		return refuseOutcome(CodeNoDecision, "")
	}
	if err != nil {
		return err
	}
	d, err := entry.Parse(b)
	if err != nil {
		return fmt.Errorf("%w: entry %d: %w", ErrCorrupt, e.DecisionIndex, err)
	}
	switch {
	case d.Decision != entry.Allow || (d.Kind != "" && d.Kind != entry.KindDecision):
		return refuseOutcome(CodeNoDecision, "")
	case d.Mediator != e.Mediator:
		return refuseOutcome(CodeOutcomeMismatch, codeTermMediator)
	}
	return nil
}

// deduplicate handles a keyed request in the sequencer. It returns true if
// the request was answered or joined the in-flight request with the same
// key, and false if it is to be appended, after registering its key.
func (l *Ledger) deduplicate(r *request) bool {
	l.keyMu.Lock()
	defer l.keyMu.Unlock()
	if orig, ok := l.inflight[string(r.key)]; ok {
		if err := r.repeats(orig.entry); err != nil {
			r.reply <- result{err: err}
		} else {
			orig.followers = append(orig.followers, r)
		}
		return true
	}
	// The key may have become durable since Append looked.
	if receipt, found, err := l.replay(context.Background(), r); found || err != nil {
		r.reply <- result{receipt: receipt, err: err}
		return true
	}
	l.inflight[string(r.key)] = r
	return false
}

// forgetKeys removes the keys of requests that are durable or failed.
func (l *Ledger) forgetKeys(requests []*request) {
	l.keyMu.Lock()
	defer l.keyMu.Unlock()
	for _, r := range requests {
		if r.key != nil {
			delete(l.inflight, string(r.key))
		}
	}
}
