// The mediators' side of approvals (docs/api.md "Approvals"):
//
//	GET  /v1/approvals/{id}          an approval's state
//	POST /v1/approvals/{id}/consume  spend an approved approval, once
//	POST /v1/approvals/{id}/outcome  report the effect of a consumption
//
// and what the mediators' decide and append requests gain when approvals
// are on: the preview member (readPreview, kept by appendAndAnswer) and
// the approval member of a needs_approval answer (approvalHead). Also the
// approval_config publication at start and the preview sweep. The
// lifecycle's rules are the ledger's (ledger/approval.go): these handlers
// append records and answer its refusals.

package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/decisionledger/ledger/approval/preview"
	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/server/approvals"
)

// approvalRoutes are the mediators' approval endpoints. They are served
// whatever the config: without approvals they answer 404 approvals_off.
// The outcome of an allowed act (outcomes.go), documented next to an
// approval's, follows them; it needs no approvals.
func (s *Server) approvalRoutes() []route {
	return []route{
		{"GET /v1/approvals/{id}", s.readAuth(s.getApproval)},
		{"POST /v1/approvals/{id}/consume", s.mediatorAuth(s.consumeApproval)},
		{"POST /v1/approvals/{id}/outcome", s.mediatorAuth(s.approvalOutcome)},
		{"POST /v1/entries/{index}/outcome", s.mediatorAuth(s.decisionOutcome)},
	}
}

// readPreview checks and renders the preview member of a decide or
// append request (preview.Render: redacted, then bounded). It answers a
// refusal itself, and then returns false: 422 approvals_off when
// approvals are off, 400 invalid_request for an append whose decision
// is not needs_approval or a preview that does not render. A refusal
// names the member and the rule, never a value nor a member name.
func (s *Server) readPreview(w http.ResponseWriter, req appendRequest, fields []string) (*preview.Preview, bool) {
	if s.appr == nil {
		s.refuse(w, http.StatusUnprocessableEntity, "approvals_off", "preview: this ledger's config has no approvals member, so no request opens an approval")
		return nil, false
	}
	if slices.Contains(fields, "decision") && entry.Decision(req.Decision) != entry.NeedsApproval {
		s.refuse(w, http.StatusBadRequest, "invalid_request", "preview: only a needs_approval decision carries one")
		return nil, false
	}
	p, err := preview.Render(req.Preview)
	if err != nil {
		// Not expected: the body's strict decoding admitted the preview
		// under the same domain and tighter bounds. Kept as a second
		// line, never naming a value.
		var ie *preview.InputError
		problem := "it could not be rendered"
		if errors.As(err, &ie) {
			where := ""
			if ie.Key {
				where = " in a member name"
			}
			problem = fmt.Sprintf("%s%s (byte %d of the preview)", ie.Kind, where, ie.Offset)
		}
		s.refuse(w, http.StatusBadRequest, "invalid_request", "preview: %s", problem)
		return nil, false
	}
	return &p, true
}

// approvalRef is the approval member of a needs_approval answer.
type approvalRef struct {
	ID              string `json:"id"`
	PendingDeadline string `json:"pending_deadline"`
	PreviewDigest   string `json:"preview_digest"`
}

// approvalHead is the approval member, then a comma, of the answer to
// the append of rec, whose receipt is receipt: empty unless the recorded
// entry (the first one, on a replay) is a needs_approval decision that
// opened an approval. A preview staged for it (*staged) is kept under the
// approval's id while the approval awaits a verdict (on a replay, if the
// first request left none), and *staged is then emptied; once a verdict
// is recorded the preview an approver saw stays as it is. err says the
// preview could not be kept or read: the answer, which would announce a
// digest that may not be the preview's, is not given.
func (s *Server) approvalHead(ctx context.Context, rec ledger.Record, receipt ledger.Receipt, staged **approvals.Staged) (head []byte, id commit.Digest, err error) {
	if !receipt.Replayed && rec.Decision != entry.NeedsApproval {
		return nil, id, nil // parsing every new entry would cost appends dear
	}
	e, err := entry.Parse(receipt.Entry)
	if err != nil || e.Decision != entry.NeedsApproval || (e.Kind != "" && e.Kind != entry.KindDecision) {
		return nil, id, nil
	}
	if id, err = e.Hash(); err != nil {
		return nil, id, nil
	}
	st, ok := s.l.Approval(id)
	if !ok {
		return nil, id, nil // no approval_config preceded the request
	}
	if *staged != nil && st.Verdict == "" {
		err := s.appr.Previews.Commit(ctx, *staged, id)
		*staged = nil // commit kept it, or dropped it
		if err != nil {
			return nil, id, fmt.Errorf("keeping the preview: %w", err)
		}
	}
	stored, ok, err := s.appr.Previews.Get(ctx, id)
	if err != nil {
		return nil, id, fmt.Errorf("reading the preview back: %w", err)
	}
	kept, err := approvals.DecodeKept(stored)
	if err != nil {
		return nil, id, fmt.Errorf("reading the preview back: %w", err)
	}
	digest := preview.Digest(kept.JSON)
	if !ok {
		p, err := approvals.DefaultPreview(e)
		if err != nil {
			s.log.ErrorContext(ctx, "rendering a default preview failed", "approval", id.String(), "error", err)
			return nil, id, nil
		}
		digest = p.Digest
	}
	b, _ := json.Marshal(struct {
		Approval approvalRef `json:"approval"`
	}{approvalRef{ID: id.String(), PendingDeadline: approvals.FormatTime(st.PendingDeadline), PreviewDigest: digest.String()}})
	return append(b[1:len(b)-1], ','), id, nil
}

