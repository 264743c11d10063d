// Witnesses (docs/operations.md "Witnesses"): ledgerd submits each signed
// checkpoint to the C2SP tlog-witness witnesses of its config and serves
// the checkpoint with the cosignatures (C2SP tlog-cosignature) they
// return.
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
// checkpoint, and starts a cosigned one at most every witness_interval
// (1 s by default): the log signs up to ten checkpoints a second, and a
// witness sees only the latest of them when its turn comes, so the
// checkpoints signed meanwhile never queue and are never cosigned.
//
// The cosignatures are held in memory (the latest witnessKeep sizes) and
// put in a cosignatureStore (cosignatures.go): store_dir's file, or the
// database shared by the instances on PostgreSQL. At a start the latest
// kept ones are read back, verified, and each witness's submissions
// resume from the largest size it cosigned. A follower (an instance that
// does not sequence) submits nothing: it reads the store, verifies every
// line with the witness's configured key, and serves those that verify.

package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/decisionledger/ledger/internal/signednote"
	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/verify"
	"github.com/prometheus/client_golang/prometheus"
)

// The witness client's timing.
const (
	witnessTimeout    = 10 * time.Second // one add-checkpoint request
	witnessBackoffMin = time.Second      // after a first failure
	witnessBackoffMax = time.Minute      // at most, doubling from the minimum
	// witnessKeep bounds the checkpoint sizes whose cosignatures are kept
	// in memory, so that exports and proofs at recent sizes carry them.
	witnessKeep = 1024
	// cosignedFileName, in store_dir, holds the latest checkpoint with
	// the cosignatures gathered for it (cosignedFile), so that a restart
	// serves them at once.
	cosignedFileName = "cosigned-checkpoint"
	// followCosignatures is how often a follower reads the cosignatures
	// of its latest checkpoint while it lacks some: as often as its view
	// of the log is refreshed (ledger.Options.FollowInterval).
	followCosignatures = 200 * time.Millisecond
)

// Failure kinds, the values of the metric's "kind" label.
const (
	failUnreachable = "unreachable"  // no answer: connection refused, timeout
	failConflict    = "conflict"     // 409: the witness knows another size
	failUnknownLog  = "unknown_log"  // 404: the witness does not know the origin
	failForbidden   = "forbidden"    // 403: the witness refused the log's signature
	failBadProof    = "bad_proof"    // 422: the consistency proof did not verify for it
	failBadRequest  = "bad_request"  // 400 and other 4xx
	failServer      = "server_error" // 5xx
	failBadAnswer   = "bad_answer"   // 200 without a valid cosignature by its key, or a 409 without a new size
	failAhead       = "ahead"        // the witness cosigned a larger tree than ours
	failProof       = "proof"        // the ledger could not make the proof
)

var failureKinds = []string{failUnreachable, failConflict, failUnknownLog, failForbidden, failBadProof,
	failBadRequest, failServer, failBadAnswer, failAhead, failProof}

// witnesses gathers cosignatures from the configured witnesses.
type witnesses struct {
	l      *ledger.Ledger
	log    *slog.Logger
	client *http.Client
	needed int
	// store keeps the cosignatures beyond this process's memory; nil
	// keeps none.
	store cosignatureStore
	// following: a follower's, which submits nothing and serves what
	// store holds (see Cosignatures).
	following bool
	// startSize is the latest checkpoint's size at the start: a
	// sequencer's store holds no line for a later size that it did not
	// put itself.
	startSize uint64
	// backoffMin and backoffMax are the witness constants; tests shorten
	// them.
	backoffMin, backoffMax time.Duration
	// interval is witness_interval: the least time between the starts of
	// two cosigned submissions to one witness.
	interval time.Duration
	ws       []*witnessState

	// followErr is the follow loop's last error, logged once.
	followErr string

	mu     sync.Mutex
	cosigs map[uint64][][]byte // size → each witness's cosignature line (nil: none yet)
	sizes  []uint64            // the sizes in cosigs, ascending
}

