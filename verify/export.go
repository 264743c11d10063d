package verify

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/policy"
	"github.com/transparency-dev/formats/log"
)

// CheckFormat: the export file breaks its own format (docs/export.md).
const CheckFormat Check = "format"

// ExportHeader is the first line of an export file, format version 1.
const ExportHeader = "ledger-export v1\n"

// Bounds on frames, so that a hostile file cannot make the reader allocate
// more than one entry's worth at a time.
const (
	maxFrameLine      = 64
	maxCheckpoint     = 16 << 10
	maxProofHashes    = 128
	maxSmallFrame     = 256
	maxEntryFrameSize = entry.MaxEntryBytes
	// MaxPolicySetFrame bounds a policy-set frame's payload: the files of
	// a set (policy.MaxSetBytes) and 256 KiB for the bundle's headers,
	// more than its domain string and 1024 names and lengths take.
	MaxPolicySetFrame = policy.MaxSetBytes + 256<<10
)

// ExportOptions say what the auditor already trusts.
type ExportOptions struct {
	// Trusted, if set, is a checkpoint the auditor verified before. The
	// export's checkpoint must then be the same tree or extend it, proved
	// by the export's consistency proof; from a trusted checkpoint of
	// size 0, whose root must be the empty tree's, no proof is needed.
	Trusted *log.Checkpoint
	// Prev, if set, is the entry hash of entry start-1 as the auditor knows
	// it (the last entry hash of an earlier export they verified).
	Prev *commit.Digest
	// All reports every failure instead of stopping at the first.
	All bool
	// Progress, if set, is called after each entry with the number
	// verified and the number in the export, in order, from one goroutine
	// at a time, and not after VerifyExport has returned.
	Progress func(done, total uint64)
	// OnEntry, if set, is called with each entry's index and bytes after
	// its own checks. The entry is only known authentic, and in the tree,
	// once VerifyExport has returned without error. The slice is not
	// reused.
	OnEntry func(index uint64, entry []byte)
	// OnParsed, if set, is called after OnEntry with the same entry as
	// the checks decoded it and its entry hash, so that a caller reading
	// entry members need not parse every entry again (ledger-verify find).
	// It is not called for bytes that do not decode (only with All, where
	// VerifyExport reports them). The same caution holds as for OnEntry;
	// e is the caller's to keep.
	OnParsed func(index uint64, e *entry.Entry, hash commit.Digest, b []byte)

	// rereading skips the Ed25519 check of each entry: VerifyDecisions
	// sets it on its second reading of a file whose first reading
	// verified every signature, and then requires the same checkpoint
	// root, which (the leaves covering the signatures) proves the same
	// entries were read. Everything else is checked again.
	rereading bool
}

// ExportReport describes a verified export.
type ExportReport struct {
	Checkpoint *log.Checkpoint
	// Signed is the checkpoint as the export carries it, the signed note
	// the report's Checkpoint was opened from: what an auditor keeps to
	// trust next time (ledger-verify export --write-checkpoint).
	Signed     []byte
	Start, End uint64
	// LastHash is the entry hash of entry End-1: the Prev of the next
	// export.
	LastHash commit.Digest
	// ConsistencyFrom is the size of the trusted checkpoint the export was
	// proved consistent with, or 0 (also for a trusted checkpoint of size
	// 0, which every tree extends).
	ConsistencyFrom uint64
	// PolicySets are the policy sets the export carries in policy-set
	// frames, by digest (the SHA-256 of the frame's bundle, checked here),
	// each the files policy.ParseBundle decoded: input for
	// policy.NewReplay. Nil when the export carries none.
	PolicySets map[commit.Digest][]policy.File
	// Named are the distinct policy-set digests the range's version 3
	// entries name, in order of first appearance.
	Named []commit.Digest
}

// ConsistencyError says why an export's checkpoint was not proved to
// extend the auditor's trusted one, with what an auditor needs to ask for
// a proof that would do: ledgerd adds one to an export when asked with
// consistency_from=TrustedSize (docs/api.md).
type ConsistencyError struct {
	// TrustedSize and Size are the tree sizes of the trusted checkpoint
	// and of the export's.
	TrustedSize, Size uint64
	// Start and End are the export's range.
	Start, End uint64
	// HasProof says whether the export carries a consistency proof, and
	// ProofFrom the tree size it starts from.
	HasProof  bool
	ProofFrom uint64
	// Err is what failed: a fork (same size, different roots), a trusted
	// checkpoint newer than the export's, no proof from TrustedSize, or
	// the proof's own failure.
	Err error
}

