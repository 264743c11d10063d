package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/internal/atomicfile"
	"github.com/decisionledger/ledger/internal/keyflag"
	"github.com/decisionledger/ledger/internal/progress"
	"github.com/decisionledger/ledger/internal/termtext"
	"github.com/decisionledger/ledger/verify"
	"github.com/transparency-dev/formats/log"
)

const monitorUsage = `Usage:
    ledger-verify monitor (--key VKEY | --key-file FILE | --trust FILE)...
                          --state FILE [--init] [--archive DIR]
                          [--token-file FILE] [--timeout DURATION] URL

Follow a log, as the compliance team's cron job: fetch its latest
checkpoint from the C2SP tlog-tiles API at URL (ledgerd's address and
tiles_prefix: URL/checkpoint, URL/tile/...), verify it with the ledger's
key, prove from the tiles that its tree extends the checkpoint the state
file holds, verify every entry added since (encoding, key, signature,
index, the prev chain continuing from the state's last entry hash, and
that they are exactly the new leaves of the signed tree), then save the
new checkpoint and last entry hash in the state file (atomically: a
temporary file, synced, renamed over it). Run it every few minutes; a
run that finds nothing new changes nothing.

The state file (docs/operations.md, "Monitoring") is JSON:
{"version":1,"checkpoint":"<signed note>","last_entry_hash":"sha256:...",
"last_key_id":"<name>+<hash>","retired_keys":{"<name>+<hash>":N}}
(no last_entry_hash or last_key_id at tree size 0). retired_keys are the
keys the monitor saw the log rotate out, at the rotation's tree size N
(the new key's first entry, or the rotation checkpoint signed by both):
like a trust file's retired-at, the monitor then refuses a checkpoint of
a larger tree that such a key alone signed, and its entries from N on. The first run needs --init and
starts from the empty tree: it verifies the whole log. Without --init a
missing state file is an error, so that a lost state is noticed rather
than silently trusting whatever history the log now shows.

A run takes a lock on FILE.lock first; a run that finds it held by
another (a cron run outlasting its interval) prints "skipped: ..." and
exits 0, having checked and changed nothing.

With --archive DIR (made if absent), the verified entries are kept: each run writes
DIR/entries-<first index>.jsonl (one entry per line, canonical JSON, as
signed) and DIR/checkpoint-<tree size> (the signed checkpoint), each
atomically, before the state is saved.

Options:
` + keyOptions + `    --state FILE          The monitor's state file.
    --init                Start from the empty tree if the state file does
                          not exist.
    --archive DIR         Keep the verified entries and checkpoints in DIR.
` + netOptions + `
Exit status: 0 verified and the state saved; 1 verification failed (a
checkpoint not signed by the key, an entry that fails a check, a tile
that is malformed or whose hashes do not lead to the log's own signed
root, a checkpoint smaller than the state's): the state is not changed.
Tiles are not signed: tiles that disagree with the log's checkpoint (a
damaged cache, say) are not a fork; the message names the tile where it
can tell; 2 bad usage, or a state file that cannot be read; 3 FORK,
proven: the log's checkpoint is signed by the key, and the hashes of its
tiles, which lead to its signed root, show that its tree does not extend
the state's (or both are for one tree size with different roots). The
evidence is written next to the state: FILE.fork-old.checkpoint,
FILE.fork-new.checkpoint and FILE.fork-proof.json (the prefix proof;
none for one tree size), which anyone can re-check offline with
'ledger-verify consistency --key-file KEY OLD NEW PROOF'; the state is
not changed; 4 the log could not be read (no answer, a timeout, or an
HTTP error): nothing was found wrong; run again later.

Examples:
    $ ledger-verify monitor --key-file ledger.vkey --state monitor.state --init https://ledger.example.com
    verified: entries 0 to 999 (1000 new) of ledger.example.com/log
      checkpoint: tree size 1000, consistent with the state's (tree size 0)
      state saved: monitor.state
    # crontab: every 10 minutes
    */10 * * * * ledger-verify monitor --key-file /etc/ledger/ledger.vkey --state /var/lib/ledger-monitor/state --archive /var/lib/ledger-monitor/archive https://ledger.example.com
`