// approvalOfPath reads the approval id of the request's path. It answers
// a refusal itself, and then returns false: 404 approvals_off when
// approvals are off, 400 invalid_request for an id that is not a digest.
func (s *Server) approvalOfPath(w http.ResponseWriter, r *http.Request) (commit.Digest, bool) {
	if s.appr == nil {
		s.refuse(w, http.StatusNotFound, "approvals_off", "this ledger's config has no approvals member: it keeps no approvals")
		return commit.Digest{}, false
	}
	id, err := commit.ParseDigest(r.PathValue("id"))
	if err != nil {
		s.refuse(w, http.StatusBadRequest, "invalid_request", "the approval id is not sha256: and 64 lower-case hex digits")
		return commit.Digest{}, false
	}
	if id == (commit.Digest{}) {
		// No entry hashes to zeros; an entry may not name them either.
		s.refuse(w, http.StatusNotFound, "approval_not_found", "no approval has this id")
		return commit.Digest{}, false
	}
	return id, true
}

// getApproval answers GET /v1/approvals/{id}.
func (s *Server) getApproval(w http.ResponseWriter, r *http.Request) {
	id, ok := s.approvalOfPath(w, r)
	if !ok {
		return
	}
	st, ok, err := s.l.ReadApproval(r.Context(), id)
	if err != nil {
		s.log.ErrorContext(r.Context(), "reading a closed approval's entries failed", "approval", id.String(), "error", err)
		s.storeDamaged(r.Context(), err)
		s.refuse(w, http.StatusInternalServerError, "internal", "the approval's entries could not be read")
		return
	}
	if !ok {
		s.refuse(w, http.StatusNotFound, "approval_not_found", "no approval has this id")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(approvals.NewStatusView(st, s.appr.Now()))
}

// consumeFields and outcomeFields are the members of a consume and an
// outcome body; consume needs every one, outcome all but operation_id.
var (
	consumeFields  = []string{"action", "params_digest", "params_size", "principal"}
	outcomeFields  = []string{"consumption", "operation_id", "result"}
	outcomeNeeded  = []string{"consumption", "result"}
	outcomeResults = []entry.Result{entry.Succeeded, entry.Failed, entry.Unknown}
)

// readMembers reads the body of a mediator's consume or outcome request
// (the rate, bound and timeout of an append; readMediatorBody) as a JSON
// object in the strict domain whose members are among fields and include
// needed. It answers a refusal itself, naming fields and positions, never
// a value nor a member name the client chose, and then returns false.
func (s *Server) readMembers(w http.ResponseWriter, r *http.Request, mediator string, fields, needed []string, what string) (commit.Object, bool) {
	pooled, release, ok := s.readMediatorBody(w, r, mediator)
	if !ok {
		return commit.Object{}, false
	}
	// obj's names and texts alias the body it is read from, and the
	// pooled buffer goes back to the pool now: obj reads a copy.
	body := bytes.Clone(pooled)
	release()
	obj, err := commit.Domain{}.Object(body)
	problem := ""
	if err != nil {
		problem = domainProblem(err, fields)
	} else {
		for i := range obj.Len() {
			if name := obj.Name(i); !slices.Contains(fields, name) {
				problem = fmt.Sprintf("unknown member at index %d of the top-level object", memberIndex(body, name))
				break
			}
		}
		for _, name := range needed {
			if _, ok := obj.Get(name); !ok && problem == "" {
				problem = fmt.Sprintf("member %q is missing", name)
			}
		}
	}
	if problem != "" {
		s.refuse(w, http.StatusBadRequest, "invalid_request", "the body is not %s request: %s", what, problem)
		return commit.Object{}, false
	}
	return obj, true
}

// textMember and integerMember read a member that readMembers admitted;
// ok is false if it has the wrong type.
func textMember(obj commit.Object, name string) (string, bool) {
	v, ok := obj.Get(name)
	if !ok {
		return "", true
	}
	return v.Text()
}

func integerMember(obj commit.Object, name string) (int64, bool) {
	v, ok := obj.Get(name)
	if !ok {
		return 0, false
	}
	return v.Integer()
}

// consumeApproval answers POST /v1/approvals/{id}/consume for mediator:
// a consumption entry with the request's terms as the mediator gives
// them, which the ledger appends only if the approval is approved, not
// consumed, before its execution deadline, and the terms are the
// request's (ledger/approval.go). The approval's preview is then removed.
func (s *Server) consumeApproval(w http.ResponseWriter, r *http.Request, mediator string) {
	start := time.Now()
	id, ok := s.approvalOfPath(w, r)
	if !ok {
		return
	}
	obj, ok := s.readMembers(w, r, mediator, consumeFields, consumeFields, "a consume")
	if !ok {
		return
	}
	rec := ledger.Record{Kind: entry.KindConsumption, ApprovalID: id, Mediator: mediator, IdempotencyKey: r.Header.Get("Idempotency-Key")}
	action, okAction := textMember(obj, "action")
	digest, okDigest := textMember(obj, "params_digest")
	size, okSize := integerMember(obj, "params_size")
	principal, okPrincipal := textMember(obj, "principal")
	for _, c := range []struct {
		ok   bool
		name string
	}{{okAction, "action"}, {okDigest, "params_digest"}, {okSize, "params_size"}, {okPrincipal, "principal"}} {
		if !c.ok {
			s.refuse(w, http.StatusBadRequest, "invalid_request", "the body is not a consume request: field %q has the wrong type", c.name)
			return
		}
	}
	rec.Action, rec.Principal = action, principal
	var err error
	if rec.Params.Digest, rec.Params.Hiding, err = commit.ParseParamsDigest(digest); err != nil {
		s.refuse(w, http.StatusBadRequest, "invalid_request", "params_digest: %v", err)
		return
	}
	rec.Params.Size = int(size)
	s.appendAndAnswer(w, r, mediator, intake{rec: rec}, start, func(answer []byte, _ ledger.Receipt) ([]byte, bool) {
		// Spent: no approver needs the preview any more.
		if err := s.appr.Previews.Remove(r.Context(), id); err != nil {
			s.log.ErrorContext(r.Context(), "removing a consumed approval's preview failed; the sweep will", "approval", id.String(), "error", err)
		}
		return answer, true
	})
}

// approvalOutcome answers POST /v1/approvals/{id}/outcome for mediator:
// an outcome entry reporting the effect of the consumption at the given
// index, which the ledger appends only if that consumption spent this
// approval, was made by this mediator, and has no final outcome yet.
func (s *Server) approvalOutcome(w http.ResponseWriter, r *http.Request, mediator string) {
	start := time.Now()
	id, ok := s.approvalOfPath(w, r)
	if !ok {
		return
	}
	obj, ok := s.readMembers(w, r, mediator, outcomeFields, outcomeNeeded, "an outcome")
	if !ok {
		return
	}
	consumption, okConsumption := integerMember(obj, "consumption")
	result, okResult := textMember(obj, "result")
	operation, okOperation := textMember(obj, "operation_id")
	switch {
	case !okConsumption:
		s.refuse(w, http.StatusBadRequest, "invalid_request", "the body is not an outcome request: field \"consumption\" has the wrong type")
		return
	case !okResult:
		s.refuse(w, http.StatusBadRequest, "invalid_request", "the body is not an outcome request: field \"result\" has the wrong type")
		return
	case !okOperation:
		s.refuse(w, http.StatusBadRequest, "invalid_request", "the body is not an outcome request: field \"operation_id\" has the wrong type")
		return
	case consumption < 0:
		s.refuse(w, http.StatusBadRequest, "invalid_request", "consumption: an entry index, at least 0")
		return
	case !slices.Contains(outcomeResults, entry.Result(result)):
		s.refuse(w, http.StatusBadRequest, "invalid_request", "result: one of succeeded, failed, unknown")
		return
	}
	if _, ok := obj.Get("operation_id"); ok && operation == "" {
		s.refuse(w, http.StatusBadRequest, "invalid_request", "operation_id: an identifier, not empty (or leave the member out)")
		return
	}
	rec := ledger.Record{
		Kind: entry.KindOutcome, ApprovalID: id, Consumption: uint64(consumption), Mediator: mediator,
		Result: entry.Result(result), OperationID: operation, IdempotencyKey: r.Header.Get("Idempotency-Key"),
	}
	s.appendAndAnswer(w, r, mediator, intake{rec: rec}, start, nil)
}

// lifecycleRefusal answers a refusal of the approval lifecycle: an error
// body that also names, as term, the member that differs (action,
// principal, mediator, approval, params_digest, params_size) when there
// is one. Never a value.
type lifecycleRefusal struct {
	s    *Server
	term string
}

func (f lifecycleRefusal) refuse(w http.ResponseWriter, status int, code, format string, args ...any) {
	f.s.m.Reject(code)
	http.NewResponseController(w).SetWriteDeadline(time.Now().Add(f.s.writeTimeout))
	type body struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Term    string `json:"term,omitempty"`
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]body{"error": {Code: code, Message: fmt.Sprintf(format, args...), Term: f.term}})
}