func (e *ConsistencyError) Error() string { return e.Err.Error() }

func (e *ConsistencyError) Unwrap() error { return e.Err }

// frameReader reads the frames "<tag> <length>\n<payload>\n".
type frameReader struct {
	r      *bufio.Reader
	frames int
}

func formatFailure(format string, args ...any) error {
	return &Failure{Index: NoIndex, Part: "export file", Check: CheckFormat, Err: fmt.Errorf(format, args...)}
}

func (fr *frameReader) next(wantTag string, max int) ([]byte, error) {
	tag, payload, err := fr.read(func(string) int { return max })
	if err != nil {
		return nil, err
	}
	if tag != wantTag {
		return nil, formatFailure("frame %d is %q, want %q", fr.frames, tag, wantTag)
	}
	return payload, nil
}

// peek returns the tag of the next frame without consuming it.
func (fr *frameReader) peek() string {
	line, _ := fr.r.Peek(maxFrameLine)
	tag, _, _ := strings.Cut(string(line), " ")
	return tag
}

// read reads a frame whose payload may be at most max(tag) bytes long.
func (fr *frameReader) read(max func(tag string) int) (string, []byte, error) {
	fr.frames++
	line, err := fr.r.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, io.EOF) {
			return "", nil, formatFailure("file ends before frame %d (truncated)", fr.frames)
		}
		if errors.Is(err, bufio.ErrBufferFull) || len(line) > maxFrameLine {
			return "", nil, formatFailure("frame %d: header line too long", fr.frames)
		}
		return "", nil, formatFailure("frame %d: %v", fr.frames, err)
	}
	if len(line) > maxFrameLine {
		return "", nil, formatFailure("frame %d: header line too long", fr.frames)
	}
	tag, lenText, ok := strings.Cut(string(line[:len(line)-1]), " ")
	n, err := strconv.Atoi(lenText)
	if !ok || err != nil || n < 0 || strconv.Itoa(n) != lenText {
		return "", nil, formatFailure("frame %d: malformed frame header", fr.frames)
	}
	if limit := max(tag); n > limit {
		return "", nil, formatFailure("frame %d (%q): %d bytes, at most %d allowed", fr.frames, tag, n, limit)
	}
	payload := make([]byte, n+1)
	if _, err := io.ReadFull(fr.r, payload); err != nil {
		return "", nil, formatFailure("file ends inside frame %d (truncated)", fr.frames)
	}
	if payload[n] != '\n' {
		return "", nil, formatFailure("frame %d (%q): payload not followed by a newline", fr.frames, tag)
	}
	return tag, payload[:n], nil
}

func splitHashes(b []byte, what string) ([][]byte, error) {
	if len(b)%hasher.Size() != 0 {
		return nil, formatFailure("%s: %d bytes is not a whole number of hashes", what, len(b))
	}
	var hs [][]byte
	for len(b) > 0 {
		hs = append(hs, b[:hasher.Size()])
		b = b[hasher.Size():]
	}
	return hs, nil
}

