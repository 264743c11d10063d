package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/decisionledger/ledger/client"
	"github.com/decisionledger/ledger/internal/progress"
	"github.com/decisionledger/ledger/internal/termtext"
	"github.com/decisionledger/ledger/verify"
)

// runExport fetches an export file (GET /v1/export, docs/export.md) of a
// range of entries, by default the whole log at the latest checkpoint,
// and verifies it as ledger-verify export does before it is written
// under its name: it is downloaded to a temporary file beside FILE and
// renamed once verified, or removed.
func runExport(args []string, stdout, stderr io.Writer) int {
	c := newCommon("export", "export [--url URL] (--key VKEY | --key-file FILE | --trust FILE)... [--token-file FILE] [--start INDEX] [--end INDEX] [--trusted CHECKPOINT] --out FILE [--json]")
	out := c.fs.String("out", "", "")
	startText := c.fs.String("start", "0", "")
	endText := c.fs.String("end", "", "")
	trustedFile := c.fs.String("trusted", "", "")
	pos, code := c.parseArgs(args, stdout, stderr)
	if code >= 0 {
		return code
	}
	if len(pos) != 0 {
		return c.usageError(stderr, "takes no arguments")
	}
	if *out == "" {
		return c.usageError(stderr, "needs --out FILE (\"-\" for standard output)")
	}
	if *out == "-" && *c.json {
		return c.usageError(stderr, "--out - and --json exclude each other")
	}
	start, ok := parseIndex(*startText)
	if !ok {
		return c.usageError(stderr, "--start %s is not a decimal entry index", termtext.Quote(*startText))
	}
	var end uint64
	if *endText != "" {
		if end, ok = parseIndex(*endText); !ok {
			return c.usageError(stderr, "--end %s is not a decimal entry index", termtext.Quote(*endText))
		}
	}
	trustedText, code := readTrusted(stderr, "export", *trustedFile)
	if code != exitOK {
		return code
	}
	cl, ctx, cancel, code := c.setup(stderr, false)
	if code != exitOK {
		return code
	}
	defer cancel()
	trusted, code := c.trustedCheckpoint(stderr, "export", *trustedFile, trustedText)
	if code != exitOK {
		return code
	}
	// The latest checkpoint, verified, fixes the tree the export is at.
	cp, _, err := cl.Checkpoint(ctx)
	if err != nil {
		return c.failed(stderr, "export", err)
	}
	if *endText == "" {
		end = cp.Size
	}
	switch {
	case cp.Size == 0:
		errorf(stderr, "export: the log is empty: there is nothing to export")
		return exitFailed
	case end > cp.Size:
		return c.usageError(stderr, "--end %d is beyond the latest checkpoint's tree (size %d)", end, cp.Size)
	case start > end:
		return c.usageError(stderr, "--start %d is after --end %d", start, end)
	case trusted != nil && trusted.Size > cp.Size:
		errorf(stderr, "export: the latest tree (size %d) is smaller than the trusted one (size %d)", cp.Size, trusted.Size)
		return exitFailed
	}
	token, _ := c.token(io.Discard, false)
	var finish func()
	job := &exportJob{base: strings.TrimSuffix(*c.url, "/"), token: token, key: c.key,
		start: start, end: end, endGiven: *endText != "", size: cp.Size, trusted: trusted}
	job.hooks, finish = exportProgress(stderr)
	defer finish()
	if *out == "-" {
		return c.exportToStdout(ctx, stdout, stderr, job)
	}
	report, kept, code := c.exportToFile(ctx, stderr, job, *out)
	if code != exitOK {
		return code
	}
	if *c.json {
		v := map[string]any{"result": "verified", "file": *out, "start": start, "end": end, "tree_size": cp.Size, "last_hash": report.LastHash}
		if kept > 0 {
			v["resumed"] = kept
		}
		if trusted != nil {
			v["consistent_with"] = trusted.Size
		}
		termtext.WriteJSON(stdout, v)
		return exitOK
	}
	termtext.PrintLine(stdout, "wrote %s: entries [%d, %d) in the tree of size %d (verified)", termtext.Quote(*out), start, end, cp.Size)
	if trusted != nil {
		termtext.PrintLine(stdout, "  extends the trusted tree of size %d (consistency proof verified)", trusted.Size)
	}
	if kept > 0 {
		termtext.PrintLine(stdout, "  resumed: %d entries kept from %s, verified again; the rest downloaded", kept, termtext.Quote(*out+partialSuffix))
	}
	termtext.PrintLine(stdout, "  last entry hash %s", report.LastHash)
	return exitOK
}