// refuseLifecycle answers err, an *ledger.ApprovalError: 404 when the
// approval, consumption or allow decision named is unknown, 409 for every
// other rule (docs/approvals.md §Lifecycle, docs/entry.md "Outcomes of
// allowed acts").
func (s *Server) refuseLifecycle(w http.ResponseWriter, err error) {
	var ae *ledger.ApprovalError
	if !errors.As(err, &ae) {
		s.refuse(w, http.StatusInternalServerError, "internal", "the approval could not be checked")
		return
	}
	f := lifecycleRefusal{s, ae.Term}
	switch ae.Code {
	case ledger.CodeNotFound:
		f.refuse(w, http.StatusNotFound, "approval_not_found", "no approval has this id (the entry hash of a needs_approval request)")
	case ledger.CodeNoConsumption:
		f.refuse(w, http.StatusNotFound, "consumption_not_found", "consumption: the entry at this index is not a consumption")
	case ledger.CodePending:
		f.refuse(w, http.StatusConflict, "approval_pending", "the approval awaits a verdict")
	case ledger.CodeExpired:
		f.refuse(w, http.StatusConflict, "approval_expired", "the approval's deadline has passed (a deadline is passed at equality)")
	case ledger.CodeDenied:
		f.refuse(w, http.StatusConflict, "approval_denied", "the approval was denied")
	case ledger.CodeConsumed:
		f.refuse(w, http.StatusConflict, "approval_consumed", "the approval was consumed already (a retry with the first Idempotency-Key gets the first receipt)")
	case ledger.CodeMismatch:
		f.refuse(w, http.StatusConflict, "approval_mismatch", "%s: not what the ledger recorded for this approval (its request's, or its consumption's for an outcome)", ae.Term)
	case ledger.CodeDigestMismatch:
		f.refuse(w, http.StatusConflict, "approval_digest_mismatch", "%s: not the approved request's", ae.Term)
	case ledger.CodeDecided:
		f.refuse(w, http.StatusConflict, "approval_decided", "the approval has a verdict already")
	case ledger.CodeSelf:
		f.refuse(w, http.StatusConflict, "approval_self", "an approver never decides a request whose principal is themselves")
	case ledger.CodeOutcomeFinal:
		f.refuse(w, http.StatusConflict, "outcome_final", "the act has a final outcome already (succeeded or failed): of the consumption, or of the allow decision")
	case ledger.CodeNoDecision:
		f.refuse(w, http.StatusNotFound, "decision_not_found", "the entry at this index is not an allow decision")
	case ledger.CodeOutcomeMismatch:
		f.refuse(w, http.StatusConflict, "outcome_mismatch", "%s: not the decision's", ae.Term)
	default:
		s.refuse(w, http.StatusInternalServerError, "internal", "the approval could not be checked")
	}
}

// SweepPreviewsEvery removes the previews no approver needs any more at
// once, then every interval, until ctx ends (approvals.State.SweepEvery).
func (s *Server) SweepPreviewsEvery(ctx context.Context, interval time.Duration) {
	if s.appr != nil {
		s.appr.SweepEvery(ctx, s.l, interval, s.log)
	}
}
