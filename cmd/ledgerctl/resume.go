package main

// Resuming an export (ledgerctl export --out FILE).
//
// The download goes to FILE.partial, which always holds the start of an
// export file: the header, the frames before the entries, then complete
// or cut entry frames. An interrupted run (a dropped connection, the
// --timeout, the process killed) leaves it. The next run with the same
// --start (and --end, if one was given) reads it first, trusting none of
// its bytes beyond what it checks there and then:
//
//   - its checkpoint must open with the verifier key (the same log), its
//     range must start at --start and end at --end if one was given, and
//     its tree must not be larger than the latest checkpoint's;
//   - each complete entry frame must verify as an export's entries do
//     (encoding, key, signature, index, prev link), from the first on.
//
// A partial download that fails these checks is refused (partialError,
// naming the file and the entry or the part), and left for the operator
// to look at or delete: it is never joined. One with no complete entry
// is discarded, as there is nothing in it to keep.
//
// From the M entries kept, the run asks ledgerd only for the rest,
// entries [--start+M, end) at the latest checkpoint, and requires the
// answer's link into its range (its prev frame) to be the entry hash of
// the last entry kept. It writes FILE.partial.next: the answer's
// checkpoint, the whole range, the kept prev and left frames (the left
// compact range does not depend on the tree size), the answer's right
// and consistency frames, the kept entries, and renames it FILE.partial
// before the answer's entries follow, so that every moment's
// FILE.partial is again the start of an export. After the entries come
// the policy sets: first those the kept entries name (GET
// /v1/policies/{digest}), then the answer's others, each once, in the
// order the entries first name them: the bytes of a one-shot export at
// the same checkpoint.
//
// Then the whole file is verified as a one-shot download is, against the
// latest checkpoint: the leaves against its root prove the kept entries
// and the kept left frame too. A file that fails is removed, FILE.partial
// with it, and the next run starts over.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/decisionledger/ledger/client"
	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/internal/termtext"
	"github.com/decisionledger/ledger/verify"
	"github.com/transparency-dev/formats/log"
)

// partialSuffix names the download in progress beside FILE.
const partialSuffix = ".partial"

// partialError: the partial download beside FILE is not the start of the
// export asked for, or does not verify. It is refused, never joined.
type partialError struct {
	// File is the partial download's name.
	File string
	// Index is the entry that failed, or verify.NoIndex.
	Index int64
	// Err says what failed: a *verify.Failure for an entry or the
	// checkpoint, or what differs from the export asked for.
	Err error
}

func (e *partialError) Error() string {
	var f *verify.Failure
	if e.Index != verify.NoIndex && !errors.As(e.Err, &f) {
		return fmt.Sprintf("the partial download %s: entry %d: %v", termtext.Quote(e.File), e.Index, e.Err)
	}
	return fmt.Sprintf("the partial download %s: %v", termtext.Quote(e.File), e.Err)
}

func (e *partialError) Unwrap() error { return e.Err }

// exportHooks are where progress is to be reported (a progress line is
// another change's); each is optional, and called on the command's
// goroutine.
type exportHooks struct {
	// Resumed is called once a partial download has verified, with the
	// number of its entries kept.
	Resumed func(entries uint64)
	// Downloaded is called as bytes of the export arrive, with the number
	// received in this run so far.
	Downloaded func(bytes int64)
	// Checked is called as a partial download's entries verify, with the
	// number checked and the number in its range.
	Checked func(done, total uint64)
	// Verified is called as the whole file's entries verify, with the
	// number verified and the number in the range
	// (verify.ExportOptions.Progress).
	Verified func(done, total uint64)
}

// exportJob is one export to FILE: what to ask ledgerd for and where.
type exportJob struct {
	base, token string // ledgerd's URL without a trailing slash; the bearer token, if any
	key         *verify.Key
	start, end  uint64 // the range
	endGiven    bool   // --end was given (else end is the latest tree size)
	size        uint64 // the latest checkpoint's tree size
	trusted     *log.Checkpoint
	hooks       exportHooks
}

// query returns the GET /v1/export query for entries [from, j.end).
func (j *exportJob) query(from uint64) string {
	q := url.Values{"start": {strconv.FormatUint(from, 10)}, "end": {strconv.FormatUint(j.end, 10)}, "tree_size": {strconv.FormatUint(j.size, 10)}}
	if j.trusted != nil && j.trusted.Size > 0 {
		q.Set("consistency_from", strconv.FormatUint(j.trusted.Size, 10))
	}
	return j.base + "/v1/export?" + q.Encode()
}