// VerifyExport reads and verifies an export file (docs/export.md) with the
// trusted key: the checkpoint's signature and origin; every entry's
// canonical form, key, signature, index and prev link (into the entry
// before the range too, when the export or the auditor gives its hash);
// that the entries are the checkpoint tree's leaves start to end-1; and,
// given a trusted earlier checkpoint, that the export's tree extends it;
// and that each policy-set frame holds a policy bundle, of a set an entry
// of the range names, carried once, in the order the entries first name
// the sets (the report returns them). Memory stays O(log size) whatever
// the number of entries, apart from the policy sets. Failures are
// *Failure values (joined when opts.All).
func VerifyExport(r io.Reader, key *Key, opts ExportOptions) (*ExportReport, error) {
	fr := &frameReader{r: bufio.NewReaderSize(r, 64<<10)}
	header := make([]byte, len(ExportHeader))
	if _, err := io.ReadFull(fr.r, header); err != nil || string(header) != ExportHeader {
		return nil, formatFailure("not a version 1 ledger export (want the line %q)", strings.TrimSpace(ExportHeader))
	}

	signed, err := fr.next("checkpoint", maxCheckpoint)
	if err != nil {
		return nil, err
	}
	cp, err := key.Checkpoint(signed)
	if err != nil {
		return nil, err
	}
	rangeText, err := fr.next("range", maxSmallFrame)
	if err != nil {
		return nil, err
	}
	var start, end uint64
	if n, err := fmt.Sscanf(string(rangeText), "%d %d", &start, &end); n != 2 || err != nil ||
		fmt.Sprintf("%d %d", start, end) != string(rangeText) {
		return nil, formatFailure("range frame: want \"<start> <end>\"")
	}

	prev := opts.Prev
	if start > 0 && fr.peek() == "prev" {
		text, err := fr.next("prev", maxSmallFrame)
		if err != nil {
			return nil, err
		}
		d, err := commit.ParseDigest(string(text))
		if err != nil {
			return nil, formatFailure("prev frame: %v", err)
		}
		if prev != nil && !prev.Equal(d) {
			return nil, &Failure{Index: int64(start), Check: CheckPrev,
				Err: errors.New("the export's link into the range differs from the auditor's entry hash")}
		}
		prev = &d
	}
	leftBytes, err := fr.next("left", maxProofHashes*hasher.Size())
	if err != nil {
		return nil, err
	}
	rightBytes, err := fr.next("right", maxProofHashes*hasher.Size())
	if err != nil {
		return nil, err
	}
	left, err := splitHashes(leftBytes, "left")
	if err != nil {
		return nil, err
	}
	right, err := splitHashes(rightBytes, "right")
	if err != nil {
		return nil, err
	}

	report := &ExportReport{Checkpoint: cp, Signed: signed, Start: start, End: end}
	var failures []error
	record := func(err error) error {
		if err == nil {
			return nil
		}
		failures = append(failures, err)
		if opts.All {
			return nil
		}
		return err
	}

	var consistency [][]byte
	consistencyFrom, hasConsistency := uint64(0), false
	if fr.peek() == "consistency" {
		payload, err := fr.next("consistency", maxSmallFrame+maxProofHashes*hasher.Size())
		if err != nil {
			return nil, err
		}
		sizeText, hashes, ok := bytes.Cut(payload, []byte("\n"))
		n, perr := strconv.ParseUint(string(sizeText), 10, 64)
		if !ok || perr != nil || strconv.FormatUint(n, 10) != string(sizeText) {
			return nil, formatFailure("consistency frame: want \"<size>\\n<hashes>\"")
		}
		if consistency, err = splitHashes(hashes, "consistency"); err != nil {
			return nil, err
		}
		consistencyFrom, hasConsistency = n, true
	}
	if t := opts.Trusted; t != nil {
		ce := &ConsistencyError{TrustedSize: t.Size, Size: cp.Size, Start: start, End: end,
			ProofFrom: consistencyFrom, HasProof: hasConsistency}
		part := "consistency proof"
		switch {
		case t.Size == cp.Size:
			if !bytes.Equal(t.Hash, cp.Hash) {
				part, ce.Err = "checkpoint", errors.New("same tree size as the trusted checkpoint, different root: the log forked")
			}
		case t.Size > cp.Size:
			part, ce.Err = "checkpoint", fmt.Errorf("the trusted checkpoint of size %d is newer than the export's of size %d", t.Size, cp.Size)
		case t.Size == 0:
			// The empty tree is a prefix of every tree: its proof is
			// empty (RFC 9162 §2.1.4), and ledgerd writes no frame for
			// consistency_from=0. A proof frame the export carries from
			// another size proves nothing more.
			if err := Consistency(t, cp, nil); err != nil {
				part, ce.Err = "trusted checkpoint", errors.Unwrap(err)
			}
		case !hasConsistency || consistencyFrom != t.Size:
			ce.Err = fmt.Errorf("the export proves no consistency with the trusted tree of size %d", t.Size)
			if hasConsistency {
				ce.Err = fmt.Errorf("%w (its proof is from size %d)", ce.Err, consistencyFrom)
			}
		default:
			if err := Consistency(t, cp, consistency); err != nil {
				ce.Err = errors.Unwrap(err) // Consistency's *Failure: keep its reason
			}
		}
		err = nil
		if ce.Err != nil {
			err = &Failure{Index: NoIndex, Part: part, Check: CheckConsistency, Err: ce}
		}
		if err := record(err); err != nil {
			return nil, err
		}
		if err == nil {
			report.ConsistencyFrom = t.Size
		}
	}

	rng, err := NewRange(key, cp, start, end, prev, opts.All)
	if err != nil {
		return nil, err
	}
	named := &namedSets{position: map[commit.Digest]int{}}
	trailer, err := verifyEntries(fr, rng, key, start, end, opts, named, record)
	if err != nil {
		return nil, err
	}
	report.Named = named.order
	if trailer != nil {
		if err := verifyTrailer(fr, trailer, named, report, record); err != nil {
			return nil, err
		}
	}
	if err := rng.Finish(left, right); err != nil {
		failures = append(failures, err)
	}
	if err := errors.Join(failures...); err != nil {
		return nil, err
	}
	if rng.prev != nil {
		report.LastHash = *rng.prev
	}
	return report, nil
}

