// Entries (docs/api.md "Append" and "Read"):
//
//	POST /v1/entries          append
//	GET  /v1/entries/{index}  one signed entry
//	GET  /v1/export           an export file

package server

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/decisionledger/ledger/approval/preview"
	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/server/approvals"
)

// appendRequest is the strict schema of POST /v1/entries
// (decodeAppendRequest). The mediator is not in it: it comes from the
// credential.
type appendRequest struct {
	Principal    string
	Action       string
	Decision     string
	Policies     []string
	ParamsDigest string
	ParamsSize   int
	TiersDigest  string
	Attributes   []byte // canonical JSON
	// attributes is the attributes' checked tree, for decoding them
	// without parsing them again (has: the body has them).
	attributes    commit.Value
	hasAttributes bool
	// Preview is the preview document (canonical JSON), nil if the body
	// has none.
	Preview []byte
}

// appendFields are the members an append body may have.
var appendFields = []string{"action", "attributes", "decision", "params_digest", "params_size", "policies", "preview", "principal", "tiers_digest"}

// refusedBodyGrace is how long net/http may go on reading the body of an
// append refused before its body was read, before the connection is
// closed: long enough for a client that sent its whole body to have it
// drained (so that it reads the answer rather than a reset), too short
// for a client that sends nothing more to hold the connection.
const refusedBodyGrace = 500 * time.Millisecond

// appendEntry answers POST /v1/entries for mediator, authenticated by
// mediatorAuth.
func (s *Server) appendEntry(w http.ResponseWriter, r *http.Request, mediator string) {
	start := time.Now()
	in, ok := s.readRecord(w, r, mediator, appendFields, "an append")
	if !ok {
		return
	}
	s.appendAndAnswer(w, r, mediator, in, start, nil)
}

// intake is a mediator's request, read and checked by readRecord: the
// record to append, as far as the request gives it, whether the answer
// waits for a checkpoint, and the preview it carries, rendered (nil if
// none).
type intake struct {
	rec     ledger.Record
	wait    bool
	preview *preview.Preview
	// attributes are rec.Attributes decoded (commit.Object.Any), when
	// the catalog's check decoded them and they are an object.
	attributes map[string]any
}

// readRecord reads and checks the body of a mediator's request whose
// members are fields (appendFields, decideFields): the mediator's rate,
// the body's bounds, strict decoding, ?wait, the digests and, with a
// catalog, the action, its attributes and applied-tiers digest, whose
// definition digest the record then carries. what names the request in
// refusals ("an append"). It answers a refusal itself, and then returns
// false.
func (s *Server) readRecord(w http.ResponseWriter, r *http.Request, mediator string, fields []string, what string) (intake, bool) {
	body, release, ok := s.readMediatorBody(w, r, mediator)
	if !ok {
		return intake{}, false
	}
	defer release()
	req, problem := decodeRequest(body, fields)
	if problem != "" {
		s.refuse(w, http.StatusBadRequest, "invalid_request", "the body is not %s request: %s", what, problem)
		return intake{}, false
	}
	wait := r.URL.Query().Get("wait")
	if wait != "" && wait != "checkpoint" {
		s.refuse(w, http.StatusBadRequest, "invalid_request", "wait: the only value is checkpoint")
		return intake{}, false
	}
	// Nothing in req aliases the pooled body (decodeRequest copies), so
	// the record outlives the buffer.
	rec := ledger.Record{
		Mediator: mediator, Principal: req.Principal, Action: req.Action,
		Decision: entry.Decision(req.Decision), Policies: req.Policies,
		Attributes:     req.Attributes,
		IdempotencyKey: r.Header.Get("Idempotency-Key"),
	}
	var err error
	var decoded any
	if rec.Params.Digest, rec.Params.Hiding, err = commit.ParseParamsDigest(req.ParamsDigest); err != nil {
		s.refuse(w, http.StatusBadRequest, "invalid_request", "params_digest: %v", err)
		return intake{}, false
	}
	rec.Params.Size = req.ParamsSize
	if rec.Tiers, err = commit.ParseDigest(req.TiersDigest); err != nil {
		s.refuse(w, http.StatusBadRequest, "invalid_request", "tiers_digest: %v", err)
		return intake{}, false
	}
	if s.cat != nil {
		a, declared := s.cat[req.Action]
		if !declared {
			s.refuse(w, http.StatusUnprocessableEntity, "unknown_action", "the action is not in the server's catalog")
			return intake{}, false
		}
		var err error
		if req.hasAttributes {
			// Decoded once, for the schema and the policies.
			decoded = req.attributes.Any()
			err = a.CheckAttributeValue(decoded, body)
		} else {
			err = a.CheckAttributes(req.Attributes, body)
		}
		if err != nil {
			s.refuse(w, http.StatusUnprocessableEntity, "attributes_not_declared", "attributes of %s: %v", req.Action, err)
			return intake{}, false
		}
		if !rec.Tiers.Equal(a.TiersDigest()) {
			s.refuse(w, http.StatusUnprocessableEntity, "tiers_mismatch",
				"tiers_digest is not the applied-tiers digest of the server's declaration of %s (%s)", req.Action, a.TiersDigest())
			return intake{}, false
		}
		// The definition is the server's, never the client's.
		rec.Definition = a.DefinitionDigest()
	}
	in := intake{rec: rec, wait: wait == "checkpoint"}
	in.attributes, _ = decoded.(map[string]any)
	if req.Preview != nil {
		// Checked last: rendering is the dearest check.
		if in.preview, ok = s.readPreview(w, req, fields); !ok {
			return intake{}, false
		}
	}
	return in, true
}