// partial is what a verified partial download holds.
type partial struct {
	size       uint64 // its checkpoint's tree size
	prev, left []byte // the payloads of its prev (nil if none) and left frames
	// entries are the kept entries' frames: count of them from offset
	// entriesAt, length bytes.
	entriesAt, length int64
	count             uint64
	last              commit.Digest   // the entry hash of the last one
	named             []commit.Digest // the policy sets they name, in order of first appearance
}

// readPartial reads and checks the partial download at path for job:
// nil, nil when there is none, or nothing in it to keep.
func readPartial(path string, job *exportJob) (*partial, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	refuse := func(index int64, err error) error { return &partialError{File: path, Index: index, Err: err} }
	fr := &frameReader{r: bufio.NewReaderSize(f, 64<<10)}
	if cut, err := fr.header(); err != nil {
		if cut {
			return nil, nil
		}
		return nil, refuse(verify.NoIndex, err)
	}
	tags := []string{"checkpoint", "range", "prev", "left", "right", "consistency"}
	frames := map[string][]byte{}
	var tag string
	var payload []byte
	for {
		tag, payload, err = fr.next()
		if errors.Is(err, errCut) || errors.Is(err, io.EOF) {
			return nil, nil // cut before its first entry: nothing to keep
		}
		if err != nil {
			return nil, refuse(verify.NoIndex, err)
		}
		if !isOneOf(tag, tags) {
			break
		}
		for len(tags) > 0 && tags[0] != tag {
			tags = tags[1:]
		}
		if len(tags) == 0 {
			return nil, refuse(verify.NoIndex, fmt.Errorf("frame %d: %q out of order", fr.frames, tag))
		}
		tags = tags[1:]
		frames[tag] = payload
	}
	if frames["checkpoint"] == nil || frames["range"] == nil || frames["left"] == nil || frames["right"] == nil {
		return nil, refuse(verify.NoIndex, fmt.Errorf("frame %d: %q before the checkpoint, range, left and right frames", fr.frames, tag))
	}
	cp, err := job.key.Checkpoint(frames["checkpoint"])
	if err != nil {
		return nil, refuse(verify.NoIndex, err)
	}
	start, end, ok := parseRange(string(frames["range"]))
	switch {
	case !ok:
		return nil, refuse(verify.NoIndex, errors.New("range frame: want \"<start> <end>\""))
	case start != job.start || job.endGiven && end != job.end:
		return nil, refuse(verify.NoIndex, fmt.Errorf("it is of entries [%d, %d), not of the [%d, %d) asked for", start, end, job.start, job.end))
	case cp.Size > job.size:
		return nil, refuse(verify.NoIndex, fmt.Errorf("its checkpoint's tree (size %d) is larger than the latest one (size %d)", cp.Size, job.size))
	}
	p := &partial{size: cp.Size, prev: frames["prev"], left: frames["left"], entriesAt: fr.offset - fr.last}
	var prev *commit.Digest
	if p.prev != nil {
		d, err := commit.ParseDigest(string(p.prev))
		if err != nil {
			return nil, refuse(verify.NoIndex, fmt.Errorf("prev frame: %w", err))
		}
		prev = &d
	}
	rng, err := verify.NewRange(job.key, cp, start, end, prev, false)
	if err != nil {
		return nil, refuse(verify.NoIndex, err)
	}
	seen := map[commit.Digest]bool{}
	for tag == "entry" && start+p.count < end {
		index := start + p.count
		if err := rng.Add(payload); err != nil {
			return nil, refuse(int64(index), err)
		}
		e, err := entry.Parse(payload)
		if err != nil {
			return nil, refuse(int64(index), err) // Add parsed it: not reached
		}
		// Only version 3 entries name a set (docs/export.md §1), as the
		// writer reads them.
		if e.Version() == entry.Version3 && !seen[e.PolicySet] {
			seen[e.PolicySet] = true
			p.named = append(p.named, e.PolicySet)
		}
		p.count++
		p.length += fr.last
		if job.hooks.Checked != nil {
			job.hooks.Checked(p.count, end-start)
		}
		tag, payload, err = fr.next()
		if errors.Is(err, errCut) || errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, refuse(int64(start+p.count), err)
		}
	}
	if p.count == 0 {
		return nil, nil
	}
	p.last = *rng.Last()
	return p, nil
}