// namedSets are the distinct policy-set digests the entries name, in order
// of first appearance, with each one's position in that order.
type namedSets struct {
	order    []commit.Digest
	position map[commit.Digest]int
}

// add notes the set a version 3 entry (a ledger decision or a set's
// publication) names; other entries name none (an approval's entries,
// versions 4 and 5, have a kind but no policy set).
func (n *namedSets) add(e *entry.Entry) {
	if e == nil || e.Version() != entry.Version3 {
		return
	}
	if _, ok := n.position[e.PolicySet]; !ok {
		n.position[e.PolicySet] = len(n.order)
		n.order = append(n.order, e.PolicySet)
	}
}

// frame is a frame read but not yet handled.
type frame struct {
	tag     string
	payload []byte
}

// frameLimit bounds each frame after the header part by its tag.
func frameLimit(tag string) int {
	switch tag {
	case "entry":
		return maxEntryFrameSize
	case "policy-set":
		return MaxPolicySetFrame
	}
	return maxSmallFrame
}

// verifyTrailer reads the frames after the entries, from the first one,
// f: the policy-set frames, then the end frame. Each bundle must decode
// (policy.ParseBundle), name a set an entry of the range names, not
// repeat one, and come in the order the entries first name the sets.
func verifyTrailer(fr *frameReader, f *frame, named *namedSets, report *ExportReport, record func(error) error) error {
	sets, last := 0, -1
	for f.tag == "policy-set" {
		sets++
		fail := func(format string, args ...any) error {
			return record(&Failure{Index: NoIndex, Part: fmt.Sprintf("policy-set frame %d (frame %d of the file)", sets, fr.frames),
				Check: CheckFormat, Err: fmt.Errorf(format, args...)})
		}
		var err error
		d := policy.DigestOfBundle(f.payload)
		files, perr := policy.ParseBundle(f.payload)
		pos, isNamed := named.position[d]
		_, repeated := report.PolicySets[d]
		switch {
		case perr != nil:
			err = fail("not a policy bundle: %w", perr)
		case repeated:
			err = fail("policy set %s again: each set is carried once", d)
		case !isNamed:
			err = fail("policy set %s is named by no entry of the range", d)
		case pos < last:
			err = fail("policy set %s out of order: the sets come in the order the entries first name them", d)
		default:
			last = pos
			if report.PolicySets == nil {
				report.PolicySets = map[commit.Digest][]policy.File{}
			}
			report.PolicySets[d] = files
		}
		if err != nil {
			return err
		}
		tag, payload, err := fr.read(frameLimit)
		if err != nil {
			return record(err)
		}
		f = &frame{tag, payload}
	}
	if f.tag != "end" {
		want := "a policy-set frame or the end"
		if f.tag == "entry" {
			want = "the end: entries come before the policy sets"
		}
		return record(formatFailure("frame %d is %q, want %s", fr.frames, f.tag, want))
	}
	if len(f.payload) != 0 {
		if err := record(formatFailure("end frame is not empty")); err != nil {
			return err
		}
	}
	if _, err := fr.r.ReadByte(); err != io.EOF {
		return record(formatFailure("content after the end frame"))
	}
	return nil
}