// readMediatorBody reads the body of a mediator's request: the body's
// bound, the mediator's rate and body_timeout. It answers a refusal
// itself, and then returns false. The body lives in a pooled buffer: the
// caller calls release once done with it.
func (s *Server) readMediatorBody(w http.ResponseWriter, r *http.Request, mediator string) (body []byte, release func(), ok bool) {
	rc := http.NewResponseController(w)
	if r.ContentLength > s.maxBodyBytes {
		// Declared too large: refused before any of it is read (it may
		// never come), and the connection closed with the body unread,
		// as an unauthenticated append's (mediatorGuard).
		rc.SetReadDeadline(time.Now().Add(refusedBodyGrace))
		w.Header().Set("Connection", "close")
		s.refuse(w, http.StatusRequestEntityTooLarge, "too_large", "the body exceeds %d bytes", s.maxBodyBytes)
		return nil, nil, false
	}
	if ok, wait := s.credentials().limiter.allow(mediator, time.Now()); !ok {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
		s.refuse(w, http.StatusTooManyRequests, "rate_limited", "the mediator's append rate is exceeded; retry later")
		return nil, nil, false
	}
	buf := bodyBuffers.Get().(*[]byte)
	release = func() { putBuffer(buf) }
	body, err := readBody(http.MaxBytesReader(w, r.Body, s.maxBodyBytes), (*buf)[:0])
	*buf = body
	if err != nil {
		release()
		var tooLarge *http.MaxBytesError
		switch {
		case errors.As(err, &tooLarge):
			s.refuse(w, http.StatusRequestEntityTooLarge, "too_large", "the body exceeds %d bytes", s.maxBodyBytes)
		case errors.Is(err, os.ErrDeadlineExceeded):
			w.Header().Set("Connection", "close")
			s.refuse(w, http.StatusRequestTimeout, "body_timeout", "the body did not arrive within %v", s.bodyTimeout)
		default:
			s.refuse(w, http.StatusBadRequest, "unreadable", "the body could not be read")
		}
		return nil, nil, false
	}
	// The body is in. Its read deadline must go: left, it would cancel
	// the request's context while the append waits for the ledger
	// (net/http's background read). The answer gets WriteTimeout from
	// when it is ready (refuse, and appendAndAnswer).
	rc.SetReadDeadline(time.Time{})
	return body, release, true
}

