// Package witness gathers witness cosignatures of a log's checkpoints
// (docs/operations.md "Witnesses"): a Set submits each signed checkpoint
// to the C2SP tlog-witness witnesses it is given and serves the
// checkpoint with the cosignatures (C2SP tlog-cosignature) they return.
//
// One goroutine per witness waits for a checkpoint the witness has not
// cosigned, and submits it:
//
//	POST <url>/add-checkpoint
//	old <size the witness last cosigned>
//	<consistency proof from that size, one base64 hash a line>
//	<blank line>
//	<the signed checkpoint>
//
// A witness answers 200 with its cosignature lines, which are verified
// with its configured key before they are kept; 409 Conflict with the size
// it last cosigned (text/x.tlog.size), after which the submission is
// retried at once from that size; anything else, or nothing, is a failure
// retried after a backoff. The first submission after a start says
// "old 0": the witness's answer teaches the size it knows. Appends never
// wait for a witness: only these goroutines do.
//
// A goroutine has one submission in flight, always of the latest
// checkpoint, and starts a cosigned one at most every Options.Interval
// (ledgerd's witness_interval, 1 s by default): the log signs up to ten
// checkpoints a second, and a witness sees only the latest of them when
// its turn comes, so the checkpoints signed meanwhile never queue and are
// never cosigned.
//
// The cosignatures are held in memory (the latest keepSizes sizes) and put
// in a Store (store.go): a File in ledgerd's store_dir, or the database
// shared by the instances on PostgreSQL (storage/postgres). At New the
// latest kept ones are read back, verified, and each witness's
// submissions resume from the largest size it cosigned. A follower (an
// instance that does not sequence, Options.Following) submits nothing: it
// reads the store, verifies every line with the witness's configured key,
// and serves those that verify.
package witness

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/decisionledger/ledger/internal/signednote"
	"github.com/decisionledger/ledger/verify"
)

// The witness client's timing.
const (
	timeout           = 10 * time.Second // one add-checkpoint request
	defaultBackoffMin = time.Second      // after a first failure
	defaultBackoffMax = time.Minute      // at most, doubling from the minimum
	defaultInterval   = time.Second      // Options.Interval's default
	// keepSizes bounds the checkpoint sizes whose cosignatures are kept
	// in memory, so that exports and proofs at recent sizes carry them.
	keepSizes = 1024
	// followInterval is how often a follower reads the cosignatures of
	// its latest checkpoint while it lacks some: as often as its view of
	// the log is refreshed (ledger.Options.FollowInterval).
	followInterval = 200 * time.Millisecond
)

// Failure kinds: SubmitError.Kind, and the keys of
// WitnessSnapshot.Failures (ledgerd's metric's "kind" label).
const (
	FailUnreachable = "unreachable"  // no answer: connection refused, timeout
	FailConflict    = "conflict"     // 409: the witness knows another size
	FailUnknownLog  = "unknown_log"  // 404: the witness does not know the origin
	FailForbidden   = "forbidden"    // 403: the witness refused the log's signature
	FailBadProof    = "bad_proof"    // 422: the consistency proof did not verify for it
	FailBadRequest  = "bad_request"  // 400 and other 4xx
	FailServer      = "server_error" // 5xx
	FailBadAnswer   = "bad_answer"   // 200 without a valid cosignature by its key, or a 409 without a new size
	FailAhead       = "ahead"        // the witness cosigned a larger tree than ours
	FailProof       = "proof"        // the log could not make the proof
)

var failureKinds = []string{FailUnreachable, FailConflict, FailUnknownLog, FailForbidden, FailBadProof,
	FailBadRequest, FailServer, FailBadAnswer, FailAhead, FailProof}

// FailureKinds returns every failure kind, in the order ledgerd's metrics
// list them.
func FailureKinds() []string { return slices.Clone(failureKinds) }

// Log is what a Set reads of the log whose checkpoints it submits and
// serves (*ledger.Ledger is one: a sequencer's, or a follower's view).
type Log interface {
	// Checkpoint returns the latest signed checkpoint and its tree size.
	// There MUST always be one (the empty tree's for a new log), and the
	// size MUST never decrease.
	Checkpoint() ([]byte, uint64)
	// WaitCheckpoint waits until a signed checkpoint covers the first
	// size entries and returns it and its size. It MUST return an error
	// once ctx is done or the log is closed.
	WaitCheckpoint(ctx context.Context, size uint64) ([]byte, uint64, error)
	// CheckpointAt returns the signed checkpoint the log published for
	// exactly size, or an error if it published none.
	CheckpointAt(ctx context.Context, size uint64) ([]byte, error)
	// ConsistencyProof returns the RFC 6962 proof that the tree of size1
	// is a prefix of the tree of size2 (size1 <= size2 <= the latest
	// checkpoint's size).
	ConsistencyProof(ctx context.Context, size1, size2 uint64) ([][]byte, error)
}