type witnessState struct {
	i   int
	cfg WitnessConfig
	key *verify.WitnessKey

	// Guarded by witnesses.mu.
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

// newWitnesses sets up the config's witnesses (Config.check checked
// them) and loads the cosignatures kept in store (nil: none).
func newWitnesses(ctx context.Context, cfg *Config, l *ledger.Ledger, store cosignatureStore, log *slog.Logger) (*witnesses, error) {
	interval, err := cfg.witnessInterval()
	if err != nil {
		return nil, err
	}
	ws := &witnesses{
		l: l, log: log, client: &http.Client{Timeout: witnessTimeout},
		needed: cfg.witnessesNeeded(), backoffMin: witnessBackoffMin, backoffMax: witnessBackoffMax,
		interval: interval, store: store,
		cosigs: map[uint64][][]byte{},
	}
	_, ws.startSize = l.Checkpoint()
	for i, c := range cfg.Witnesses {
		k, err := verify.ParseWitnessKey(c.Key)
		if err != nil {
			return nil, fmt.Errorf("witnesses[%d] (%s): %w", i, c.Name, err)
		}
		ws.ws = append(ws.ws, &witnessState{i: i, cfg: c, key: k, failures: map[string]uint64{}})
	}
	ws.load(ctx)
	return ws, nil
}

// storedCosignatures returns the cosignature file of store_dir, or nil
// without one.
func storedCosignatures(cfg *Config, l *ledger.Ledger) cosignatureStore {
	if cfg.StoreDir == "" {
		return nil
	}
	return newCosignedFile(filepath.Join(cfg.StoreDir, cosignedFileName), l.CheckpointAt)
}

// load reads the latest cosignatures kept in the store: those of each
// witness's largest size, which count once they verify, and from which
// its submissions resume. A store that cannot be read is logged and
// skipped: the witnesses answer with the sizes they know.
func (ws *witnesses) load(ctx context.Context) {
	if ws.store == nil {
		return
	}
	latest, err := ws.store.LatestCosignatures(ctx)
	if err != nil {
		ws.log.WarnContext(ctx, "witness: reading the kept cosignatures failed; gathering them again", "error", err)
		return
	}
	sizes := map[uint64]bool{}
	for _, w := range ws.ws {
		if size, ok := latest[w.key.ID()]; ok {
			sizes[size] = true
		}
	}
	for size := range sizes {
		if err := ws.read(ctx, size); err != nil {
			ws.log.WarnContext(ctx, "witness: reading the kept cosignatures failed; gathering them again", "size", size, "error", err)
		}
	}
}

// read verifies the lines store holds for the checkpoint of size, of the
// witnesses with none held for it, and holds those that verify over the
// checkpoint the log signed for size; the others are ignored. A witness's
// known size moves up to size with a valid line.
func (ws *witnesses) read(ctx context.Context, size uint64) error {
	lines, err := ws.store.Cosignatures(ctx, size)
	if err != nil || len(lines) == 0 {
		return err
	}
	var cp []byte
	if latest, latestSize := ws.l.Checkpoint(); size == latestSize {
		cp = latest
	} else if size > latestSize {
		return nil // beyond a follower's view: not served yet
	} else if cp, err = ws.l.CheckpointAt(ctx, size); err != nil {
		return err
	}
	for _, w := range ws.ws {
		line := lines[w.key.ID()]
		if line == nil || ws.has(size, w.i) {
			continue
		}
		if line = w.cosignature(cp, line); line == nil {
			continue // not w's valid cosignature of this checkpoint: never served
		}
		ws.add(size, w.i, line)
		ws.mu.Lock()
		w.known, w.cosigned = max(w.known, size), max(w.cosigned, size)
		ws.mu.Unlock()
	}
	return nil
}

// follow is a follower's loop until ctx ends: every followCosignatures,
// unless idle reports that the instance sequences (its term's witnesses
// gather them then), it reads the cosignatures of the latest checkpoint
// of its view while it lacks some. A failure is logged when it first
// occurs, and the recovery after it.
func (ws *witnesses) follow(ctx context.Context, idle func() bool) {
	t := time.NewTicker(followCosignatures)
	defer t.Stop()
	for {
		if _, size := ws.l.Checkpoint(); !idle() && !ws.complete(size) {
			err := ws.read(ctx, size)
			if ctx.Err() != nil {
				return
			}
			var msg string
			if err != nil {
				msg = err.Error()
			}
			if msg != ws.followErr {
				if err != nil {
					ws.log.WarnContext(ctx, "witness: reading the cosignatures kept by the sequencer failed; retrying", "size", size, "error", err)
				} else {
					ws.log.InfoContext(ctx, "witness: reading the cosignatures kept by the sequencer again", "size", size)
				}
				ws.followErr = msg
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// run submits checkpoints until ctx ends. It returns when every
// witness's goroutine has.
func (ws *witnesses) run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, w := range ws.ws {
		wg.Go(func() { ws.loop(ctx, w) })
	}
	wg.Wait()
}

func (ws *witnesses) loop(ctx context.Context, w *witnessState) {
	backoff := time.Duration(0)
	var last time.Time // when the latest cosigned submission started
	for ctx.Err() == nil {
		_, size := ws.l.Checkpoint()
		if ws.has(size, w.i) {
			// Cosigned: wait for a larger checkpoint.
			if _, _, err := ws.l.WaitCheckpoint(ctx, size+1); err != nil {
				return
			}
			continue
		}
		if wait := ws.interval - time.Since(last); wait > 0 {
			// Then submit the latest checkpoint, not this one.
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			continue
		}
		cp, size := ws.l.Checkpoint()
		started := time.Now()
		kind, err := ws.submit(ctx, w, cp, size)
		if err == nil {
			backoff, last = 0, started
			continue
		}
		if ctx.Err() != nil {
			return
		}
		ws.fail(w, kind)
		if kind == failConflict {
			continue // retried at once from the size the witness gave
		}
		backoff = min(max(2*backoff, ws.backoffMin), ws.backoffMax)
		ws.log.WarnContext(ctx, "witness: submission failed", "witness", w.cfg.Name, "kind", kind,
			"size", size, "retry_in", backoff.String(), "error", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
	}
}

// submit sends the checkpoint of the given size to w with a consistency
// proof from the size w knows, and keeps the cosignature. On failure it
// returns the failure's kind.
func (ws *witnesses) submit(ctx context.Context, w *witnessState, cp []byte, size uint64) (string, error) {
	ws.mu.Lock()
	old := w.known
	ws.mu.Unlock()
	if old > size {
		// The witness cosigned a larger tree of this origin than ours: a
		// store restored from a backup, or another history under the
		// same key. It will never cosign ours until we pass that size.
		return failAhead, fmt.Errorf("the witness has cosigned a tree of size %d, larger than the latest checkpoint's %d: was the store restored from a backup, or does another log sign with this key?", old, size)
	}
	var body bytes.Buffer
	fmt.Fprintf(&body, "old %d\n", old)
	if old > 0 {
		p, err := ws.l.ConsistencyProof(ctx, old, size)
		if err != nil {
			return failProof, fmt.Errorf("consistency proof from %d to %d: %w", old, size, err)
		}
		for _, h := range p {
			body.WriteString(base64.StdEncoding.EncodeToString(h))
			body.WriteByte('\n')
		}
	}
	body.WriteByte('\n')
	body.Write(cp)
	rctx, cancel := context.WithTimeout(ctx, witnessTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, strings.TrimSuffix(w.cfg.URL, "/")+"/add-checkpoint", &body)
	if err != nil {
		return failBadRequest, err
	}
	resp, err := ws.client.Do(req)
	if err != nil {
		return failUnreachable, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return failUnreachable, err
	}
	switch {
	case resp.StatusCode == http.StatusOK:
	case resp.StatusCode == http.StatusConflict:
		text := strings.TrimSuffix(string(answer), "\n")
		known, err := strconv.ParseUint(text, 10, 64)
		if err != nil || strconv.FormatUint(known, 10) != text {
			return failBadAnswer, fmt.Errorf("409 Conflict without a tree size: %q", limitText(answer))
		}
		if known == old {
			// Retrying at once would loop: wait like any failure.
			return failBadAnswer, fmt.Errorf("409 Conflict naming the size sent, %d", old)
		}
		// Not cosigned here, as far as we know: the size may be another
		// history's (the proof from it then fails).
		ws.mu.Lock()
		w.known = known
		ws.mu.Unlock()
		return failConflict, fmt.Errorf("the witness has cosigned size %d, not %d", known, old)
	case resp.StatusCode == http.StatusNotFound:
		return failUnknownLog, fmt.Errorf("404: the witness does not know the log's origin (witnessctl add-log): %q", limitText(answer))
	case resp.StatusCode == http.StatusForbidden:
		return failForbidden, fmt.Errorf("403: the witness refused the checkpoint's signature (witnessctl add-key with the ledger's verifier key?): %q", limitText(answer))
	case resp.StatusCode == http.StatusUnprocessableEntity:
		return failBadProof, fmt.Errorf("422: the witness refused the consistency proof from size %d: %q", old, limitText(answer))
	case resp.StatusCode >= 500:
		return failServer, fmt.Errorf("%s: %q", resp.Status, limitText(answer))
	default:
		return failBadRequest, fmt.Errorf("%s: %q", resp.Status, limitText(answer))
	}
	line := w.cosignature(cp, answer)
	if line == nil {
		return failBadAnswer, fmt.Errorf("200 without a valid cosignature by %s: %q", w.key.ID(), limitText(answer))
	}
	ws.mu.Lock()
	w.known, w.cosigned, w.lastSuccess = size, max(w.cosigned, size), time.Now()
	ws.mu.Unlock()
	ws.add(size, w.i, line)
	if ws.store != nil {
		// Served from memory here at once; kept for restarts, the other
		// instances and the next sequencer. A failure costs only that.
		if err := ws.store.PutCosignature(ctx, size, w.key.ID(), line); err != nil && ctx.Err() == nil {
			ws.log.WarnContext(ctx, "witness: keeping the cosignature failed; it is served by this instance only", "witness", w.cfg.Name, "size", size, "error", err)
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
func (w *witnessState) cosignature(cp, lines []byte) []byte {
	for line := range bytes.Lines(lines) {
		rest, ok := bytes.CutPrefix(line, []byte("— "))
		if !ok || !bytes.HasSuffix(rest, []byte("\n")) {
			continue
		}
		name, b64, _ := strings.Cut(strings.TrimSuffix(string(rest), "\n"), " ")
		sig, err := base64.StdEncoding.DecodeString(b64)
		if err != nil || len(sig) < 4 || name != w.key.Name() || binary.BigEndian.Uint32(sig) != w.key.KeyHash() {
			continue
		}
		// The line is w's: the note with it must open as strictly as
		// ledger-verify opens it (canonical base64, the signature
		// verifying over the checkpoint's text).
		if _, err := signednote.Open(append(bytes.Clone(cp), line...), w.key); err != nil {
			continue
		}
		return bytes.Clone(line)
	}
	return nil
}

// add holds w's cosignature line for the checkpoint of size in memory.
func (ws *witnesses) add(size uint64, i int, line []byte) {
	ws.mu.Lock()
	lines, ok := ws.cosigs[size]
	if !ok {
		lines = make([][]byte, len(ws.ws))
		ws.cosigs[size] = lines
		ws.sizes = append(ws.sizes, size)
		// Sizes come in increasing order but for one cosigned again
		// after a restart: keep them sorted.
		for j := len(ws.sizes) - 1; j > 0 && ws.sizes[j] < ws.sizes[j-1]; j-- {
			ws.sizes[j], ws.sizes[j-1] = ws.sizes[j-1], ws.sizes[j]
		}
		if len(ws.sizes) > witnessKeep {
			delete(ws.cosigs, ws.sizes[0])
			ws.sizes = ws.sizes[1:]
		}
	}
	lines[i] = line
	ws.mu.Unlock()
}

// has reports whether witness i's cosignature for size is held.
func (ws *witnesses) has(size uint64, i int) bool {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	lines := ws.cosigs[size]
	return lines != nil && lines[i] != nil
}

// complete reports whether every witness's cosignature for size is held.
func (ws *witnesses) complete(size uint64) bool {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	lines := ws.cosigs[size]
	return lines != nil && !slices.ContainsFunc(lines, func(l []byte) bool { return l == nil })
}

// Cosignatures returns the cosignature lines held for the checkpoint of
// size, in the witnesses' config order, and how many there are. A nil
// ws (no witnesses configured) holds none.
//
// What memory holds answers, but for a size that memory may lack lines
// of and the store may hold: on a sequencer (which gathers them), one
// older than its start that it holds none of (cosigned under an earlier
// term, or before a restart, and not the latest of any witness, which
// were loaded); on a follower, any but its latest checkpoint's (which its
// loop keeps current) that it lacks some of. The store's lines are
// verified first. Neither reads the store for the latest checkpoint, the
// one most asked for.
func (ws *witnesses) Cosignatures(ctx context.Context, size uint64) ([]byte, int) {
	if ws == nil {
		return nil, 0
	}
	ws.mu.Lock()
	held := ws.cosigs[size] != nil
	ws.mu.Unlock()
	var read bool
	if ws.following {
		_, latest := ws.l.Checkpoint()
		read = size != latest && !ws.complete(size)
	} else {
		read = !held && size < ws.startSize
	}
	if read && ws.store != nil {
		// A failure serves what memory holds: the store is down, and
		// the follow loop or the term's step-down report it.
		ws.read(ctx, size)
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	var b []byte
	n := 0
	for _, line := range ws.cosigs[size] {
		if line != nil {
			b = append(b, line...)
			n++
		}
	}
	return b, n
}

// Cosigned returns the signed checkpoint cp, of size, with the
// cosignature lines held for it added.
func (ws *witnesses) Cosigned(ctx context.Context, cp []byte, size uint64) []byte {
	lines, _ := ws.Cosignatures(ctx, size)
	return append(bytes.Clone(cp), lines...)
}

func (ws *witnesses) fail(w *witnessState, kind string) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w.failures[kind]++
}

// The witnesses' series (collect).
var (
	witnessesNeededDesc = prometheus.NewDesc("ledgerd_witnesses_needed",
		"Cosignatures a checkpoint should gather (witnesses_needed).", nil, nil)
	checkpointCosignaturesDesc = prometheus.NewDesc("ledgerd_checkpoint_cosignatures",
		"Valid witness cosignatures held for the latest checkpoint.", nil, nil)
	witnessCosignedSizeDesc = prometheus.NewDesc("ledgerd_witness_cosigned_size",
		"The largest tree size of this log each witness cosigned, as far as ledgerd knows (0 until it cosigns).", []string{"witness"}, nil)
	witnessLagDesc = prometheus.NewDesc("ledgerd_witness_lag_entries",
		"Entries the latest checkpoint has beyond the tree the witness last cosigned.", []string{"witness"}, nil)
	witnessFailuresDesc = prometheus.NewDesc("ledgerd_witness_failures_total",
		"Failed submissions to each witness, by kind.", []string{"witness", "kind"}, nil)
	witnessLastSuccessDesc = prometheus.NewDesc("ledgerd_witness_last_success_timestamp_seconds",
		"When each witness last returned a valid cosignature (Unix time; 0: never since the start).", []string{"witness"}, nil)

	witnessDescs = []*prometheus.Desc{witnessesNeededDesc, checkpointCosignaturesDesc, witnessCosignedSizeDesc,
		witnessLagDesc, witnessFailuresDesc, witnessLastSuccessDesc}
)

// collect sends the witnesses' series (the metrics page) to ch.
func (ws *witnesses) collect(ch chan<- prometheus.Metric) {
	if ws == nil || len(ws.ws) == 0 {
		return
	}
	_, size := ws.l.Checkpoint()
	_, n := ws.Cosignatures(context.Background(), size)
	ws.mu.Lock()
	defer ws.mu.Unlock()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(witnessesNeededDesc, float64(ws.needed))
	gauge(checkpointCosignaturesDesc, float64(n))
	for _, w := range ws.ws {
		gauge(witnessCosignedSizeDesc, float64(w.cosigned), w.cfg.Name)
		gauge(witnessLagDesc, float64(size-min(size, w.cosigned)), w.cfg.Name)
	}
	if ws.following {
		// A follower submits nothing: it has no failures nor successes.
		return
	}
	for _, w := range ws.ws {
		for _, k := range failureKinds {
			ch <- prometheus.MustNewConstMetric(witnessFailuresDesc, prometheus.CounterValue, float64(w.failures[k]), w.cfg.Name, k)
		}
		var t float64
		if !w.lastSuccess.IsZero() {
			t = float64(w.lastSuccess.UnixMilli()) / 1000
		}
		gauge(witnessLastSuccessDesc, t, w.cfg.Name)
	}
}