// resume downloads the rest of the export after the entries p kept into
// a new FILE.partial at path (see the top of this file). An error leaves
// FILE.partial holding whatever complete entries arrived.
func resume(ctx context.Context, job *exportJob, p *partial, path string) error {
	from := job.start + p.count
	u := job.query(from)
	body, err := httpOpen(ctx, u, job.token)
	if err != nil {
		return err
	}
	defer body.Close()
	counted := &countingReader{r: body, hook: job.hooks.Downloaded}
	fr := &frameReader{r: bufio.NewReaderSize(counted, 64<<10)}
	fail := func(err error) error {
		switch {
		case ctx.Err() != nil:
			err = ctx.Err()
		case errors.Is(err, errMalformed):
			return fmt.Errorf("%w: %s: %w", errUnverifiedAnswer, u, err)
		}
		return fmt.Errorf("%s: %w: %w", u, errCutShort, err)
	}
	if _, err := fr.header(); err != nil {
		return fail(err)
	}
	frames := map[string][]byte{}
	var tag string
	var payload []byte
	for {
		if tag, payload, err = fr.next(); err != nil {
			return fail(err)
		}
		if !isOneOf(tag, []string{"checkpoint", "range", "prev", "left", "right", "consistency"}) {
			break
		}
		frames[tag] = payload
	}
	// The answer's own checks come with the whole file's; what the join
	// needs is checked now.
	if s, e, ok := parseRange(string(frames["range"])); !ok || s != from || e != job.end {
		return fmt.Errorf("%w: asked for entries [%d, %d), the answer's range frame is %s", errUnverifiedAnswer, from, job.end, termtext.Quote(string(frames["range"])))
	}
	if string(frames["prev"]) != p.last.String() {
		return &partialError{File: path, Index: int64(from), Err: fmt.Errorf("%w: ledgerd's entry %d follows another entry than the last one kept (prev %s, kept %s)",
			errUnverifiedAnswer, from, termtext.Quote(string(frames["prev"])), p.last)}
	}

	next, err := os.OpenFile(path+".next", os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer next.Close()
	w := bufio.NewWriterSize(next, 64<<10)
	w.WriteString(verify.ExportHeader)
	writeFrame(w, "checkpoint", frames["checkpoint"])
	writeFrame(w, "range", fmt.Appendf(nil, "%d %d", job.start, job.end))
	if p.prev != nil {
		writeFrame(w, "prev", p.prev)
	}
	writeFrame(w, "left", p.left)
	writeFrame(w, "right", frames["right"])
	if c, ok := frames["consistency"]; ok {
		writeFrame(w, "consistency", c)
	}
	old, err := os.Open(path)
	if err != nil {
		return err
	}
	_, err = io.Copy(w, io.NewSectionReader(old, p.entriesAt, p.length))
	old.Close()
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = next.Sync()
	}
	if err == nil {
		err = os.Rename(path+".next", path)
	}
	if err != nil {
		return err
	}

	for tag == "entry" {
		writeFrame(w, tag, payload)
		if tag, payload, err = fr.next(); err != nil {
			w.Flush()
			return fail(err)
		}
	}
	// The policy sets, as a one-shot export orders them: those the kept
	// entries name first. The answer carries those its own entries name
	// (held here, as verify holds every set); the others are fetched.
	var carried []commit.Digest
	bundles := map[commit.Digest][]byte{}
	for tag == "policy-set" {
		d := commit.Digest(sha256.Sum256(payload))
		if _, ok := bundles[d]; !ok {
			carried = append(carried, d)
			bundles[d] = payload
		}
		if tag, payload, err = fr.next(); err != nil {
			w.Flush()
			return fail(err)
		}
	}
	written := map[commit.Digest]bool{}
	for _, d := range append(p.named, carried...) {
		if written[d] {
			continue
		}
		bundle, ok := bundles[d]
		if !ok {
			if bundle, err = fetchBundle(ctx, job, d); err != nil {
				w.Flush()
				return err
			}
		}
		written[d] = true
		writeFrame(w, "policy-set", bundle)
	}
	if tag != "end" {
		w.Flush()
		return fmt.Errorf("%w: frame %d of the answer is %q, want a policy-set frame or the end", errUnverifiedAnswer, fr.frames, tag)
	}
	writeFrame(w, "end", nil)
	if err := w.Flush(); err != nil {
		return err
	}
	return next.Sync()
}