// Witness is one C2SP tlog-witness witness.
type Witness struct {
	// Name names the witness in metrics and logs. Required, unique.
	Name string
	// URL is the witness's submission prefix (http or https):
	// checkpoints are posted to URL/add-checkpoint. Required.
	URL string
	// Key is the witness's cosignature/v1 verifier key: only its lines
	// that verify over the checkpoint are held and served. Required, and
	// no two witnesses may share one.
	Key *verify.WitnessKey
}

// Options are a Set's dependencies; the zero value of each optional one
// is its default.
type Options struct {
	// Witnesses are the witnesses to submit to, in the order Cosignatures
	// returns their lines. Required: at least one.
	Witnesses []Witness
	// Log is the log whose checkpoints are submitted and served.
	// Required.
	Log Log
	// Store keeps the cosignatures beyond this process's memory. Optional;
	// nil keeps none.
	Store Store
	// Following makes a follower's Set: Run submits nothing; Follow reads
	// the cosignatures Store holds (put by the sequencer), and
	// Cosignatures serves those that verify.
	Following bool
	// Interval is the least time between the starts of two cosigned
	// submissions to one witness (ledgerd's witness_interval). Optional;
	// default 1 s.
	Interval time.Duration
	// Needed is how many cosignatures a checkpoint should gather
	// (ledgerd's witnesses_needed), which Snapshot reports; a Set never
	// holds a checkpoint back for want of them. Optional; default (0)
	// every witness; at most len(Witnesses).
	Needed int
	// BackoffMin and BackoffMax bound the wait before a failed
	// submission is retried: BackoffMin after a first failure, doubling
	// up to BackoffMax. Optional; defaults 1 s and 1 min.
	BackoffMin, BackoffMax time.Duration
	// Logger receives the failures of submissions and of the store.
	// Optional; nil discards them.
	Logger *slog.Logger
}

// Set gathers cosignatures from its witnesses and serves them. Its
// methods may be called concurrently (Cosignatures from every request
// that serves a checkpoint), but for one Run and one Follow at a time.
type Set struct {
	l      Log
	log    *slog.Logger
	client *http.Client
	needed int
	// store keeps the cosignatures beyond this process's memory; nil
	// keeps none.
	store Store
	// following: a follower's, which submits nothing and serves what
	// store holds (see Cosignatures).
	following bool
	// startSize is the latest checkpoint's size at the start: a
	// sequencer's store holds no line for a later size that it did not
	// put itself.
	startSize uint64
	// backoffMin and backoffMax bound the backoff after a failure.
	backoffMin, backoffMax time.Duration
	// interval is the least time between the starts of two cosigned
	// submissions to one witness.
	interval time.Duration
	ws       []*state

	// followErr is the follow loop's last error, logged once.
	followErr string

	mu     sync.Mutex
	cosigs map[uint64][][]byte // size → each witness's cosignature line (nil: none yet)
	sizes  []uint64            // the sizes in cosigs, ascending
}

// state is one witness's.
type state struct {
	i int
	Witness

	// Guarded by Set.mu.
	//
	// known is the size the witness knows the log at, as far as we know:
	// the size of its latest cosignature of ours, or the size a 409 named,
	// which a submission's proof starts from. cosigned is the largest
	// size of this log's history that it cosigned (a verified line over
	// our checkpoint), which the metrics report: on a forked store the
	// witness knows a size of the other history, never cosigned here.
	known, cosigned uint64
	lastSuccess     time.Time
	failures        map[string]uint64
}