// job is one frame after the header part: an entry to check, or a
// framing failure to report in file order.
type job struct {
	index   uint64
	payload []byte
	err     error
	c       checked
}

// A batch is a run of consecutive jobs, handed between goroutines as one:
// a channel operation and a goroutine switch cost about as much as
// parsing a small entry, so handing entries over one by one took a
// noticeable part of the CPU (docs/performance.md, issue 17).
type batch struct {
	seq  uint64
	jobs []job
}

// Bounds on a batch: batchEntries entries, and the payloads of all but
// the last at most batchBytes, so that the entries in flight stay bounded
// in bytes whatever their size.
const (
	batchEntries = 64
	batchBytes   = 256 << 10
)

// verifyEntries reads the entry frames and the end frame. The checks of
// each entry that need no other entry (encoding, signature, hashes) run on
// every core, on batches of consecutive entries; the rest run in file
// order in one goroutine, so failures are reported in the order of the
// file. Entries in flight are bounded (a few batches per core), so memory
// does not grow with the export. It returns the first frame after the
// entries (nil if the file cannot be framed that far) and the failure
// that stops verification, if any; others go to record. The policy sets
// the entries name go to named.
func verifyEntries(fr *frameReader, rng *Range, key *Key, start, end uint64, opts ExportOptions, named *namedSets, record func(error) error) (*frame, error) {
	workers := runtime.GOMAXPROCS(0)
	batches := make(chan *batch, 2*workers)
	results := make(chan *batch, 2*workers)
	stop := make(chan struct{})

	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var w checker
			for b := range batches {
				for i := range b.jobs {
					if j := &b.jobs[i]; j.err == nil {
						j.c.check(key, j.index, j.payload, !opts.rereading, &w)
					}
				}
				results <- b
			}
		}()
	}

	var fatal error
	collected := make(chan struct{})
	go func() {
		defer close(collected)
		pending := map[uint64]*batch{}
		var next uint64
		for b := range results {
			pending[b.seq] = b
			for b := pending[next]; b != nil; b = pending[next] {
				delete(pending, next)
				next++
				for i := range b.jobs {
					if fatal != nil {
						break // drain
					}
					j := &b.jobs[i]
					var err error
					if j.err != nil {
						err = record(j.err)
					} else if err = rng.accept(&j.c); err == nil {
						named.add(j.c.entry)
						if opts.OnEntry != nil {
							opts.OnEntry(j.index, j.payload)
						}
						if opts.OnParsed != nil && j.c.entry != nil {
							opts.OnParsed(j.index, j.c.entry, j.c.hash, j.payload)
						}
						if opts.Progress != nil {
							opts.Progress(j.index-start+1, end-start)
						}
					}
					if err != nil {
						fatal = err
						close(stop)
					}
				}
			}
		}
	}()

	var seq uint64
	current, size := &batch{jobs: make([]job, 0, batchEntries)}, 0
	send := func() bool {
		if len(current.jobs) == 0 {
			return true
		}
		b := current
		b.seq = seq
		seq++
		current, size = &batch{jobs: make([]job, 0, batchEntries)}, 0
		select {
		case batches <- b:
			return true
		case <-stop:
			return false
		}
	}
	add := func(j job) bool {
		current.jobs = append(current.jobs, j)
		size += len(j.payload)
		if len(current.jobs) == batchEntries || size >= batchBytes {
			return send()
		}
		return true
	}
	var trailer *frame
	for i := start; ; i++ {
		tag, payload, err := fr.read(frameLimit)
		if err != nil {
			var f *Failure
			if errors.As(err, &f) {
				f.Index, f.Part = int64(i), ""
			}
			add(job{err: err})
			break // the rest of the file cannot be framed
		}
		if tag == "end" || tag == "policy-set" {
			trailer = &frame{tag, payload}
			break
		}
		if tag != "entry" {
			add(job{err: formatFailure("frame %d is %q, want an entry, a policy set or the end", fr.frames, tag)})
			break
		}
		if !add(job{index: i, payload: payload}) {
			break
		}
	}
	send()
	close(batches)
	wg.Wait()
	close(results)
	<-collected
	if fatal != nil {
		return nil, fatal
	}
	return trailer, nil
}
