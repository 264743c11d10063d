package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/ledger"
)

// server is ledgerd's HTTP API (docs/api.md).
type server struct {
	cfg *Config
	l   *ledger.Ledger
	log *slog.Logger
	m   *metrics // nil: routes makes one
	rl  *limiter
	cat catalog // nil: no catalog

	bodyTimeout, writeTimeout time.Duration // from cfg, set by routes
	// failureLogged is set once a refusal after a storage failure was
	// logged: the later ones are only counted.
	failureLogged atomic.Bool
}

func (s *server) routes() http.Handler {
	if s.m == nil {
		s.m = newMetrics()
	}
	s.m.treeSize, s.m.checkpointTime = s.l.Size, s.l.CheckpointTime
	s.rl = newLimiter(s.cfg)
	// The config was checked at load; a test's change to it that does
	// not parse gets the default.
	var err error
	if s.bodyTimeout, err = s.cfg.bodyTimeout(); err != nil {
		s.bodyTimeout = defaultBodyTimeout
	}
	if s.writeTimeout, err = s.cfg.writeTimeout(); err != nil {
		s.writeTimeout = defaultWriteTimeout
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", s.m)
	mux.HandleFunc("POST /v1/entries", s.appendEntry)
	read := func(pattern string, h http.HandlerFunc) { mux.Handle(pattern, s.readAuth(h)) }
	read("GET /v1/checkpoint", s.checkpoint)
	read("GET /v1/entries/{index}", s.getEntry)
	read("GET /v1/export", s.export)
	read("GET /v1/proofs/{index}", s.tlogProof)
	read("GET /v1/inclusion", s.inclusion)
	read("GET /v1/consistency", s.consistency)
	read("GET /v1/actions", s.actions)
	read("GET /v1/actions/{action}", s.action)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /readyz", s.ready)
	prefix := strings.TrimSuffix(s.cfg.TilesPrefix, "/")
	read("GET "+prefix+"/checkpoint", s.checkpoint)
	read("GET "+prefix+"/tile/{path...}", s.tile)
	return s.bodyDeadline(mux)
}

// bodyDeadline gives every request that has a body BodyTimeout to send
// it. Without a deadline, a client that sends a header and part of a body
// holds its connection for ever: even when the handler never reads the
// body, net/http reads (up to 256 KiB of) it after the handler, to reuse
// the connection. Requests without a body get no read deadline here: it
// would cancel their context while they run (net/http's background read).
func (s *server) bodyDeadline(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength != 0 { // -1: chunked, length unknown
			http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.bodyTimeout))
		}
		h.ServeHTTP(w, r)
	})
}

// bearerToken returns the token of an Authorization header value in the
// Bearer scheme (RFC 6750 §2.1): the scheme's name, matched without
// regard to case (RFC 9110 §11.1), one or more spaces, and the token. A
// header without the scheme, or with an empty token, yields false.
func bearerToken(authorization string) (string, bool) {
	const scheme = "bearer "
	if len(authorization) < len(scheme) || !strings.EqualFold(authorization[:len(scheme)], scheme) {
		return "", false
	}
	token := strings.TrimLeft(authorization[len(scheme):], " ")
	return token, token != ""
}