// New sets up the witnesses of opts and loads the cosignatures kept in
// opts.Store. A store that cannot be read is logged and skipped: the
// witnesses answer with the sizes they know.
func New(ctx context.Context, opts Options) (*Set, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	s := &Set{
		l: opts.Log, log: opts.Logger, client: &http.Client{Timeout: timeout},
		needed: opts.Needed, backoffMin: opts.BackoffMin, backoffMax: opts.BackoffMax,
		interval: opts.Interval, store: opts.Store, following: opts.Following,
		cosigs: map[uint64][][]byte{},
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.needed == 0 {
		s.needed = len(opts.Witnesses)
	}
	if s.interval == 0 {
		s.interval = defaultInterval
	}
	if s.backoffMin == 0 {
		s.backoffMin = defaultBackoffMin
	}
	if s.backoffMax == 0 {
		s.backoffMax = defaultBackoffMax
	}
	_, s.startSize = s.l.Checkpoint()
	for i, w := range opts.Witnesses {
		s.ws = append(s.ws, &state{i: i, Witness: w, failures: map[string]uint64{}})
	}
	s.load(ctx)
	return s, nil
}

// check refuses options New cannot work with: no log, no witness, a
// witness without a name, URL or key, two with one name or key, a needed
// count out of range or a negative duration.
func (o *Options) check() error {
	if o.Log == nil {
		return errors.New("witness: no log")
	}
	if len(o.Witnesses) == 0 {
		return errors.New("witness: no witnesses")
	}
	names, keys := map[string]int{}, map[string]int{}
	for i, w := range o.Witnesses {
		switch {
		case w.Name == "":
			return fmt.Errorf("witness: witnesses[%d]: no name", i)
		case w.URL == "":
			return fmt.Errorf("witness: witnesses[%d] (%s): no URL", i, w.Name)
		case w.Key == nil:
			return fmt.Errorf("witness: witnesses[%d] (%s): no key", i, w.Name)
		}
		if j, ok := names[w.Name]; ok {
			return fmt.Errorf("witness: witnesses[%d]: name %q is witnesses[%d]'s", i, w.Name, j)
		}
		if j, ok := keys[w.Key.ID()]; ok {
			return fmt.Errorf("witness: witnesses[%d] (%s): its key is witnesses[%d]'s", i, w.Name, j)
		}
		names[w.Name], keys[w.Key.ID()] = i, i
	}
	if o.Needed < 0 || o.Needed > len(o.Witnesses) {
		return fmt.Errorf("witness: %d cosignatures needed of %d witnesses", o.Needed, len(o.Witnesses))
	}
	if o.Interval < 0 || o.BackoffMin < 0 || o.BackoffMax < 0 {
		return errors.New("witness: a negative interval or backoff")
	}
	return nil
}

// load reads the latest cosignatures kept in the store: those of each
// witness's largest size, which count once they verify, and from which
// its submissions resume. A store that cannot be read is logged and
// skipped: the witnesses answer with the sizes they know.
func (s *Set) load(ctx context.Context) {
	if s.store == nil {
		return
	}
	latest, err := s.store.LatestCosignatures(ctx)
	if err != nil {
		s.log.WarnContext(ctx, "witness: reading the kept cosignatures failed; gathering them again", "error", err)
		return
	}
	sizes := map[uint64]bool{}
	for _, w := range s.ws {
		if size, ok := latest[w.Key.ID()]; ok {
			sizes[size] = true
		}
	}
	for size := range sizes {
		if err := s.read(ctx, size); err != nil {
			s.log.WarnContext(ctx, "witness: reading the kept cosignatures failed; gathering them again", "size", size, "error", err)
		}
	}
}

// read verifies the lines store holds for the checkpoint of size, of the
// witnesses with none held for it, and holds those that verify over the
// checkpoint the log signed for size; the others are ignored. A witness's
// known size moves up to size with a valid line.
func (s *Set) read(ctx context.Context, size uint64) error {
	lines, err := s.store.Cosignatures(ctx, size)
	if err != nil || len(lines) == 0 {
		return err
	}
	var cp []byte
	if latest, latestSize := s.l.Checkpoint(); size == latestSize {
		cp = latest
	} else if size > latestSize {
		return nil // beyond a follower's view: not served yet
	} else if cp, err = s.l.CheckpointAt(ctx, size); err != nil {
		return err
	}
	for _, w := range s.ws {
		line := lines[w.Key.ID()]
		if line == nil || s.has(size, w.i) {
			continue
		}
		if line = w.cosignature(cp, line); line == nil {
			continue // not w's valid cosignature of this checkpoint: never served
		}
		s.add(size, w.i, line)
		s.mu.Lock()
		w.known, w.cosigned = max(w.known, size), max(w.cosigned, size)
		s.mu.Unlock()
	}
	return nil
}

// Follow is a follower's loop until ctx ends: every 200 ms, unless idle
// reports that the instance sequences (its term's Set gathers them
// then), it reads the cosignatures of the latest checkpoint of its view
// while it lacks some. A failure is logged when it first occurs, and the
// recovery after it. Only one Follow may run at a time.
func (s *Set) Follow(ctx context.Context, idle func() bool) {
	t := time.NewTicker(followInterval)
	defer t.Stop()
	for {
		if _, size := s.l.Checkpoint(); !idle() && !s.complete(size) {
			err := s.read(ctx, size)
			if ctx.Err() != nil {
				return
			}
			var msg string
			if err != nil {
				msg = err.Error()
			}
			if msg != s.followErr {
				if err != nil {
					s.log.WarnContext(ctx, "witness: reading the cosignatures kept by the sequencer failed; retrying", "size", size, "error", err)
				} else {
					s.log.InfoContext(ctx, "witness: reading the cosignatures kept by the sequencer again", "size", size)
				}
				s.followErr = msg
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Run submits checkpoints until ctx ends, one goroutine per witness. It
// returns when every witness's goroutine has; at once on a follower's
// Set.
func (s *Set) Run(ctx context.Context) {
	if s.following {
		return
	}
	var wg sync.WaitGroup
	for _, w := range s.ws {
		wg.Go(func() { s.loop(ctx, w) })
	}
	wg.Wait()
}

func (s *Set) loop(ctx context.Context, w *state) {
	backoff := time.Duration(0)
	var last time.Time // when the latest cosigned submission started
	for ctx.Err() == nil {
		_, size := s.l.Checkpoint()
		if s.has(size, w.i) {
			// Cosigned: wait for a larger checkpoint.
			if _, _, err := s.l.WaitCheckpoint(ctx, size+1); err != nil {
				return
			}
			continue
		}
		if wait := s.interval - time.Since(last); wait > 0 {
			// Then submit the latest checkpoint, not this one.
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			continue
		}
		cp, size := s.l.Checkpoint()
		started := time.Now()
		kind, err := s.submit(ctx, w, cp, size)
		if err == nil {
			backoff, last = 0, started
			continue
		}
		if ctx.Err() != nil {
			return
		}
		s.fail(w, kind)
		if kind == FailConflict {
			continue // retried at once from the size the witness gave
		}
		backoff = min(max(2*backoff, s.backoffMin), s.backoffMax)
		s.log.WarnContext(ctx, "witness: submission failed", "witness", w.Name, "kind", kind,
			"size", size, "retry_in", backoff.String(), "error", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
	}
}

// SubmitError is a failed submission to a witness.
type SubmitError struct {
	Witness string // its name
	Kind    string // one of FailureKinds
	Err     error
}

func (e *SubmitError) Error() string {
	return fmt.Sprintf("witness %s: %s: %v", e.Witness, e.Kind, e.Err)
}

func (e *SubmitError) Unwrap() error { return e.Err }

// Submit sends the signed checkpoint cp, of size, once to the witness
// named name, as Run does: with a consistency proof from the size the Set
// knows the witness at, which a 409 answer moves to the witness's. The
// cosignature returned is held and put in the store. A failure is a
// *SubmitError; unlike Run's, it is not counted in Snapshot's failures.
func (s *Set) Submit(ctx context.Context, name string, cp []byte, size uint64) error {
	i := slices.IndexFunc(s.ws, func(w *state) bool { return w.Name == name })
	if i < 0 {
		return fmt.Errorf("witness: no witness named %q", name)
	}
	if kind, err := s.submit(ctx, s.ws[i], cp, size); err != nil {
		return &SubmitError{Witness: name, Kind: kind, Err: err}
	}
	return nil
}

// submit sends the checkpoint of the given size to w with a consistency
// proof from the size w knows, and keeps the cosignature. On failure it
// returns the failure's kind.
func (s *Set) submit(ctx context.Context, w *state, cp []byte, size uint64) (string, error) {
	s.mu.Lock()
	old := w.known
	s.mu.Unlock()
	if old > size {
		// The witness cosigned a larger tree of this origin than ours: a
		// store restored from a backup, or another history under the
		// same key. It will never cosign ours until we pass that size.
		return FailAhead, fmt.Errorf("the witness has cosigned a tree of size %d, larger than the latest checkpoint's %d: was the store restored from a backup, or does another log sign with this key?", old, size)
	}
	var body bytes.Buffer
	fmt.Fprintf(&body, "old %d\n", old)
	if old > 0 {
		p, err := s.l.ConsistencyProof(ctx, old, size)
		if err != nil {
			return FailProof, fmt.Errorf("consistency proof from %d to %d: %w", old, size, err)
		}
		for _, h := range p {
			body.WriteString(base64.StdEncoding.EncodeToString(h))
			body.WriteByte('\n')
		}
	}
	body.WriteByte('\n')
	body.Write(cp)
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, strings.TrimSuffix(w.URL, "/")+"/add-checkpoint", &body)
	if err != nil {
		return FailBadRequest, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return FailUnreachable, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return FailUnreachable, err
	}
	switch {
	case resp.StatusCode == http.StatusOK:
	case resp.StatusCode == http.StatusConflict:
		text := strings.TrimSuffix(string(answer), "\n")
		known, err := strconv.ParseUint(text, 10, 64)
		if err != nil || strconv.FormatUint(known, 10) != text {
			return FailBadAnswer, fmt.Errorf("409 Conflict without a tree size: %q", limitText(answer))
		}
		if known == old {
			// Retrying at once would loop: wait like any failure.
			return FailBadAnswer, fmt.Errorf("409 Conflict naming the size sent, %d", old)
		}
		// Not cosigned here, as far as we know: the size may be another
		// history's (the proof from it then fails).
		s.mu.Lock()
		w.known = known
		s.mu.Unlock()
		return FailConflict, fmt.Errorf("the witness has cosigned size %d, not %d", known, old)
	case resp.StatusCode == http.StatusNotFound:
		return FailUnknownLog, fmt.Errorf("404: the witness does not know the log's origin (witnessctl add-log): %q", limitText(answer))
	case resp.StatusCode == http.StatusForbidden:
		return FailForbidden, fmt.Errorf("403: the witness refused the checkpoint's signature (witnessctl add-key with the ledger's verifier key?): %q", limitText(answer))
	case resp.StatusCode == http.StatusUnprocessableEntity:
		return FailBadProof, fmt.Errorf("422: the witness refused the consistency proof from size %d: %q", old, limitText(answer))
	case resp.StatusCode >= 500:
		return FailServer, fmt.Errorf("%s: %q", resp.Status, limitText(answer))
	default:
		return FailBadRequest, fmt.Errorf("%s: %q", resp.Status, limitText(answer))
	}
	line := w.cosignature(cp, answer)
	if line == nil {
		return FailBadAnswer, fmt.Errorf("200 without a valid cosignature by %s: %q", w.Key.ID(), limitText(answer))
	}
	s.mu.Lock()
	w.known, w.cosigned, w.lastSuccess = size, max(w.cosigned, size), time.Now()
	s.mu.Unlock()
	s.add(size, w.i, line)
	if s.store != nil {
		// Served from memory here at once; kept for restarts, the other
		// instances and the next sequencer. A failure costs only that.
		if err := s.store.PutCosignature(ctx, size, w.Key.ID(), line); err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "witness: keeping the cosignature failed; it is served by this instance only", "witness", w.Name, "size", size, "error", err)
		}
	}
	return "", nil
}

func limitText(b []byte) string {
	if len(b) > 200 {
		b = b[:200]
	}
	return string(b)
}

// cosignature returns the first of the signature lines that is w's and
// verifies over the checkpoint cp, or nil. Lines by other keys are
// ignored, as C2SP tlog-witness says.
func (w *state) cosignature(cp, lines []byte) []byte {
	for line := range bytes.Lines(lines) {
		rest, ok := bytes.CutPrefix(line, []byte("— "))
		if !ok || !bytes.HasSuffix(rest, []byte("\n")) {
			continue
		}
		name, b64, _ := strings.Cut(strings.TrimSuffix(string(rest), "\n"), " ")
		sig, err := base64.StdEncoding.DecodeString(b64)
		if err != nil || len(sig) < 4 || name != w.Key.Name() || binary.BigEndian.Uint32(sig) != w.Key.KeyHash() {
			continue
		}
		// The line is w's: the note with it must open as strictly as
		// ledger-verify opens it (canonical base64, the signature
		// verifying over the checkpoint's text).
		if _, err := signednote.Open(append(bytes.Clone(cp), line...), w.Key); err != nil {
			continue
		}
		return bytes.Clone(line)
	}
	return nil
}

// add holds w's cosignature line for the checkpoint of size in memory.
func (s *Set) add(size uint64, i int, line []byte) {
	s.mu.Lock()
	lines, ok := s.cosigs[size]
	if !ok {
		lines = make([][]byte, len(s.ws))
		s.cosigs[size] = lines
		s.sizes = append(s.sizes, size)
		// Sizes come in increasing order but for one cosigned again
		// after a restart: keep them sorted.
		for j := len(s.sizes) - 1; j > 0 && s.sizes[j] < s.sizes[j-1]; j-- {
			s.sizes[j], s.sizes[j-1] = s.sizes[j-1], s.sizes[j]
		}
		if len(s.sizes) > keepSizes {
			delete(s.cosigs, s.sizes[0])
			s.sizes = s.sizes[1:]
		}
	}
	lines[i] = line
	s.mu.Unlock()
}

// has reports whether witness i's cosignature for size is held.
func (s *Set) has(size uint64, i int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	lines := s.cosigs[size]
	return lines != nil && lines[i] != nil
}

// complete reports whether every witness's cosignature for size is held.
func (s *Set) complete(size uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	lines := s.cosigs[size]
	return lines != nil && !slices.ContainsFunc(lines, func(l []byte) bool { return l == nil })
}

// Cosignatures returns the cosignature lines held for the checkpoint of
// size, in the witnesses' order, and how many there are. A nil Set (no
// witnesses configured) holds none.
//
// What memory holds answers, but for a size that memory may lack lines
// of and the store may hold: on a sequencer (which gathers them), one
// older than its start that it holds none of (cosigned under an earlier
// term, or before a restart, and not the latest of any witness, which
// were loaded); on a follower, any but its latest checkpoint's (which its
// loop keeps current) that it lacks some of. The store's lines are
// verified first. Neither reads the store for the latest checkpoint, the
// one most asked for.
func (s *Set) Cosignatures(ctx context.Context, size uint64) ([]byte, int) {
	if s == nil {
		return nil, 0
	}
	s.mu.Lock()
	held := s.cosigs[size] != nil
	s.mu.Unlock()
	var read bool
	if s.following {
		_, latest := s.l.Checkpoint()
		read = size != latest && !s.complete(size)
	} else {
		read = !held && size < s.startSize
	}
	if read && s.store != nil {
		// A failure serves what memory holds: the store is down, and
		// the follow loop or the term's step-down report it.
		s.read(ctx, size)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var b []byte
	n := 0
	for _, line := range s.cosigs[size] {
		if line != nil {
			b = append(b, line...)
			n++
		}
	}
	return b, n
}

// Cosigned returns the signed checkpoint cp, of size, with the
// cosignature lines held for it added.
func (s *Set) Cosigned(ctx context.Context, cp []byte, size uint64) []byte {
	lines, _ := s.Cosignatures(ctx, size)
	return append(bytes.Clone(cp), lines...)
}

func (s *Set) fail(w *state, kind string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w.failures[kind]++
}

// Snapshot is a Set's state as ledgerd's metrics report it.
type Snapshot struct {
	// Needed is Options.Needed, or the number of witnesses.
	Needed int
	// Size is the latest checkpoint's size, and Held the number of
	// valid cosignatures held for it.
	Size uint64
	Held int
	// Following is Options.Following: a follower submits nothing, so
	// its witnesses' Failures and LastSuccess stay zero.
	Following bool
	// Witnesses are in Options.Witnesses's order.
	Witnesses []WitnessSnapshot
}

// WitnessSnapshot is one witness's part of a Snapshot.
type WitnessSnapshot struct {
	Name string
	// Cosigned is the largest tree size of this log's history the
	// witness cosigned, as far as the Set knows (0 until it cosigns);
	// Lag is the entries the latest checkpoint has beyond it.
	Cosigned, Lag uint64
	// Failures counts Run's failed submissions by kind: every kind of
	// FailureKinds is a key.
	Failures map[string]uint64
	// LastSuccess is when the witness last returned a valid
	// cosignature since New; zero if it has not.
	LastSuccess time.Time
}

// Snapshot returns the Set's state now; a nil Set's is the zero Snapshot.
func (s *Set) Snapshot() Snapshot {
	if s == nil {
		return Snapshot{}
	}
	_, size := s.l.Checkpoint()
	_, n := s.Cosignatures(context.Background(), size)
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := Snapshot{Needed: s.needed, Size: size, Held: n, Following: s.following}
	for _, w := range s.ws {
		failures := make(map[string]uint64, len(failureKinds))
		for _, k := range failureKinds {
			failures[k] = w.failures[k]
		}
		snap.Witnesses = append(snap.Witnesses, WitnessSnapshot{Name: w.Name, Cosigned: w.cosigned,
			Lag: size - min(size, w.cosigned), Failures: failures, LastSuccess: w.lastSuccess})
	}
	return snap
}