// appendAndAnswer appends in's record for mediator and answers with its
// receipt: 201, or 200 with Idempotent-Replayed when the Idempotency-Key
// named an entry appended before. head, if not nil, appends to the answer
// the members it carries before the receipt's (decide's decision), from
// the receipt, each followed by a comma; if it returns false, it has
// answered. When approvals are on, the preview of a needs_approval record
// is staged before the append and kept under the approval's id after it
// (approvalHead), and the answer of a recorded needs_approval decision
// that opened an approval carries the approval member after head's.
func (s *Server) appendAndAnswer(w http.ResponseWriter, r *http.Request, mediator string, in intake, start time.Time, head func(answer []byte, receipt ledger.Receipt) ([]byte, bool)) {
	rc := http.NewResponseController(w)
	var staged *approvals.Staged
	if s.appr != nil && in.preview != nil && in.rec.Decision == entry.NeedsApproval {
		var err error
		if staged, err = s.appr.Previews.Stage(r.Context(), approvals.EncodeKept(in.preview)); err != nil {
			s.log.ErrorContext(r.Context(), "storing a preview failed; nothing appended", "mediator", mediator, "error", err)
			s.refuse(w, http.StatusServiceUnavailable, "unavailable", "the preview could not be stored; nothing was appended")
			return
		}
		// Whatever the append's fate, a staged preview not kept goes.
		defer func() {
			if staged != nil {
				s.appr.Previews.Abandon(staged)
			}
		}()
	}
	receipt, err := s.l.Append(r.Context(), in.rec)
	switch {
	case errors.Is(err, ledger.ErrApproval):
		s.refuseLifecycle(w, err)
		return
	case errors.Is(err, ledger.ErrInvalidRecord):
		s.refuse(w, http.StatusBadRequest, "invalid_record", "%v", err)
		return
	case errors.Is(err, ledger.ErrIdempotencyConflict):
		s.refuse(w, http.StatusConflict, "idempotency_conflict", "the Idempotency-Key was used for another decision")
		return
	case errors.Is(err, ledger.ErrQueueFull):
		w.Header().Set("Retry-After", "1")
		s.refuse(w, http.StatusTooManyRequests, "busy", "the append queue is full; retry later")
		return
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		// The request ended (the client went away, or the server is
		// stopping) while the entry was queued: it may still be appended.
		s.log.InfoContext(r.Context(), "append not answered: the request ended while the entry was queued; it may still be appended", "mediator", mediator)
		if s.cluster {
			// As below: in a cluster every 503 says when to retry.
			w.Header().Set("Retry-After", "1")
		}
		s.refuse(w, http.StatusServiceUnavailable, "unavailable", "the request ended before the append was answered; the entry may have been appended: retry with the same Idempotency-Key to learn its receipt")
		return
	case s.l.Failure() == nil && s.storeDamaged(r.Context(), err):
		// A read before the entry was queued (its idempotency key's
		// entry) found damage.
		s.refuse(w, http.StatusInternalServerError, "internal", "the entry was not appended: the store is damaged")
		return
	case err != nil:
		s.appendFailed(r, mediator, err)
		if s.cluster {
			// Another instance sequences, or will once this one steps
			// down: a retry soon may succeed.
			w.Header().Set("Retry-After", "1")
		}
		s.refuse(w, http.StatusServiceUnavailable, "unavailable", "the entry was not appended")
		return
	}
	s.m.ObserveAppend(time.Since(start), receipt.Replayed)
	// The answer is built in a pooled buffer: Write copies it.
	buf := bodyBuffers.Get().(*[]byte)
	defer putBuffer(buf)
	answer := append((*buf)[:0], '{')
	if head != nil {
		var ok bool
		if answer, ok = head(answer, receipt); !ok {
			return
		}
	}
	if s.appr != nil {
		approval, id, err := s.approvalHead(r.Context(), in.rec, receipt, &staged)
		if err != nil {
			s.log.ErrorContext(r.Context(), "a needs_approval decision was appended, but its preview could not be stored; not answered",
				"mediator", mediator, "index", receipt.Index, "approval", id.String(), "error", err)
			if s.cluster {
				w.Header().Set("Retry-After", "1")
			}
			s.refuse(w, http.StatusServiceUnavailable, "unavailable",
				"the decision was appended (index %d, approval %s), but its preview could not be stored: retry with the same Idempotency-Key, which stores it", receipt.Index, id)
			return
		}
		answer = append(answer, approval...)
	}
	var proofPart []byte
	if in.wait {
		// The entry is durable; wait (bounded by the request's context)
		// for a signed checkpoint that covers it, and prove inclusion.
		signed, size, err := s.l.WaitCheckpoint(r.Context(), receipt.Index+1)
		var hashes [][]byte
		if err == nil {
			hashes, err = s.l.InclusionProof(r.Context(), receipt.Index, size)
		}
		if s.storeDamaged(r.Context(), err) {
			s.refuse(w, http.StatusInternalServerError, "internal", "the entry %d is durable, but its inclusion proof could not be read: the store is damaged", receipt.Index)
			return
		}
		if err != nil {
			s.refuse(w, http.StatusServiceUnavailable, "no_checkpoint", "the entry %d is durable, but no checkpoint covered it in time", receipt.Index)
			return
		}
		proofPart, _ = json.Marshal(map[string]any{"checkpoint": string(signed), "tree_size": size, "hashes": hashes})
	}
	rc.SetWriteDeadline(time.Now().Add(s.writeTimeout))
	w.Header().Set("Content-Type", "application/json")
	if receipt.Replayed {
		// The key named an entry appended before: its receipt, nothing new.
		w.Header().Set("Idempotent-Replayed", "true")
		w.WriteHeader(http.StatusOK)
	} else {
		w.WriteHeader(http.StatusCreated)
	}
	answer = appendReceipt(answer, receipt, proofPart)
	*buf = answer
	w.Write(answer)
}