// errUnverifiedAnswer: ledgerd's answer cannot be the rest of the export.
var errUnverifiedAnswer = fmt.Errorf("%w: ledgerd's answer does not continue the partial download", client.ErrUnverified)

// fetchBundle GETs the bundle of policy set d and checks its digest.
func fetchBundle(ctx context.Context, job *exportJob, d commit.Digest) ([]byte, error) {
	u := job.base + "/v1/policies/" + d.String()
	body, err := httpOpen(ctx, u, job.token)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	b, err := io.ReadAll(io.LimitReader(body, verify.MaxPolicySetFrame+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", u, err)
	}
	if len(b) > verify.MaxPolicySetFrame || commit.Digest(sha256.Sum256(b)) != d {
		return nil, fmt.Errorf("%w: %s is not the bundle of policy set %s", errUnverifiedAnswer, u, d)
	}
	return b, nil
}

// errMalformed: a frame breaks the format (docs/export.md §1).
var errMalformed = errors.New("malformed frame")

// errCut: the file or the answer ends inside a frame.
var errCut = errors.New("ends inside a frame (cut short)")

// frameReader reads the frames of an export file (docs/export.md §1) for
// their boundaries; what they hold is verify's to check.
type frameReader struct {
	r      *bufio.Reader
	frames int
	offset int64 // bytes consumed
	last   int64 // the last frame's length, header line included
}

// header reads the export's first line. cut says that the input ended
// inside it.
func (fr *frameReader) header() (cut bool, err error) {
	b := make([]byte, len(verify.ExportHeader))
	n, err := io.ReadFull(fr.r, b)
	fr.offset += int64(n)
	if !strings.HasPrefix(verify.ExportHeader, string(b[:n])) {
		return false, fmt.Errorf("not a version 1 ledger export (want the line %q)", strings.TrimSpace(verify.ExportHeader))
	}
	if err != nil {
		return true, errCut
	}
	return false, nil
}

// next reads the next frame: io.EOF at the end of the input, errCut
// inside a frame.
func (fr *frameReader) next() (string, []byte, error) {
	fr.frames++
	line, err := fr.r.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, io.EOF) && len(line) == 0 {
			return "", nil, io.EOF
		}
		if errors.Is(err, io.EOF) && len(line) < 64 {
			return "", nil, errCut
		}
		if !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
			return "", nil, err
		}
	}
	tag, lenText, ok := strings.Cut(string(bytes.TrimSuffix(line, []byte("\n"))), " ")
	n, perr := strconv.Atoi(lenText)
	if err != nil || len(line) > 64 || !ok || perr != nil || n < 0 || strconv.Itoa(n) != lenText || n > frameMax(tag) {
		return "", nil, fmt.Errorf("frame %d: %w", fr.frames, errMalformed)
	}
	payload := make([]byte, n+1)
	if _, err := io.ReadFull(fr.r, payload); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return "", nil, errCut
		}
		return "", nil, err
	}
	if payload[n] != '\n' {
		return "", nil, fmt.Errorf("frame %d (%q): %w: payload not followed by a newline", fr.frames, tag, errMalformed)
	}
	fr.last = int64(len(line) + n + 1)
	fr.offset += fr.last
	return tag, payload[:n], nil
}

// frameMax bounds a frame's payload by its tag, as verify does.
func frameMax(tag string) int {
	switch tag {
	case "entry":
		return entry.MaxEntryBytes
	case "policy-set":
		return verify.MaxPolicySetFrame
	}
	return 16 << 10
}

func writeFrame(w *bufio.Writer, tag string, payload []byte) {
	fmt.Fprintf(w, "%s %d\n", tag, len(payload))
	w.Write(payload)
	w.WriteByte('\n')
}

// parseRange reads a range frame's "<start> <end>" in its one spelling.
func parseRange(s string) (start, end uint64, ok bool) {
	a, b, ok := strings.Cut(s, " ")
	start, ok1 := parseIndex(a)
	end, ok2 := parseIndex(b)
	return start, end, ok && ok1 && ok2 && start <= end
}

func isOneOf(s string, list []string) bool {
	for _, x := range list {
		if s == x {
			return true
		}
	}
	return false
}

// countingReader reports the bytes read through it.
type countingReader struct {
	r    io.Reader
	n    int64
	hook func(int64)
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	if c.hook != nil && n > 0 {
		c.hook(c.n)
	}
	return n, err
}