// readAuth guards a read endpoint when the config protects reads.
func (s *server) readAuth(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(s.cfg.ReaderTokensSHA256) > 0 {
			token, ok := bearerToken(r.Header.Get("Authorization"))
			if !ok || !s.cfg.mayRead(token) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="ledgerd"`)
				writeError(w, http.StatusUnauthorized, "unauthenticated", "reads need a reader or mediator token")
				return
			}
		}
		h(w, r)
	})
}

// apiError is the JSON body of every error response. Messages name fields
// and rules, never submitted values.
type apiError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func writeError(w http.ResponseWriter, status int, code, format string, args ...any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]apiError{"error": {Code: code, Message: fmt.Sprintf(format, args...)}})
}

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
}

// appendFields are the members an append body may have.
var appendFields = []string{"action", "attributes", "decision", "params_digest", "params_size", "policies", "principal", "tiers_digest"}

// refusedBodyGrace is how long net/http may go on reading the body of an
// append refused before its body was read, before the connection is
// closed: long enough for a client that sent its whole body to have it
// drained (so that it reads the answer rather than a reset), too short
// for a client that sends nothing more to hold the connection.
const refusedBodyGrace = 500 * time.Millisecond

func (s *server) appendEntry(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rc := http.NewResponseController(w)
	token, ok := bearerToken(r.Header.Get("Authorization"))
	mediator, known := "", false
	if ok {
		mediator, known = s.cfg.authenticate(token)
	}
	if !known {
		// The body is not read, and the connection not kept: a client
		// without a credential gets nothing but this answer.
		rc.SetReadDeadline(start.Add(refusedBodyGrace))
		w.Header().Set("Connection", "close")
		w.Header().Set("WWW-Authenticate", `Bearer realm="ledgerd"`)
		s.refuse(w, http.StatusUnauthorized, "unauthenticated", "a mediator bearer token is required")
		return
	}
	if ok, wait := s.rl.allow(mediator, time.Now()); !ok {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
		s.refuse(w, http.StatusTooManyRequests, "rate_limited", "the mediator's append rate is exceeded; retry later")
		return
	}
	buf := bodyBuffers.Get().(*[]byte)
	defer func() {
		if cap(*buf) <= maxPooledBody {
			bodyBuffers.Put(buf)
		}
	}()
	body, err := readBody(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes), (*buf)[:0])
	*buf = body
	if err != nil {
		var tooLarge *http.MaxBytesError
		switch {
		case errors.As(err, &tooLarge):
			s.refuse(w, http.StatusRequestEntityTooLarge, "too_large", "the body exceeds %d bytes", s.cfg.MaxBodyBytes)
		case errors.Is(err, os.ErrDeadlineExceeded):
			w.Header().Set("Connection", "close")
			s.refuse(w, http.StatusRequestTimeout, "body_timeout", "the body did not arrive within %v", s.bodyTimeout)
		default:
			s.refuse(w, http.StatusBadRequest, "unreadable", "the body could not be read")
		}
		return
	}
	// The body is in. Its read deadline must go: left, it would cancel
	// the request's context while the append waits for the ledger
	// (net/http's background read). The answer gets WriteTimeout from
	// when it is ready (refuse, and below).
	rc.SetReadDeadline(time.Time{})
	req, problem := decodeAppendRequest(body)
	if problem != "" {
		s.refuse(w, http.StatusBadRequest, "invalid_request", "the body is not an append request: %s", problem)
		return
	}
	rec := ledger.Record{
		Mediator: mediator, Principal: req.Principal, Action: req.Action,
		Decision: entry.Decision(req.Decision), Policies: req.Policies,
		Attributes:     req.Attributes,
		IdempotencyKey: r.Header.Get("Idempotency-Key"),
	}
	if rec.Params.Digest, err = commit.ParseDigest(req.ParamsDigest); err != nil {
		s.refuse(w, http.StatusBadRequest, "invalid_request", "params_digest: %v", err)
		return
	}
	rec.Params.Size = req.ParamsSize
	if rec.Tiers, err = commit.ParseDigest(req.TiersDigest); err != nil {
		s.refuse(w, http.StatusBadRequest, "invalid_request", "tiers_digest: %v", err)
		return
	}
	if s.cat != nil {
		a, declared := s.cat[req.Action]
		if !declared {
			s.refuse(w, http.StatusUnprocessableEntity, "unknown_action", "the action is not in the server's catalog")
			return
		}
		if problem, ok := a.checkAttributes(req.Attributes); !ok {
			s.refuse(w, http.StatusUnprocessableEntity, "attributes_not_declared", "attributes of %s: %s", req.Action, problem)
			return
		}
		if !rec.Tiers.Equal(a.tiers) {
			s.refuse(w, http.StatusUnprocessableEntity, "tiers_mismatch",
				"tiers_digest is not the applied-tiers digest of the server's declaration of %s (%s)", req.Action, a.tiers)
			return
		}
		// The definition is the server's, never the client's.
		rec.Definition = a.definition
	}
	receipt, err := s.l.Append(r.Context(), rec)
	switch {
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
		s.refuse(w, http.StatusServiceUnavailable, "unavailable", "the request ended before the append was answered; the entry may have been appended: retry with the same Idempotency-Key to learn its receipt")
		return
	case err != nil:
		s.appendFailed(r, mediator, err)
		s.refuse(w, http.StatusServiceUnavailable, "unavailable", "the entry was not appended")
		return
	}
	s.m.observeAppend(time.Since(start), receipt.Replayed)
	var proofPart []byte
	if r.URL.Query().Get("wait") == "checkpoint" {
		// The entry is durable; wait (bounded by the request's context)
		// for a signed checkpoint that covers it, and prove inclusion.
		signed, size, err := s.l.WaitCheckpoint(r.Context(), receipt.Index+1)
		var hashes [][]byte
		if err == nil {
			hashes, err = s.l.InclusionProof(r.Context(), receipt.Index, size)
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
	if proofPart != nil {
		fmt.Fprintf(w, `{"index":%d,"leaf_hash":"%x","entry":%s,"inclusion":%s}`+"\n", receipt.Index, receipt.LeafHash, receipt.Entry, proofPart)
		return
	}
	fmt.Fprintf(w, `{"index":%d,"leaf_hash":"%x","entry":%s}`+"\n", receipt.Index, receipt.LeafHash, receipt.Entry)
}

// appendFailed logs an append the ledger could not take. After a storage
// failure the ledger refuses every append the same way; the failure is
// logged once (the ledger has logged its cause), and the refusals are
// only counted, as ledgerd_rejects_total{code="unavailable"}.
func (s *server) appendFailed(r *http.Request, mediator string, err error) {
	if s.l.Failure() != nil {
		if s.failureLogged.CompareAndSwap(false, true) {
			s.log.ErrorContext(r.Context(), "appends refused after a storage failure; further refusals are counted, not logged", "error", err)
		}
		return
	}
	s.log.ErrorContext(r.Context(), "append failed", "mediator", mediator, "error", err)
}

// refuse answers an append with an error and counts it by code. The
// client has WriteTimeout from now to take the answer.
func (s *server) refuse(w http.ResponseWriter, status int, code, format string, args ...any) {
	s.m.reject(code)
	http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.writeTimeout))
	writeError(w, status, code, format, args...)
}

// bodyBuffers hold append bodies while they are decoded; buffers grown
// past maxPooledBody are dropped rather than kept.
var bodyBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

const maxPooledBody = 64 << 10

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
	var req appendRequest
	obj, err := commit.Domain{}.Object(body)
	if err != nil {
		return req, domainProblem(err)
	}
	for i := range obj.Len() {
		if !slices.Contains(appendFields, obj.Name(i)) {
			return req, fmt.Sprintf("unknown member at index %d of the top-level object", memberIndex(body, obj.Name(i)))
		}
	}
	// Only the names of appendFields are ever set here.
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
		req.Attributes = v.Canonical()
	}
	if wrongType != "" {
		return req, fmt.Sprintf("field %q has the wrong type", wrongType)
	}
	return req, ""
}

// domainProblem describes a refusal of the strict domain as its kind, the
// field of appendFields it lies in, and its byte offset. The JSON pointer
// it carries is not repeated: below the top level, and at a top-level
// member that is not a field, its tokens are the client's member names.
func domainProblem(err error) string {
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
	case !slices.Contains(appendFields, field):
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
func memberIndex(body []byte, name string) int {
	dec := json.NewDecoder(bytes.NewReader(body))
	if _, err := dec.Token(); err != nil { // {
		return -1
	}
	for i := 0; dec.More(); i++ {
		t, err := dec.Token()
		if err != nil {
			return -1
		}
		if t == name {
			return i
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return -1
		}
	}
	return -1
}

func (s *server) checkpoint(w http.ResponseWriter, r *http.Request) {
	cp, size := s.l.Checkpoint()
	if size == 0 {
		writeError(w, http.StatusNotFound, "no_checkpoint", "no checkpoint has been signed yet")
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.Write(cp)
}

func parseIndex(w http.ResponseWriter, text, what string) (uint64, bool) {
	v, err := strconv.ParseUint(text, 10, 64)
	if err != nil || strconv.FormatUint(v, 10) != text {
		writeError(w, http.StatusBadRequest, "invalid_request", "%s is not a decimal integer", what)
		return 0, false
	}
	return v, true
}

func (s *server) getEntry(w http.ResponseWriter, r *http.Request) {
	index, ok := parseIndex(w, r.PathValue("index"), "the index")
	if !ok {
		return
	}
	b, err := s.l.Entry(r.Context(), index)
	if errors.Is(err, ledger.ErrNotFound) {
		writeError(w, http.StatusNotFound, "not_found", "no entry %d", index)
		return
	} else if err != nil {
		writeError(w, http.StatusInternalServerError, "internal", "the entry could not be read")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}

func (s *server) export(w http.ResponseWriter, r *http.Request) {
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
	_, size := s.l.Checkpoint()
	if size == 0 {
		writeError(w, http.StatusNotFound, "no_checkpoint", "no checkpoint has been signed yet")
		return
	}
	if start > end || end > size || opts.ConsistencyFrom > size {
		writeError(w, http.StatusBadRequest, "out_of_range", "need start <= end <= %d (the latest checkpoint's size)", size)
		return
	}
	opts.Size = size
	w.Header().Set("Content-Type", "application/octet-stream")
	body := progressWriter{w, http.NewResponseController(w), s.writeTimeout}
	if err := s.l.Export(r.Context(), body, start, end, opts); err != nil {
		// Headers are sent: the truncated file fails verification.
		s.log.ErrorContext(r.Context(), "export failed", "start", start, "end", end, "error", err)
	}
}

func (s *server) tlogProof(w http.ResponseWriter, r *http.Request) {
	index, ok := parseIndex(w, r.PathValue("index"), "the index")
	if !ok {
		return
	}
	b, err := s.l.TlogProof(r.Context(), index, 0)
	if err != nil {
		writeError(w, http.StatusNotFound, "not_found", "no entry %d under the latest checkpoint", index)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write(b)
}

// ready answers 200 once the ledger accepts appends and 503 after a
// storage failure stopped it.
func (s *server) ready(w http.ResponseWriter, r *http.Request) {
	if err := s.l.Failure(); err != nil {
		writeError(w, http.StatusServiceUnavailable, "unavailable", "appends are stopped after a storage failure")
		return
	}
	fmt.Fprintln(w, "ready")
}

// proofJSON is the body of the proof endpoints: hashes in standard base64.
type proofJSON struct {
	Index    *uint64  `json:"index,omitempty"`
	Size1    *uint64  `json:"size1,omitempty"`
	TreeSize uint64   `json:"tree_size"`
	Hashes   [][]byte `json:"hashes"`
}

func writeProof(w http.ResponseWriter, p proofJSON) {
	if p.Hashes == nil {
		p.Hashes = [][]byte{}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(p)
}

// treeSize reads the size parameter; absent, the latest checkpoint's.
func (s *server) treeSize(w http.ResponseWriter, r *http.Request) (uint64, bool) {
	if text := r.URL.Query().Get("tree_size"); text != "" {
		return parseIndex(w, text, "tree_size")
	}
	_, size := s.l.Checkpoint()
	return size, true
}

// inclusion answers GET /v1/inclusion?index=N or ?leaf_hash=HEX, with
// optional tree_size (default: the latest checkpoint's).
func (s *server) inclusion(w http.ResponseWriter, r *http.Request) {
	size, ok := s.treeSize(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	var index uint64
	var hashes [][]byte
	var err error
	switch {
	case q.Get("leaf_hash") != "":
		raw, herr := hex.DecodeString(q.Get("leaf_hash"))
		if herr != nil || len(raw) != ledger.HashSize {
			writeError(w, http.StatusBadRequest, "invalid_request", "leaf_hash is not 64 hex digits")
			return
		}
		index, hashes, err = s.l.InclusionProofByHash(r.Context(), [ledger.HashSize]byte(raw), size)
	default:
		if index, ok = parseIndex(w, q.Get("index"), "index"); !ok {
			return
		}
		hashes, err = s.l.InclusionProof(r.Context(), index, size)
	}
	if err != nil {
		writeProofError(w, err)
		return
	}
	writeProof(w, proofJSON{Index: &index, TreeSize: size, Hashes: hashes})
}

// consistency answers GET /v1/consistency?size1=M[&tree_size=N].
func (s *server) consistency(w http.ResponseWriter, r *http.Request) {
	size, ok := s.treeSize(w, r)
	if !ok {
		return
	}
	size1, ok := parseIndex(w, r.URL.Query().Get("size1"), "size1")
	if !ok {
		return
	}
	hashes, err := s.l.ConsistencyProof(r.Context(), size1, size)
	if err != nil {
		writeProofError(w, err)
		return
	}
	writeProof(w, proofJSON{Size1: &size1, TreeSize: size, Hashes: hashes})
}

func writeProofError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, ledger.ErrSize):
		writeError(w, http.StatusBadRequest, "out_of_range", "sizes and indices must lie within the latest checkpoint's tree")
	case errors.Is(err, ledger.ErrNotFound):
		writeError(w, http.StatusNotFound, "not_found", "no such entry")
	default:
		writeError(w, http.StatusInternalServerError, "internal", "the proof could not be read")
	}
}

// actions lists the catalog: each action with its applied-tiers and
// action definition digests.
func (s *server) actions(w http.ResponseWriter, r *http.Request) {
	if s.cat == nil {
		writeError(w, http.StatusNotFound, "no_catalog", "this ledger has no action catalog")
		return
	}
	type item struct {
		Action           string `json:"action"`
		TiersDigest      string `json:"tiers_digest"`
		DefinitionDigest string `json:"definition_digest"`
	}
	list := make([]item, 0, len(s.cat))
	for name, a := range s.cat {
		list = append(list, item{name, a.tiers.String(), a.definition.String()})
	}
	slices.SortFunc(list, func(a, b item) int { return strings.Compare(a.Action, b.Action) })
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"actions": list})
}

// action serves one declaration file byte for byte, so that an auditor
// can recompute its digests (ledger-verify tiers).
func (s *server) action(w http.ResponseWriter, r *http.Request) {
	a, ok := s.cat[r.PathValue("action")]
	if !ok {
		writeError(w, http.StatusNotFound, "not_found", "no such action in the catalog")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Ledger-Tiers-Digest", a.tiers.String())
	w.Header().Set("Ledger-Definition-Digest", a.definition.String())
	w.Write(a.file)
}