// appendReceipt appends to b, the answer to an append up to its receipt
// (its opening brace, then any head's members, which end in a comma), the
// receipt and, if any, the inclusion proof, and closes the JSON object
// with a newline. Written with one Write, it is sent with a
// Content-Length when it fits net/http's buffer.
func appendReceipt(b []byte, receipt ledger.Receipt, proof []byte) []byte {
	b = append(b, `"index":`...)
	b = strconv.AppendUint(b, receipt.Index, 10)
	b = append(b, `,"leaf_hash":"`...)
	b = hex.AppendEncode(b, receipt.LeafHash[:])
	b = append(b, `","entry":`...)
	b = append(b, receipt.Entry...)
	if proof != nil {
		b = append(b, `,"inclusion":`...)
		b = append(b, proof...)
	}
	return append(b, "}\n"...)
}

// appendFailed logs an append the ledger could not take. After a storage
// failure the ledger refuses every append the same way; the failure is
// logged once (the ledger has logged its cause), and the refusals are
// only counted, as ledgerd_rejects_total{code="unavailable"}.
func (s *Server) appendFailed(r *http.Request, mediator string, err error) {
	if s.l.Failure() != nil {
		if s.failureLogged.CompareAndSwap(false, true) {
			s.log.ErrorContext(r.Context(), "appends refused after a storage failure; further refusals are counted, not logged", "error", err)
		}
		return
	}
	s.log.ErrorContext(r.Context(), "append failed", "mediator", mediator, "error", err)
}

// bodyBuffers hold append bodies while they are decoded, and answers
// while they are written; buffers grown past maxPooledBody are dropped
// rather than kept (putBuffer).
var bodyBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

const maxPooledBody = 64 << 10

// putBuffer returns buf to bodyBuffers, unless it grew past maxPooledBody.
func putBuffer(buf *[]byte) {
	if cap(*buf) <= maxPooledBody {
		bodyBuffers.Put(buf)
	}
}