// monitorState is the state file. LastKeyID and RetiredKeys, added for
// issue 23, are absent from the states of earlier versions, which read as
// before: the first run then learns the rotations from its entries only.
type monitorState struct {
	Version       int    `json:"version"`
	Checkpoint    string `json:"checkpoint"`
	LastEntryHash string `json:"last_entry_hash,omitempty"`
	// LastKeyID is the key_id of the tree's last entry.
	LastKeyID string `json:"last_key_id,omitempty"`
	// RetiredKeys are the keys the monitor saw the log rotate out, each
	// with the tree size of the rotation (a trust file's retired-at).
	RetiredKeys map[string]uint64 `json:"retired_keys,omitempty"`
}

// loaded is a state file opened with the trusted key.
type loaded struct {
	signed    []byte
	cp        *log.Checkpoint
	last      *commit.Digest // nil at size 0
	lastKeyID string         // "" at size 0, or from a state without it
	retired   map[string]uint64
}

// loadState reads the state file; an absent file is the empty tree with
// init, an error without. It returns the state and the trusted key with
// the state's retired keys retired too (those of them that are trusted:
// a key no longer trusted signs nothing that verifies anyway).
func loadState(name string, key *verify.Key, init bool) (*loaded, *verify.Key, error) {
	b, err := keyflag.ReadFileLimit(name, 64<<10)
	if errors.Is(err, fs.ErrNotExist) {
		if !init {
			return nil, nil, fmt.Errorf("state file %s does not exist: run with --init the first time (it then verifies the log from its first entry)", termtext.Quote(name))
		}
		return &loaded{cp: &log.Checkpoint{Origin: key.Origin(), Size: 0, Hash: tileHasher.EmptyRoot()}}, key, nil
	}
	if err != nil {
		return nil, nil, err
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	var st monitorState
	if err := d.Decode(&st); err != nil || d.More() || st.Version != 1 || st.Checkpoint == "" {
		return nil, nil, fmt.Errorf("state file %s: not a version 1 monitor state (%v)", termtext.Quote(name), err)
	}
	l := &loaded{signed: []byte(st.Checkpoint), lastKeyID: st.LastKeyID, retired: st.RetiredKeys}
	for id := range st.RetiredKeys {
		if !validKeyID(id) {
			return nil, nil, fmt.Errorf("state file %s: retired_keys: %s is not a key id (name+hash)", termtext.Quote(name), termtext.Quote(id))
		}
		if slices.Contains(key.IDs(), id) {
			if key, err = key.Retire(id, st.RetiredKeys[id]); err != nil {
				return nil, nil, err
			}
		}
	}
	if st.LastKeyID != "" && !validKeyID(st.LastKeyID) {
		return nil, nil, fmt.Errorf("state file %s: last_key_id is not a key id (name+hash)", termtext.Quote(name))
	}
	if l.cp, err = key.Checkpoint(l.signed); err != nil {
		return nil, nil, &stateCheckpointError{name: name, err: err}
	}
	for id, at := range st.RetiredKeys {
		if at > l.cp.Size {
			return nil, nil, fmt.Errorf("state file %s: retired_keys: %s retired at tree size %d, beyond the state's tree (size %d)", termtext.Quote(name), termtext.Quote(id), at, l.cp.Size)
		}
	}
	switch {
	case l.cp.Size == 0 && (st.LastEntryHash != "" || st.LastKeyID != ""):
		return nil, nil, fmt.Errorf("state file %s: a last_entry_hash or last_key_id at tree size 0", termtext.Quote(name))
	case l.cp.Size > 0:
		h, err := commit.ParseDigest(st.LastEntryHash)
		if err != nil {
			return nil, nil, fmt.Errorf("state file %s: last_entry_hash: %w", termtext.Quote(name), err)
		}
		l.last = &h
	}
	return l, key, nil
}

// validKeyID reports whether id has the shape of a key id,
// "<name>+<8 lower-case hex digits>", the name printable ASCII without
// '+' or blanks (a note key name).
func validKeyID(id string) bool {
	name, hash, ok := strings.Cut(id, "+")
	if !ok || name == "" || len(hash) != 8 {
		return false
	}
	for _, c := range name {
		if c <= ' ' || c > '~' || c == '+' {
			return false
		}
	}
	for _, c := range hash {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// checkpointSigners returns the ids of the trusted keys that signed a
// checkpoint already opened with key.
func checkpointSigners(key *verify.Key, signed []byte) []string {
	var ids []string
	for _, vkey := range key.VerifierKeys() {
		one, err := verify.ParseKey(vkey)
		if err != nil {
			continue
		}
		if _, err := one.Checkpoint(signed); err == nil {
			ids = append(ids, one.IDs()[0])
		}
	}
	return ids
}

// rotations are what a run learned of the log's keys: the state's
// retired keys, and those the run saw rotated out.
type rotations struct {
	retired map[string]uint64
	learned []string // in the order learned, for the output
}

func newRotations(old map[string]uint64) *rotations {
	r := &rotations{retired: map[string]uint64{}}
	for id, at := range old {
		r.retired[id] = at
	}
	return r
}

// add records that key id was rotated out at tree size at.
func (r *rotations) add(id string, at uint64) {
	if old, ok := r.retired[id]; ok && old <= at {
		return
	}
	r.retired[id] = at
	r.learned = append(r.learned, id)
}

// fromCheckpoint records the rotation a checkpoint of the tree whose last
// entry lastKeyID signed shows: signed by that key and by another trusted
// key, it is a rotation checkpoint handing over from it (a log signs a
// checkpoint with two keys only then, docs/log.md §4).
func (r *rotations) fromCheckpoint(key *verify.Key, signed []byte, size uint64, lastKeyID string) {
	if lastKeyID == "" {
		return
	}
	signers := checkpointSigners(key, signed)
	if len(signers) > 1 && slices.Contains(signers, lastKeyID) {
		r.add(lastKeyID, size)
	}
}

// apply returns key with every learned rotation's key retired, to
// re-check the new checkpoint with.
func (r *rotations) apply(key *verify.Key) *verify.Key {
	for _, id := range r.learned {
		if k, err := key.Retire(id, r.retired[id]); err == nil {
			key = k
		}
	}
	return key
}

func (r *rotations) print(stdout io.Writer) {
	for _, id := range r.learned {
		termtext.PrintLine(stdout, "  key rotation: %s retired at tree size %d (the state keeps it: the key may sign nothing beyond; add \"retired-at %d\" to its line in the trust file)", termtext.Quote(id), r.retired[id], r.retired[id])
	}
}

// stateCheckpointError: the state's checkpoint does not verify with the
// trusted key (exit status 1): another key was given, or the state was
// changed.
type stateCheckpointError struct {
	name string
	err  error
}

func (e *stateCheckpointError) Error() string {
	return fmt.Sprintf("state file %s: its checkpoint: %v", termtext.Quote(e.name), e.err)
}

func (e *stateCheckpointError) Unwrap() error { return e.err }

func saveState(name string, signed []byte, last *commit.Digest, lastKeyID string, retired map[string]uint64) error {
	st := monitorState{Version: 1, Checkpoint: string(signed), LastKeyID: lastKeyID}
	if last != nil {
		st.LastEntryHash = last.String()
	}
	if len(retired) > 0 {
		st.RetiredKeys = retired
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(name, append(b, '\n'), atomicfile.Options{Mode: 0o644})
}

// monitorRun is one run's options.
type monitorRun struct {
	keys    keyFlags
	net     netFlags
	state   string
	archive string
	init    bool
}

func runMonitor(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fset := flag.NewFlagSet("monitor", flag.ContinueOnError)
	var m monitorRun
	m.keys.register(fset)
	m.net.register(fset)
	fset.StringVar(&m.state, "state", "", "")
	fset.StringVar(&m.archive, "archive", "", "")
	fset.BoolVar(&m.init, "init", false, "")
	rest, code, ok := parseFlags(fset, monitorUsage, args, stdout, stderr)
	if !ok {
		return code
	}
	if len(rest) != 1 || m.state == "" {
		return usageError(stderr, "monitor", "needs --state FILE and exactly one URL")
	}
	return m.run(context.Background(), rest[0], stdout, stderr)
}

// errLocked: another monitor run holds the state's lock.
var errLocked = errors.New("the state is locked by another monitor run")

func (m *monitorRun) run(ctx context.Context, base string, stdout, stderr io.Writer) int {
	key, err := m.keys.load()
	if err != nil {
		errorf(stderr, "monitor: %v", err)
		return exitUsage
	}
	f, err := m.net.fetcher(base)
	if err != nil {
		return usageError(stderr, "monitor", "%v", err)
	}
	if m.archive != "" {
		// Made on first use, as the state file is: a cron line on a fresh
		// host works as written.
		if err := os.MkdirAll(m.archive, 0o755); err != nil {
			return usageError(stderr, "monitor", "--archive %s: %v", termtext.Quote(m.archive), err)
		}
		if st, err := os.Stat(m.archive); err != nil || !st.IsDir() {
			return usageError(stderr, "monitor", "--archive %s is not a directory", termtext.Quote(m.archive))
		}
	}
	// One run at a time on a state file: a run that finds another still
	// going (a slow log, a cron interval too short) skips, changing nothing.
	if m.init {
		if err := os.MkdirAll(filepath.Dir(m.state), 0o700); err != nil {
			return usageError(stderr, "monitor", "--state %s: %v", termtext.Quote(m.state), err)
		}
	}
	lock, err := lockState(m.state + ".lock")
	if errors.Is(err, fs.ErrNotExist) {
		lock, err = nil, nil // no state directory: loadState says what to do
	}
	if errors.Is(err, errLocked) {
		termtext.PrintLine(stdout, "skipped: another monitor run holds %s; nothing checked or changed", termtext.Quote(m.state+".lock"))
		return exitOK
	}
	if err != nil {
		errorf(stderr, "monitor: locking the state: %v", err)
		return exitUsage
	}
	if lock != nil {
		defer lock.Close()
	}
	old, key, err := loadState(m.state, key, m.init)
	if err != nil {
		errorf(stderr, "monitor: %v", err)
		hints(stderr, err)
		var sce *stateCheckpointError
		if errors.As(err, &sce) {
			return exitFailed
		}
		return exitUsage
	}

	// The latest checkpoint.
	signed, err := f.get(ctx, "/checkpoint", 16<<10)
	if err != nil {
		return unreachable(stderr, err)
	}
	cp, err := key.Checkpoint(signed)
	if err != nil {
		return badCheckpoint(stderr, f, err)
	}

	switch {
	case cp.Size < old.cp.Size:
		errorf(stderr, "monitor: the log's latest checkpoint is for tree size %d, smaller than the state's (%d), which is the newer one: a log never signs a smaller tree after a larger one", cp.Size, old.cp.Size)
		hintf(stderr, "if %s is a cache or replica that lags, run again later", f.base)
		hintf(stderr, "if the log itself serves this checkpoint, it is behind what this monitor verified: the log went back (a rollback: a restore from an old backup, lost storage), and the entries from %d to %d are gone from it, or it showed this monitor a history it no longer shows (a fork); no consistency proof can settle it, since the log no longer has the tree of size %d", cp.Size, old.cp.Size-1, old.cp.Size)
		hintf(stderr, "keep the evidence: the state file (its checkpoint, of tree size %d, is signed by the log's key) and the log's answer, saved with curl --fail -o behind.checkpoint '%s/checkpoint'; then tell the log's operator; the state was not changed", old.cp.Size, f.base)
		return exitFailed
	case cp.Size == old.cp.Size && bytes.Equal(cp.Hash, old.cp.Hash):
		// The same tree; its checkpoint may be the rotation checkpoint
		// that replaced the one the state holds.
		rot := newRotations(old.retired)
		rot.fromCheckpoint(key, signed, cp.Size, old.lastKeyID)
		termtext.PrintLine(stdout, "verified: no new entries in %s", termtext.Quote(cp.Origin))
		termtext.PrintLine(stdout, "  checkpoint: tree size %d, as the state's", cp.Size)
		rot.print(stdout)
		// --init on the empty log: keep its signed checkpoint; a
		// rotation learned: keep it, with the checkpoint that shows it.
		if old.signed == nil || len(rot.learned) > 0 {
			if err := saveState(m.state, signed, old.last, old.lastKeyID, rot.retired); err != nil {
				errorf(stderr, "monitor: saving the state: %v", err)
				return exitUsage
			}
			termtext.PrintLine(stdout, "  state saved: %s", termtext.Quote(m.state))
		}
		return exitOK
	}

	if cp.Size == old.cp.Size { // the roots differ: no proof can reconcile them
		return m.fork(stderr, old, signed, cp, nil)
	}

	// The prefix proof, from the tiles: the compact ranges [0, old) and
	// [old, new) of the new tree. Bound to the new signed root, they show
	// whether its first old-size leaves are the state's tree; not bound,
	// they show nothing (verify.PrefixConsistency).
	tiles := newTileReader(f, cp.Size)
	var fe *fetchError
	left, err := tiles.compactRange(ctx, 0, old.cp.Size)
	var rest [][]byte
	if err == nil {
		rest, err = tiles.compactRange(ctx, old.cp.Size, cp.Size)
	}
	if errors.As(err, &fe) {
		return unreachable(stderr, err)
	} else if err != nil {
		return m.failed(stdout, stderr, err)
	}
	var fork *verify.ForkError
	if err := verify.PrefixConsistency(old.cp, cp, left, rest); errors.As(err, &fork) {
		return m.fork(stderr, old, signed, cp, &prefixProofFile{Size1: old.cp.Size, TreeSize: cp.Size, Prefix: left, Rest: rest})
	} else if err != nil {
		return m.unbound(ctx, stderr, tiles, cp)
	}

	// The new entries, against the new tree.
	r, err := verify.NewRange(key, cp, old.cp.Size, cp.Size, old.last, false)
	if err != nil {
		return reportFailures(stdout, stderr, err, false)
	}
	if old.lastKeyID != "" {
		r.FollowKey(old.lastKeyID)
	}
	var arch *archiveWriter
	if m.archive != "" {
		if arch, err = newArchiveWriter(m.archive, old.cp.Size); err != nil {
			errorf(stderr, "monitor: --archive: %v", err)
			return exitUsage
		}
		defer arch.abort()
	}
	meter := progress.New(stderr, programName+": monitor", "entries")
	err = tiles.entries(ctx, old.cp.Size, cp.Size, func(index uint64, e []byte) error {
		if err := r.Add(e); err != nil {
			return err
		}
		meter.Update(index-old.cp.Size+1, cp.Size-old.cp.Size)
		if arch != nil {
			return arch.add(e)
		}
		return nil
	})
	meter.Finish()
	switch {
	case errors.As(err, &fe):
		return unreachable(stderr, err)
	case err != nil:
		return m.failed(stdout, stderr, err)
	}
	if err := r.Finish(left, nil); err != nil {
		return m.failed(stdout, stderr, err)
	}
	last := r.Last()
	// The rotations the entries show, and the one the new checkpoint
	// shows if it is a rotation checkpoint; with them, the checkpoint
	// must still open: one the old key alone signed past a rotation the
	// entries show is not the log's.
	rot := newRotations(old.retired)
	for id, at := range r.Rotations() {
		rot.add(id, at)
	}
	rot.fromCheckpoint(key, signed, cp.Size, r.LastKeyID())
	if _, err := rot.apply(key).Checkpoint(signed); err != nil {
		return badCheckpoint(stderr, f, err)
	}

	if arch != nil {
		if err := arch.commit(signed, cp.Size); err != nil {
			errorf(stderr, "monitor: --archive: %v", err)
			return exitUsage
		}
	}
	if err := saveState(m.state, signed, last, r.LastKeyID(), rot.retired); err != nil {
		errorf(stderr, "monitor: saving the state: %v", err)
		hintf(stderr, "everything verified, but the state file %s was not replaced: fix the cause and run again", termtext.Quote(m.state))
		return exitUsage
	}
	n := cp.Size - old.cp.Size
	termtext.PrintLine(stdout, "verified: entries %d to %d (%d new) of %s", old.cp.Size, cp.Size-1, n, termtext.Quote(cp.Origin))
	termtext.PrintLine(stdout, "  checkpoint: tree size %d, consistent with the state's (tree size %d)", cp.Size, old.cp.Size)
	termtext.PrintLine(stdout, "  last entry hash: %s", last)
	rot.print(stdout)
	termtext.PrintLine(stdout, "  an export of these entries, proved against the previous state: /v1/export?start=%d&end=%d&consistency_from=%d&tree_size=%d", old.cp.Size, cp.Size, old.cp.Size, cp.Size)
	if arch != nil {
		termtext.PrintLine(stdout, "  archived: %s", termtext.Quote(arch.entriesName()))
	}
	termtext.PrintLine(stdout, "  state saved: %s", termtext.Quote(m.state))
	return exitOK
}

// badCheckpoint reports a latest checkpoint that does not open with the
// trusted keys (exit status 1).
func badCheckpoint(stderr io.Writer, f *fetcher, err error) int {
	errorf(stderr, "monitor: the log's latest checkpoint (%s/checkpoint): %v", f.base, err)
	hints(stderr, err)
	if errors.Is(err, verify.ErrRetiredKey) {
		hintf(stderr, "the state was not changed; save the log's answer as evidence: curl --fail -o retired-key.checkpoint '%s/checkpoint'", f.base)
	}
	return exitFailed
}

func unreachable(stderr io.Writer, err error) int {
	errorf(stderr, "monitor: the log could not be read: %v", err)
	hintf(stderr, "nothing was found wrong with the log and the state was not changed: check the URL and the network, and run again later")
	return exitUnreachable
}

// failed reports a verification failure of the new entries or tiles.
func (m *monitorRun) failed(stdout, stderr io.Writer, err error) int {
	var te *tileError
	if errors.As(err, &te) {
		errorf(stderr, "monitor: %v", err)
		hintf(stderr, "the log served a malformed tile; the state was not changed")
		return exitFailed
	}
	code := reportFailures(stdout, stderr, err, false)
	hintf(stderr, "the log's new entries do not verify against its signed checkpoint; the state was not changed: keep the output, and ask the log's operator")
	return code
}

// unbound reports hash tiles that do not lead to the log's own signed
// root: something between the log and the monitor, or the log's storage,
// is damaged, which proves nothing about the log's honesty (exit status
// 1, no evidence written).
func (m *monitorRun) unbound(ctx context.Context, stderr io.Writer, tiles *tileReader, cp *log.Checkpoint) int {
	errorf(stderr, "monitor: the log's hash tiles do not match its own checkpoint: the hashes they give for the tree of size %d do not lead to the root its signed checkpoint holds. This is not a fork: a checkpoint is signed, a tile is not, and a damaged or stale tile (in a cache or CDN in front of the log, or in its storage) is enough", cp.Size)
	if blame := tiles.blame(ctx, cp.Hash); blame != "" {
		errorf(stderr, "monitor: %s", blame)
	}
	hintf(stderr, "the state was not changed and no evidence was written: run again later; if this persists, point the monitor at the log itself rather than a cache in front of it, and tell the log's operator (ledgerd fsck compares every stored tile with the entries)")
	return exitFailed
}

// fork writes both signed checkpoints, and the prefix proof that shows
// the newer tree does not extend the older (nil for two checkpoints of
// the same size), next to the state as evidence, and reports the fork.
func (m *monitorRun) fork(stderr io.Writer, old *loaded, signed []byte, cp *log.Checkpoint, proof *prefixProofFile) int {
	if old.signed == nil {
		// The state is the empty tree, which every tree extends: only a
		// checkpoint of size 0 with another root gets here.
		errorf(stderr, "monitor: the log's checkpoint of tree size 0 does not have the empty tree's root hash (SHA-256 of nothing)")
		return exitFailed
	}
	oldName, newName, proofName := m.state+".fork-old.checkpoint", m.state+".fork-new.checkpoint", m.state+".fork-proof.json"
	why := "they are for the same tree size with different roots: no proof can reconcile them"
	evidence := []struct {
		name string
		b    []byte
	}{{oldName, old.signed}, {newName, signed}}
	if proof != nil {
		why = fmt.Sprintf("the hashes of its tiles lead to its signed root and give its first %d leaves another root than the state's checkpoint", old.cp.Size)
		b, err := json.MarshalIndent(proof, "", "  ")
		if err != nil {
			panic(err) // hashes and sizes always marshal
		}
		evidence = append(evidence, struct {
			name string
			b    []byte
		}{proofName, append(b, '\n')})
	}
	errorf(stderr, "monitor: FORK: the log's checkpoint of tree size %d is signed by the trusted key but not consistent with the checkpoint of tree size %d the state holds: %s", cp.Size, old.cp.Size, why)
	for _, w := range evidence {
		if err := atomicfile.Write(w.name, w.b, atomicfile.Options{Mode: 0o644}); err != nil {
			errorf(stderr, "monitor: writing the evidence %s: %v", termtext.Quote(w.name), err)
		}
	}
	hintf(stderr, "evidence: %s (tree size %d, the state's, older) and %s (tree size %d, the log's latest, newer): two checkpoints signed by the log's key, of which the newer does not extend the older, prove that the log signed two histories", termtext.Quote(oldName), old.cp.Size, termtext.Quote(newName), cp.Size)
	if proof != nil {
		hintf(stderr, "and %s, the prefix proof: the newer tree's hashes that show it (docs/operations.md, \"Evidence of a fork\"); anyone can re-check the three files offline with the log's verifier key: ledger-verify consistency --key-file KEY %s %s %s (exit status 3: a fork)", termtext.Quote(proofName), termtext.Quote(oldName), termtext.Quote(newName), termtext.Quote(proofName))
	}
	hintf(stderr, "the state was not changed: every run reports this again until it is resolved; give the evidence to the log's operator and auditors")
	return exitInconsistent
}

// archiveWriter keeps one run's verified entries: DIR/entries-<first
// index>.jsonl, written to a temporary file and renamed at commit, then
// DIR/checkpoint-<size>. A run that fails before saving the state leaves
// nothing, or files the next run (starting at the same index) replaces.
type archiveWriter struct {
	dir   string
	first uint64
	tmp   *os.File
	n     uint64
}

func newArchiveWriter(dir string, first uint64) (*archiveWriter, error) {
	tmp, err := os.CreateTemp(dir, ".entries-*.tmp")
	if err != nil {
		return nil, err
	}
	return &archiveWriter{dir: dir, first: first, tmp: tmp}, nil
}

func (a *archiveWriter) entriesName() string {
	return filepath.Join(a.dir, fmt.Sprintf("entries-%d.jsonl", a.first))
}

func (a *archiveWriter) add(e []byte) error {
	// A signed entry is canonical JSON on one line: JSON escapes every
	// control character inside strings.
	if bytes.IndexByte(e, '\n') >= 0 {
		return fmt.Errorf("entry %d holds a newline", a.first+a.n)
	}
	a.n++
	if _, err := a.tmp.Write(append(e[:len(e):len(e)], '\n')); err != nil {
		return fmt.Errorf("archive: %w", err)
	}
	return nil
}

func (a *archiveWriter) commit(signed []byte, size uint64) error {
	if err := a.tmp.Sync(); err != nil {
		return err
	}
	if err := a.tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(a.tmp.Name(), a.entriesName()); err != nil {
		return err
	}
	a.tmp = nil
	if err := atomicfile.SyncDir(a.dir); err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(a.dir, fmt.Sprintf("checkpoint-%d", size)), signed, atomicfile.Options{Mode: 0o644})
}

// abort removes the temporary file of a run that did not commit.
func (a *archiveWriter) abort() {
	if a.tmp != nil {
		a.tmp.Close()
		os.Remove(a.tmp.Name())
	}
}