// exportToFile downloads job's export to FILE.partial, resuming from what
// a partial download of the same export left there (resume.go), verifies
// it whole and renames it to out. It returns the report and the number of
// entries kept from a partial download. An interrupted download leaves
// FILE.partial for the next run; one that does not verify is removed.
func (c *common) exportToFile(ctx context.Context, stderr io.Writer, job *exportJob, out string) (*verify.ExportReport, uint64, int) {
	path := out + partialSuffix
	p, err := readPartial(path, job)
	if err != nil {
		var pe *partialError
		if errors.As(err, &pe) {
			errorf(stderr, "export: %v", err)
			hintf(stderr, "it is not the start of this export: remove it to download the export anew")
			return nil, 0, exitFailed
		}
		errorf(stderr, "export: %v", err)
		return nil, 0, exitFailed
	}
	var kept uint64
	if p != nil {
		kept = p.count
		if job.hooks.Resumed != nil {
			job.hooks.Resumed(kept)
		}
		err = resume(ctx, job, p, path)
	} else {
		err = downloadFresh(ctx, job, path)
	}
	if err != nil {
		var pe *partialError
		if errors.As(err, &pe) {
			errorf(stderr, "export: %v", err)
			hintf(stderr, "remove it to download the export anew")
			return nil, 0, exitFailed
		}
		code := exitFailed
		if errors.Is(err, errCutShort) {
			errorf(stderr, "export: %v", err)
			if errors.Is(err, context.DeadlineExceeded) {
				hintf(stderr, "the download takes longer than --timeout %s: give it more", *c.timeout)
			}
		} else {
			code = c.failed(stderr, "export", err)
		}
		if _, serr := os.Stat(path); serr == nil {
			hintf(stderr, "%s holds what arrived: the same command again resumes from it", termtext.Quote(path))
		}
		return nil, 0, code
	}
	f, err := os.Open(path)
	if err != nil {
		errorf(stderr, "export: %v", err)
		return nil, 0, exitFailed
	}
	report, err := verify.VerifyExport(f, job.key, verify.ExportOptions{Trusted: job.trusted, Progress: job.hooks.Verified})
	f.Close()
	if err == nil && (report.Start != job.start || report.End != job.end || report.Checkpoint.Size != job.size) {
		err = fmt.Errorf("asked for entries [%d, %d) at tree size %d, got [%d, %d) at %d",
			job.start, job.end, job.size, report.Start, report.End, report.Checkpoint.Size)
	}
	if err != nil {
		os.Remove(path) // what the next run would resume from is wrong
		code := c.failed(stderr, "export", fmt.Errorf("%w: %w", client.ErrUnverified, err))
		hintf(stderr, "%s was removed: the next run downloads the export anew", termtext.Quote(path))
		return nil, 0, code
	}
	os.Chmod(path, 0o644)
	if err := os.Rename(path, out); err != nil {
		errorf(stderr, "export: %v", err)
		return nil, 0, exitFailed
	}
	return report, kept, exitOK
}

// downloadFresh downloads job's whole export to path, as it arrives: an
// interruption leaves what came.
func downloadFresh(ctx context.Context, job *exportJob, path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	err = httpDownload(ctx, job.query(job.start), job.token, f, job.hooks.Downloaded)
	if serr := f.Sync(); err == nil {
		err = serr
	}
	return err
}