// readBody appends everything r yields to b.
func readBody(r io.Reader, b []byte) ([]byte, error) {
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

// decodeAppendRequest decodes an append body in the commitment's strict
// domain (package commit): one JSON object, no repeated member names,
// well-formed UTF-8 in NFC, integers within 2^53-1. It returns what was
// wrong, naming the fields of appendFields, positions and byte offsets,
// but never a value nor a member name the client chose.
func decodeAppendRequest(body []byte) (appendRequest, string) {
	return decodeRequest(body, appendFields)
}

// decodeRequest decodes a request body whose members are fields, a subset
// of appendFields, as decodeAppendRequest does. A member of appendFields
// that is not one of fields (decision in a decide request) is refused by
// its name, which is the server's.
func decodeRequest(body []byte, fields []string) (appendRequest, string) {
	var req appendRequest
	obj, err := commit.Domain{}.Object(body)
	if err != nil {
		return req, domainProblem(err, fields)
	}
	// Names are unique, so every member is one of fields when as many of
	// fields are members: checked without taking each name out of the
	// object (a string each). Otherwise the loop finds which is not.
	known := 0
	for _, f := range fields {
		if _, ok := obj.Get(f); ok {
			known++
		}
	}
	for i := 0; known != obj.Len() && i < obj.Len(); i++ {
		name := obj.Name(i)
		if !slices.Contains(fields, name) {
			if slices.Contains(appendFields, name) {
				return req, fmt.Sprintf("member %q is refused: the ledger decides, and records its own decision and determining policies", name)
			}
			return req, fmt.Sprintf("unknown member at index %d of the top-level object", memberIndex(body, name))
		}
	}
	// Only the names of fields are ever set here.
	wrongType := ""
	text := func(name string) string {
		v, ok := obj.Get(name)
		if !ok {
			return ""
		}
		t, ok := v.Text()
		if !ok && wrongType == "" {
			wrongType = name
		}
		return t
	}
	req.Principal, req.Action, req.Decision = text("principal"), text("action"), text("decision")
	req.ParamsDigest, req.TiersDigest = text("params_digest"), text("tiers_digest")
	if v, ok := obj.Get("policies"); ok {
		if req.Policies, ok = v.TextList(); !ok && wrongType == "" {
			wrongType = "policies"
		}
	}
	if v, ok := obj.Get("params_size"); ok {
		n, ok := v.Integer()
		if !ok && wrongType == "" {
			wrongType = "params_size"
		}
		req.ParamsSize = int(n)
	}
	if v, ok := obj.Get("attributes"); ok {
		req.Attributes, req.attributes, req.hasAttributes = v.Canonical(), v, true
	}
	if v, ok := obj.Get("preview"); ok {
		req.Preview = v.Canonical()
	}
	if wrongType != "" {
		return req, fmt.Sprintf("field %q has the wrong type", wrongType)
	}
	return req, ""
}

// domainProblem describes a refusal of the strict domain as its kind, the
// field of fields it lies in, and its byte offset. The JSON pointer
// it carries is not repeated: below the top level, and at a top-level
// member that is not a field, its tokens are the client's member names.
func domainProblem(err error, fields []string) string {
	var de *commit.DomainError
	if !errors.As(err, &de) {
		return "the body is not in the strict JSON domain"
	}
	var b strings.Builder
	b.WriteString(string(de.Kind))
	if de.Key {
		b.WriteString(" in a member name")
	}
	switch field, below, _ := strings.Cut(strings.TrimPrefix(de.Pointer, "/"), "/"); {
	case de.Pointer == "":
		b.WriteString(" at the top level")
	case !slices.Contains(fields, field):
		b.WriteString(" in a member that is not a field")
	case below == "" && !de.Key:
		b.WriteString(" at /" + field)
	default:
		b.WriteString(" inside /" + field)
	}
	if de.Offset >= 0 {
		fmt.Fprintf(&b, " (byte %d)", de.Offset)
	}
	return b.String()
}

// memberIndex returns the position (from 0) in body, a JSON object in the
// strict domain, of its top-level member named name, or -1.
func memberIndex(body []byte, name string) int { return commit.MemberPosition(body, nil, name) }

func (s *Server) getEntry(w http.ResponseWriter, r *http.Request) {
	index, ok := parseIndex(w, r.PathValue("index"), "the index")
	if !ok {
		return
	}
	b, err := s.l.Entry(r.Context(), index)
	if s.damaged(w, r, err, "the entry") {
		return
	}
	if errors.Is(err, ledger.ErrNotFound) {
		WriteError(w, http.StatusNotFound, "not_found", "no entry at this index")
		return
	} else if err != nil {
		WriteError(w, http.StatusInternalServerError, "internal", "the entry could not be read")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}

func (s *Server) export(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	start, ok := parseIndex(w, q.Get("start"), "start")
	if !ok {
		return
	}
	end, ok := parseIndex(w, q.Get("end"), "end")
	if !ok {
		return
	}
	var opts ledger.ExportOptions
	if from := q.Get("consistency_from"); from != "" {
		if opts.ConsistencyFrom, ok = parseIndex(w, from, "consistency_from"); !ok {
			return
		}
	}
	size, given, ok := s.treeSize(w, r)
	if !ok {
		return
	}
	if size == 0 {
		if given {
			WriteError(w, http.StatusNotFound, "no_checkpoint", "the checkpoint of tree_size is for the empty log: there is nothing to export")
		} else {
			WriteError(w, http.StatusNotFound, "no_checkpoint", "the latest checkpoint is for the empty log: there is nothing to export")
		}
		return
	}
	switch {
	case start > end:
		WriteError(w, http.StatusBadRequest, "out_of_range", "start must not exceed end")
		return
	case end > size:
		WriteError(w, http.StatusBadRequest, "out_of_range", "end must not exceed %s", sizeBound(size, given))
		return
	case opts.ConsistencyFrom > size:
		WriteError(w, http.StatusBadRequest, "out_of_range", "consistency_from must not exceed %s", sizeBound(size, given))
		return
	}
	opts.Size = size
	opts.Cosignatures = func(size uint64) []byte { lines, _ := s.wit.Cosignatures(r.Context(), size); return lines }
	// The bundles of the policy sets the range's ledger decisions and
	// publications name, from the archive, so that the file alone
	// replays its decisions.
	opts.PolicySet = func(_ context.Context, d commit.Digest) ([]byte, error) { return s.pol.Bundle(d) }
	w.Header().Set("Content-Type", "application/octet-stream")
	body := progressWriter{w, http.NewResponseController(w), s.writeTimeout}
	if err := s.l.Export(r.Context(), body, start, end, opts); err != nil {
		// Headers are sent: the truncated file fails verification.
		s.storeDamaged(r.Context(), err)
		s.log.ErrorContext(r.Context(), "export failed", "start", start, "end", end, "error", err)
	}
}
