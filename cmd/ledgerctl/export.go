package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
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
	c := newCommon("export", "export [--url URL] (--key VKEY | --key-file FILE | --trust FILE)... [--token-file FILE] [--start INDEX] [--end INDEX] [--trusted FILE] --out FILE [--json]")
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
	q := url.Values{"start": {strconv.FormatUint(start, 10)}, "end": {strconv.FormatUint(end, 10)}, "tree_size": {strconv.FormatUint(cp.Size, 10)}}
	if trusted != nil && trusted.Size > 0 {
		q.Set("consistency_from", strconv.FormatUint(trusted.Size, 10))
	}
	dir := "."
	if *out != "-" {
		dir = filepath.Dir(*out)
	}
	tmp, err := os.CreateTemp(dir, ".ledgerctl-export-*")
	if err != nil {
		errorf(stderr, "export: %v", err)
		return exitFailed
	}
	defer func() {
		tmp.Close()
		os.Remove(tmp.Name()) // gone once renamed
	}()
	token, _ := c.token(io.Discard, false)
	if err := httpDownload(ctx, strings.TrimSuffix(*c.url, "/")+"/v1/export?"+q.Encode(), token, tmp, stderr); err != nil {
		return c.failed(stderr, "export", err)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		errorf(stderr, "export: %v", err)
		return exitFailed
	}
	opts := verify.ExportOptions{Trusted: trusted}
	meter := progress.New(stderr, programName+": export: verifying", "entries")
	opts.Progress = meter.Hook()
	report, err := verify.VerifyExport(tmp, c.key, opts)
	meter.Finish()
	if err != nil {
		return c.failed(stderr, "export", fmt.Errorf("%w: %w", client.ErrUnverified, err))
	}
	if report.Start != start || report.End != end || report.Checkpoint.Size != cp.Size {
		return c.failed(stderr, "export", fmt.Errorf("%w: asked for entries [%d, %d) at tree size %d, got [%d, %d) at %d",
			client.ErrUnverified, start, end, cp.Size, report.Start, report.End, report.Checkpoint.Size))
	}
	if *out == "-" {
		_, err := tmp.Seek(0, io.SeekStart)
		if err == nil {
			_, err = io.Copy(stdout, tmp)
		}
		if err != nil {
			errorf(stderr, "export: %v", err)
			return exitFailed
		}
		return exitOK
	}
	if err := tmp.Sync(); err != nil {
		errorf(stderr, "export: %v", err)
		return exitFailed
	}
	os.Chmod(tmp.Name(), 0o644)
	if err := os.Rename(tmp.Name(), *out); err != nil {
		errorf(stderr, "export: %v", err)
		return exitFailed
	}
	if *c.json {
		v := map[string]any{"result": "verified", "file": *out, "start": start, "end": end, "tree_size": cp.Size, "last_hash": report.LastHash}
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
	termtext.PrintLine(stdout, "  last entry hash %s", report.LastHash)
	return exitOK
}

// httpDownload GETs url with the bearer token if any and copies the body
// of a 200 to w, with a progress line on stderr if a terminal; another
// status is a *client.Error.
func httpDownload(ctx context.Context, url, token string, w io.Writer, stderr io.Writer) error {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err // a *url.Error, which names url
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		json.Unmarshal(b, &e)
		return &client.Error{Status: resp.StatusCode, Code: e.Error.Code, Message: e.Error.Message}
	}
	if meter := progress.New(stderr, programName+": export: downloading", "bytes"); meter != nil {
		w = &meteredWriter{w: w, meter: meter, total: uint64(max(resp.ContentLength, 0))}
		defer meter.Finish()
	}
	if _, err := io.Copy(w, resp.Body); err != nil {
		if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
			return fmt.Errorf("%s: %w", url, ctx.Err())
		}
		return fmt.Errorf("%s: %w", url, err)
	}
	return nil
}

// meteredWriter counts the bytes written through it on a progress line.
type meteredWriter struct {
	w     io.Writer
	meter *progress.Meter
	n     uint64
	total uint64 // 0: unknown
}

func (m *meteredWriter) Write(b []byte) (int, error) {
	n, err := m.w.Write(b)
	m.n += uint64(n)
	m.meter.Update(m.n, m.total)
	return n, err
}