// exportToStdout downloads job's export to a temporary file, verifies it
// and copies it to stdout: nothing is written there unless it verified.
func (c *common) exportToStdout(ctx context.Context, stdout, stderr io.Writer, job *exportJob) int {
	tmp, err := os.CreateTemp(".", ".ledgerctl-export-*")
	if err != nil {
		errorf(stderr, "export: %v", err)
		return exitFailed
	}
	defer func() {
		tmp.Close()
		os.Remove(tmp.Name())
	}()
	if err := httpDownload(ctx, job.query(job.start), job.token, tmp, job.hooks.Downloaded); err != nil {
		return c.failed(stderr, "export", err)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		errorf(stderr, "export: %v", err)
		return exitFailed
	}
	report, err := verify.VerifyExport(tmp, job.key, verify.ExportOptions{Trusted: job.trusted, Progress: job.hooks.Verified})
	if err == nil && (report.Start != job.start || report.End != job.end || report.Checkpoint.Size != job.size) {
		err = fmt.Errorf("asked for entries [%d, %d) at tree size %d, got [%d, %d) at %d",
			job.start, job.end, job.size, report.Start, report.End, report.Checkpoint.Size)
	}
	if err != nil {
		return c.failed(stderr, "export", fmt.Errorf("%w: %w", client.ErrUnverified, err))
	}
	_, err = tmp.Seek(0, io.SeekStart)
	if err == nil {
		_, err = io.Copy(stdout, tmp)
	}
	if err != nil {
		errorf(stderr, "export: %v", err)
		return exitFailed
	}
	return exitOK
}

// exportProgress returns the hooks that draw an export's progress on
// stderr if it is a terminal (internal/progress), one phase at a time:
// checking a partial download's entries, downloading (bytes), verifying
// the whole file (entries). A phase that begins ends the line of the one
// before and starts its own run, whose first second is silent; finish
// erases the last.
func exportProgress(stderr io.Writer) (hooks exportHooks, finish func()) {
	if !progress.IsTerminal(stderr) {
		return exportHooks{}, func() {}
	}
	var meter *progress.Meter
	phase := ""
	enter := func(name, unit string) {
		if phase != name {
			meter.Finish()
			phase = name
			meter = progress.New(stderr, programName+": export: "+name, unit)
		}
	}
	hooks.Downloaded = func(n int64) {
		enter("downloading", "bytes")
		meter.Update(uint64(n), 0)
	}
	hooks.Checked = func(done, total uint64) {
		enter("checking the partial download", "entries")
		meter.Update(done, total)
	}
	hooks.Verified = func(done, total uint64) {
		enter("verifying", "entries")
		meter.Update(done, total)
	}
	return hooks, func() { meter.Finish() }
}

// httpDownload GETs url with the bearer token if any and copies the body
// of a 200 to w, telling downloaded (if set) the bytes so far; another
// status is a *client.Error.
func httpDownload(ctx context.Context, url, token string, w io.Writer, downloaded func(int64)) error {
	body, err := httpOpen(ctx, url, token)
	if err != nil {
		return err
	}
	defer body.Close()
	if _, err := io.Copy(w, &countingReader{r: body, hook: downloaded}); err != nil {
		if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
			err = ctx.Err()
		}
		return fmt.Errorf("%s: %w: %w", url, errCutShort, err)
	}
	return nil
}

// errCutShort: the answer began and then stopped (the connection dropped,
// or --timeout passed), as opposed to no answer at all.
var errCutShort = errors.New("the answer was cut short")

// httpOpen GETs url with the bearer token if any and returns the body of
// a 200 for the caller to read and close; another status is a
// *client.Error.
func httpOpen(ctx context.Context, url, token string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err // a *url.Error, which names url
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		json.Unmarshal(b, &e)
		return nil, &client.Error{Status: resp.StatusCode, Code: e.Error.Code, Message: e.Error.Message}
	}
	return resp.Body, nil
}
