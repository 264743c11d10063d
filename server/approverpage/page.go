// Package approverpage is the approver's page (docs/approvals.md "The
// approver's page", docs/api.md "The approver's page"): people sign in with a name and password, see
// the pending approvals they may approve, read one with its preview, and
// approve or deny it after a confirmation. The same endpoints answer JSON
// to a request with Accept: application/json, for curl.
//
// Every request to the page passes its Guard: the page must be on
// (approvals configured), a request with an Authorization header is
// refused (a mediator token can never approve), every POST must come from
// the page's own origin and, but for sign-in, carry the session's CSRF
// token. The page sets a strict Content-Security-Policy and never caches.
// Nothing here logs a password, a session token, a CSRF token or a
// preview's content.

package approverpage

import (
	"bytes"
	"cmp"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/decisionledger/ledger/approval/approver"
	"github.com/decisionledger/ledger/approval/preview"
	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/server/approvals"
)

// Ledger is what the page reads of the log, and appends to it (a
// *ledger.Ledger).
type Ledger interface {
	PendingApprovals(now time.Time) []ledger.ApprovalStatus
	ReadApproval(ctx context.Context, id commit.Digest) (ledger.ApprovalStatus, bool, error)
	Entry(ctx context.Context, index uint64) ([]byte, error)
	ApprovalConfig() (pending, execution time.Duration, ok bool)
	Append(ctx context.Context, rec ledger.Record) (ledger.Receipt, error)
}

// Options are the page's dependencies.
type Options struct {
	// Approvals is the approvals' state: the sessions, the approvers in
	// force, the trusted origins, the clock, the previews. Nil when the
	// config has no approvals member: every route answers 404
	// approvals_off.
	Approvals *approvals.State
	// Ledger is the log whose approvals the page shows and decides.
	Ledger Ledger
	// TLS says the page is served over TLS: the session cookie is then
	// Secure.
	TLS bool
	// Logger is the log; nil: none.
	Logger *slog.Logger
	// Damaged reports whether err says the store is damaged, and counts
	// and logs it as the API does (package server's storeDamaged).
	Damaged func(ctx context.Context, err error) bool
	// WriteError writes the API's JSON error body (server.WriteError).
	WriteError func(w http.ResponseWriter, status int, code, format string, args ...any)
	// RefusedBodyGrace is how long a form refused before it was read may
	// still arrive before its connection is closed (the API's grace for
	// refused bodies).
	RefusedBodyGrace time.Duration
}

// Page is the approver's page.
type Page struct {
	appr             *approvals.State
	l                Ledger
	secure           bool
	log              *slog.Logger
	storeDamaged     func(ctx context.Context, err error) bool
	writeError       func(w http.ResponseWriter, status int, code, format string, args ...any)
	refusedBodyGrace time.Duration
}

// New makes the page of opts.
func New(opts Options) *Page {
	s := &Page{appr: opts.Approvals, l: opts.Ledger, secure: opts.TLS, log: opts.Logger,
		storeDamaged: opts.Damaged, writeError: opts.WriteError, refusedBodyGrace: opts.RefusedBodyGrace}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s
}

// Route is one endpoint of the page: its ServeMux pattern and its
// handler, in the page's Guard.
type Route struct {
	Pattern string
	Handler http.Handler
}

// Routes are the endpoints of the approver's page, for the API's route
// table.
func (s *Page) Routes() []Route {
	return []Route{
		{"GET /approvals/{$}", s.approverAuth(false, s.pageHome)},
		{"POST /approvals/sign-in", s.approverAuth(false, s.pageSignIn)},
		{"POST /approvals/sign-out", s.approverAuth(true, s.pageSignOut)},
		{"GET /approvals/{id}", s.approverAuth(true, s.pageApproval)},
		{"POST /approvals/{id}/verdict", s.approverAuth(true, s.pageVerdict)},
	}
}

// SecurityHeaders are set on every answer of the page, errors too:
// no script, no external resource, forms only to the page itself, never
// framed, never cached, never a Referer.
var SecurityHeaders = [][2]string{
	{"Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'"},
	{"X-Content-Type-Options", "nosniff"},
	{"Cache-Control", "no-store"},
	{"Referrer-Policy", "no-referrer"},
}

// MaxForm bounds the body of a page's POST: a sign-in's password is
// at most 1,024 bytes, a verdict's fields fewer.
const MaxForm = 16 << 10

// pageSession is the signed-in approver of a page request, or none.
type pageSession struct {
	token, name, csrf string
	approver          *approver.Approver
}

// pageHandler is an endpoint of the page. ses is nil without a session.
type pageHandler func(w http.ResponseWriter, r *http.Request, ses *pageSession)

// Guard is approverAuth's handler: the page's guard.
type Guard struct {
	s       *Page
	session bool // the endpoint needs a session (and a POST, its CSRF token)
	h       pageHandler
}

// approverAuth guards an endpoint of the approver's page. It
// authenticates by the session cookie only (docs/approvals.md
// §Approvers); session says the endpoint needs one.
func (s *Page) approverAuth(session bool, h pageHandler) http.Handler {
	return Guard{s: s, session: session, h: h}
}

func (g Guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s := g.s
	for _, h := range SecurityHeaders {
		w.Header().Set(h[0], h[1])
	}
	if s.appr == nil {
		s.pageRefuse(w, r, http.StatusNotFound, "approvals_off", "approvals are off: the config has no approvals member")
		return
	}
	// Before anything else, and never looked up: a mediator's token (or
	// any credential in a header) can never approve.
	if err := approver.RefuseBearer(r); err != nil {
		s.pageRefuse(w, r, http.StatusUnauthorized, "bearer_refused", "%v", err)
		return
	}
	post := r.Method == http.MethodPost
	if post {
		if err := approver.CheckOrigin(r, s.appr.Trusted...); err != nil {
			s.pageRefuse(w, r, http.StatusForbidden, "cross_origin",
				"a POST must come from the page itself: send Sec-Fetch-Site: same-origin, or an Origin naming this host")
			return
		}
		if r.ContentLength > MaxForm {
			// Declared too large: refused before any of it is read (it
			// may never come), the connection closed with it unread.
			http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.refusedBodyGrace))
			w.Header().Set("Connection", "close")
			s.pageRefuse(w, r, http.StatusRequestEntityTooLarge, "too_large", "the form exceeds %d bytes", MaxForm)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, MaxForm)
		if err := r.ParseForm(); err != nil {
			s.pageRefuse(w, r, http.StatusBadRequest, "invalid_request", "the form could not be read (application/x-www-form-urlencoded, at most %d bytes)", MaxForm)
			return
		}
	}
	secure := s.secure
	var ses *pageSession
	if token, ok := approver.SessionToken(r, secure); ok {
		name, csrf, ok, err := s.appr.Sessions.Resume(r.Context(), s.appr.Find, token, time.Now())
		if err != nil {
			s.log.ErrorContext(r.Context(), "reading an approver's session failed", "error", err)
			w.Header().Set("Retry-After", "1")
			s.pageRefuse(w, r, http.StatusServiceUnavailable, "unavailable", "the session could not be read; retry")
			return
		}
		if a, found := s.appr.Find(name); ok && found {
			ses = &pageSession{token: token, name: name, csrf: csrf, approver: a}
		}
	}
	if g.session && ses == nil {
		if !wantsJSON(r) && r.Method == http.MethodGet {
			pageSeeOther(w, "/approvals/")
			return
		}
		s.pageRefuse(w, r, http.StatusUnauthorized, "unauthenticated", "sign in first: POST /approvals/sign-in (the session may have ended)")
		return
	}
	if g.session && post && !approver.CheckCSRF(ses.csrf, r.PostForm.Get("csrf")) {
		s.pageRefuse(w, r, http.StatusForbidden, "csrf", "the form's csrf token is not this session's")
		return
	}
	g.h(w, r, ses)
}

// wantsJSON says r asked for JSON (Accept: application/json) rather than
// the HTML page.
func wantsJSON(r *http.Request) bool {
	for part := range strings.SplitSeq(r.Header.Get("Accept"), ",") {
		if mt, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && mt == "application/json" {
			return true
		}
	}
	return false
}

// pageRefuse answers a page request with an error: the usual JSON error
// body, or an HTML page saying the same to a browser.
func (s *Page) pageRefuse(w http.ResponseWriter, r *http.Request, status int, code, format string, args ...any) {
	if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		if w.Header().Get("Retry-After") == "" {
			w.Header().Set("Retry-After", "1")
		}
	}
	if wantsJSON(r) {
		s.writeError(w, status, code, format, args...)
		return
	}
	s.renderPage(w, status, "error", pageView{Title: http.StatusText(status), Code: code, Message: fmt.Sprintf(format, args...)})
}

// The page's templates, embedded in the binary: one set, one template
// per page, with inline CSS and no script.
//
//go:embed page.html
var pageFiles embed.FS

var pageTemplates = template.Must(template.New("").ParseFS(pageFiles, "page.html"))

// pageView is what a page's template is given.
type pageView struct {
	Title    string
	Approver string
	CSRF     string
	// error
	Code, Message string
	// sign-in
	Name string
	// list
	Approvals []pageItem
	// one approval, and the confirmation
	Item                    pageItem
	Decision                string
	Policies                []string
	PolicySet               string
	Preview, PreviewDigest  string
	PreviewSent, MayDecide  bool
	Verdict, VerdictPresent string
	// Truncation is ledgerd's record of the preview's bounding.
	Truncation pageTruncation
	// Attributes are the minimized attributes the request's entry (at
	// RequestIndex) records and signs, each value as JSON.
	Attributes   []pageAttribute
	RequestIndex uint64
}

// pageTruncation is what the page says of the preview's bounding: from
// ledgerd's record (approvals.Kept), never from the preview's text, whose
// markers the workload can write as well.
type pageTruncation struct {
	Recorded, Truncated bool
	Pass                int
	Limits              preview.Limits // of Pass, unless the fallback
	Fallback            bool
}

func newPageTruncation(k approvals.Kept) pageTruncation {
	t := pageTruncation{Recorded: k.Recorded, Truncated: k.Truncated, Pass: k.Pass, Fallback: k.Pass == preview.FallbackPass}
	if k.Pass >= 1 && k.Pass <= len(preview.Passes) {
		t.Limits = preview.Passes[k.Pass-1]
	}
	return t
}

// pageAttribute is one member of the recorded attributes.
type pageAttribute struct {
	Name, Value string // Value is JSON, indented if an array or object
}

// pageAttributes splits the canonical attributes object of an entry into
// its members, in their (canonical) order.
func pageAttributes(attrs []byte) ([]pageAttribute, error) {
	if len(attrs) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(attrs))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New("the attributes are not a JSON object")
	}
	var list []pageAttribute
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		name, _ := t.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		var b bytes.Buffer
		if raw[0] == '{' || raw[0] == '[' {
			if err := json.Indent(&b, raw, "", "  "); err != nil {
				return nil, err
			}
		} else {
			b.Write(raw)
		}
		list = append(list, pageAttribute{Name: name, Value: b.String()})
	}
	return list, nil
}

// pageItem is one approval as the page shows it.
type pageItem struct {
	ID, Path                    string
	Action, Principal, Mediator string
	State                       string
	RequestTime                 pageTime
	// PendingDeadline: a verdict must come before it. ExecutionDeadline
	// (once approved): a consumption must come before it; until a
	// verdict, ExecutionTTL says how long after an approval it falls.
	PendingDeadline, ExecutionDeadline pageTime
	ExecutionTTL                       string
	Verdict, Approver                  string
	VerdictIndex                       uint64
}

func newPageItem(st ledger.ApprovalStatus, now time.Time, executionTTL time.Duration) pageItem {
	it := pageItem{
		ID: st.ID.String(), Path: "/approvals/" + st.ID.String(),
		Action: st.Action, Principal: st.Principal, Mediator: st.Mediator,
		State:           approvals.StateAt(st, now),
		RequestTime:     newPageTime(st.RequestTime, now),
		PendingDeadline: newPageTime(st.PendingDeadline, now), ExecutionDeadline: newPageTime(st.ExecutionDeadline, now),
		Verdict: string(st.Verdict), Approver: st.Approver, VerdictIndex: st.VerdictIndex,
	}
	if st.Verdict == "" && executionTTL > 0 {
		it.ExecutionTTL = approxDuration(executionTTL)
	}
	return it
}

// pageTime is a time as the page shows it: UTC to the second, how long
// before or after the page was made, and the exact time, RFC 3339 as the
// entries record it, for the datetime attribute of a <time>. Zero: no
// time.
type pageTime struct {
	Exact, Human, Relative string
}

func newPageTime(t, now time.Time) pageTime {
	if t.IsZero() {
		return pageTime{}
	}
	return pageTime{Exact: t.UTC().Format(entry.TimeLayout), Human: t.UTC().Format("2006-01-02 15:04:05 UTC"), Relative: relativeTime(t, now)}
}

// relativeTime says when t is from now: "in 4 min", "3 min ago", "now"
// within a second. The figure is rounded down: a deadline is never
// shown further off than it is.
func relativeTime(t, now time.Time) string {
	d := t.Sub(now)
	switch {
	case d >= time.Second:
		return "in " + approxDuration(d)
	case d <= -time.Second:
		return approxDuration(-d) + " ago"
	}
	return "now"
}

// approxDuration writes d, rounded down, in its largest unit and the
// next: "45 s", "4 min", "2 h 5 min", "3 d 4 h".
func approxDuration(d time.Duration) string {
	parts := func(big, small time.Duration, bigUnit, smallUnit string) string {
		n, m := d/big, d%big/small
		if m == 0 {
			return fmt.Sprintf("%d %s", n, bigUnit)
		}
		return fmt.Sprintf("%d %s %d %s", n, bigUnit, m, smallUnit)
	}
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%d s", d/time.Second)
	case d < time.Hour:
		return fmt.Sprintf("%d min", d/time.Minute)
	case d < 24*time.Hour:
		return parts(time.Hour, time.Minute, "h", "min")
	}
	return parts(24*time.Hour, time.Hour, "d", "h")
}

// renderPage writes the HTML page name with status.
func (s *Page) renderPage(w http.ResponseWriter, status int, name string, v pageView) {
	var b bytes.Buffer
	if err := pageTemplates.ExecuteTemplate(&b, name, v); err != nil {
		s.log.Error("approver's page: a template failed", "template", name, "error", err)
		s.writeError(w, http.StatusInternalServerError, "internal", "the page could not be made")
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(b.Bytes())
}

// pageSeeOther answers 303 See Other to path, with a short HTML body (as
// http.Redirect writes only to a GET).
func pageSeeOther(w http.ResponseWriter, path string) {
	w.Header().Set("Location", path)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(http.StatusSeeOther)
	fmt.Fprintf(w, "<a href=\"%s\">%s</a>\n", template.HTMLEscapeString(path), template.HTMLEscapeString(path))
}

// writePageJSON answers v as JSON with status.
func writePageJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

// Status is an approval as the page's JSON answers show it: the members
// of GET /v1/approvals/{id} (approvals.StatusView) and, for one approval,
// its preview and the preview's digest.
type Status struct {
	approvals.StatusView
	Preview       json.RawMessage `json:"preview,omitempty"`
	PreviewDigest string          `json:"preview_digest,omitempty"`
}

func newPageStatus(st ledger.ApprovalStatus, now time.Time) Status {
	return Status{StatusView: approvals.NewStatusView(st, now)}
}

// pageHome is GET /approvals/: the sign-in form without a session; with
// one, the pending approvals the approver may approve, the nearest
// deadline first.
func (s *Page) pageHome(w http.ResponseWriter, r *http.Request, ses *pageSession) {
	if ses == nil {
		if wantsJSON(r) {
			s.pageRefuse(w, r, http.StatusUnauthorized, "unauthenticated", "sign in first: POST /approvals/sign-in with name and password")
			return
		}
		s.renderPage(w, http.StatusOK, "sign-in", pageView{Title: "Sign in"})
		return
	}
	now := s.appr.Now()
	var mine []ledger.ApprovalStatus
	for _, st := range s.l.PendingApprovals(now) {
		if ses.approver.MayApprove(st.Action, st.Principal) == nil {
			mine = append(mine, st)
		}
	}
	slices.SortStableFunc(mine, func(a, b ledger.ApprovalStatus) int {
		if c := a.PendingDeadline.Compare(b.PendingDeadline); c != 0 {
			return c
		}
		return cmp.Compare(a.Request, b.Request)
	})
	if wantsJSON(r) {
		list := make([]Status, 0, len(mine))
		for _, st := range mine {
			list = append(list, newPageStatus(st, now))
		}
		writePageJSON(w, http.StatusOK, struct {
			Approver  string   `json:"approver"`
			CSRF      string   `json:"csrf"`
			Approvals []Status `json:"approvals"`
		}{ses.name, ses.csrf, list})
		return
	}
	v := pageView{Title: "Pending approvals", Approver: ses.name, CSRF: ses.csrf}
	for _, st := range mine {
		v.Approvals = append(v.Approvals, newPageItem(st, now, 0))
	}
	s.renderPage(w, http.StatusOK, "list", v)
}

// pageSignIn is POST /approvals/sign-in: name and password.
func (s *Page) pageSignIn(w http.ResponseWriter, r *http.Request, _ *pageSession) {
	name := r.PostForm.Get("name")
	// checked is the approver as SignIn found them. A reload while the
	// password is checked (argon2: a tenth of a second) that removes them
	// or changes their password ends their sessions before this one
	// exists: the session is then ended here, as a wrong password.
	var checked *approver.Approver
	find := func(name string) (*approver.Approver, bool) {
		a, ok := s.appr.Find(name)
		checked = a
		return a, ok
	}
	token, csrf, err := s.appr.Sessions.SignIn(r.Context(), find, name, r.PostForm.Get("password"), time.Now())
	if err == nil {
		if now, ok := s.appr.Find(name); !ok || checked == nil || now.PasswordHash != checked.PasswordHash {
			s.appr.Sessions.End(r.Context(), token)
			err = approver.ErrCredentials
		}
	}
	var throttled *approver.ThrottledError
	switch {
	case err == nil:
	case errors.Is(err, approver.ErrCredentials):
		s.log.InfoContext(r.Context(), "approver sign-in refused: unknown name or wrong password", "name", logName(name))
		if !wantsJSON(r) {
			s.renderPage(w, http.StatusUnauthorized, "sign-in", pageView{Title: "Sign in", Name: name,
				Code: "credentials", Message: "Unknown name or wrong password."})
			return
		}
		s.pageRefuse(w, r, http.StatusUnauthorized, "credentials", "unknown approver or wrong password")
		return
	case errors.As(err, &throttled):
		s.log.WarnContext(r.Context(), "approver sign-in throttled", "name", logName(name), "every_name", throttled.Global, "until", throttled.Until)
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(time.Until(throttled.Until).Seconds()+0.999))))
		s.pageRefuse(w, r, http.StatusTooManyRequests, "throttled", "too many failed sign-ins: sign-ins are refused for a while; retry after Retry-After seconds")
		return
	case errors.Is(err, approver.ErrBusy):
		s.pageRefuse(w, r, http.StatusServiceUnavailable, "busy", "too many sign-ins at once; retry later")
		return
	case errors.Is(err, approver.ErrSessionStore):
		s.log.ErrorContext(r.Context(), "approver sign-in: the session could not be stored", "name", logName(name), "error", err)
		s.pageRefuse(w, r, http.StatusServiceUnavailable, "unavailable", "the session could not be stored; retry")
		return
	default:
		s.log.ErrorContext(r.Context(), "approver sign-in failed", "name", logName(name), "error", err)
		s.pageRefuse(w, r, http.StatusInternalServerError, "internal", "the sign-in could not be checked")
		return
	}
	s.log.InfoContext(r.Context(), "approver signed in", "approver", name)
	http.SetCookie(w, approver.SessionCookie(token, s.secure, approver.DefaultLifetime))
	if wantsJSON(r) {
		writePageJSON(w, http.StatusOK, struct {
			Approver string `json:"approver"`
			CSRF     string `json:"csrf"`
		}{name, csrf})
		return
	}
	pageSeeOther(w, "/approvals/")
}

// logName is a sign-in's name for the log: it may be anything a client
// sent, so it is cut to the longest valid name.
func logName(name string) string {
	if len(name) > approver.MaxNameLen {
		return strings.ToValidUTF8(name[:approver.MaxNameLen], "") + "…"
	}
	return name
}

// pageSignOut is POST /approvals/sign-out: the session ends.
func (s *Page) pageSignOut(w http.ResponseWriter, r *http.Request, ses *pageSession) {
	if err := s.appr.Sessions.End(r.Context(), ses.token); err != nil {
		s.log.ErrorContext(r.Context(), "ending an approver's session failed", "approver", ses.name, "error", err)
		w.Header().Set("Retry-After", "1")
		s.pageRefuse(w, r, http.StatusServiceUnavailable, "unavailable", "the session could not be ended; retry")
		return
	}
	http.SetCookie(w, approver.ClearSessionCookie(s.secure))
	s.log.InfoContext(r.Context(), "approver signed out", "approver", ses.name)
	if wantsJSON(r) {
		writePageJSON(w, http.StatusOK, struct {
			SignedOut bool `json:"signed_out"`
		}{true})
		return
	}
	pageSeeOther(w, "/approvals/")
}

// pageLookup finds the approval the path names and checks that the
// approver may approve it; otherwise it answers and returns false.
func (s *Page) pageLookup(w http.ResponseWriter, r *http.Request, ses *pageSession) (ledger.ApprovalStatus, bool) {
	id, err := commit.ParseDigest(r.PathValue("id"))
	if err != nil {
		s.pageRefuse(w, r, http.StatusBadRequest, "invalid_request", "the approval id in the path is not sha256:<64 lower-case hex>")
		return ledger.ApprovalStatus{}, false
	}
	st, ok, err := s.l.ReadApproval(r.Context(), id)
	if err != nil {
		s.log.ErrorContext(r.Context(), "approver's page: reading a closed approval's entries failed", "approval", id.String(), "error", err)
		s.storeDamaged(r.Context(), err)
		s.pageRefuse(w, r, http.StatusInternalServerError, "internal", "the approval's entries could not be read")
		return ledger.ApprovalStatus{}, false
	}
	if !ok {
		s.pageRefuse(w, r, http.StatusNotFound, "approval_not_found", "no approval has this id")
		return ledger.ApprovalStatus{}, false
	}
	if err := ses.approver.MayApprove(st.Action, st.Principal); err != nil {
		s.pageRefuse(w, r, http.StatusForbidden, "not_permitted", "%s", notPermitted(err))
		return ledger.ApprovalStatus{}, false
	}
	return st, true
}

// notPermitted says why MayApprove refused, without the names.
func notPermitted(err error) string {
	switch {
	case errors.Is(err, approver.ErrSelfApproval):
		return "you may not approve this request: " + approver.ErrSelfApproval.Error()
	case errors.Is(err, approver.ErrNotAction):
		return "you may not approve this request: " + approver.ErrNotAction.Error()
	case errors.Is(err, approver.ErrNotPrincipal):
		return "you may not approve this request: " + approver.ErrNotPrincipal.Error()
	}
	return "you may not approve this request"
}

// pageApproval is GET /approvals/{id}: one approval, its request's
// decision and policies, and the preview with its digest.
func (s *Page) pageApproval(w http.ResponseWriter, r *http.Request, ses *pageSession) {
	st, ok := s.pageLookup(w, r, ses)
	if !ok {
		return
	}
	now := s.appr.Now()
	shown, err := s.appr.Preview(r.Context(), s.l, st)
	if err != nil {
		s.log.ErrorContext(r.Context(), "approver's page: no preview", "approval", st.ID.String(), "error", err)
		s.pageRefuse(w, r, http.StatusInternalServerError, "internal", "the approval's preview could not be read")
		return
	}
	if wantsJSON(r) {
		p := newPageStatus(st, now)
		p.Preview, p.PreviewDigest = shown.JSON, shown.Digest.String()
		writePageJSON(w, http.StatusOK, p)
		return
	}
	v, ok := s.pageApprovalView(w, r, ses, st, now, shown)
	if !ok {
		return
	}
	s.renderPage(w, http.StatusOK, "approval", v)
}

// pageApprovalView is what the approval's page and its confirmation show.
func (s *Page) pageApprovalView(w http.ResponseWriter, r *http.Request, ses *pageSession, st ledger.ApprovalStatus, now time.Time, shown approvals.Shown) (pageView, bool) {
	req, err := s.requestEntry(r.Context(), st)
	var attrs []pageAttribute
	if err == nil {
		attrs, err = pageAttributes(req.Attributes)
	}
	if err != nil {
		s.log.ErrorContext(r.Context(), "approver's page: the request entry could not be read", "approval", st.ID.String(), "error", err)
		s.storeDamaged(r.Context(), err)
		s.pageRefuse(w, r, http.StatusInternalServerError, "internal", "the approval's request could not be read")
		return pageView{}, false
	}
	var pretty bytes.Buffer
	if json.Indent(&pretty, shown.JSON, "", "  ") != nil {
		pretty.Reset()
		pretty.Write(shown.JSON)
	}
	_, executionTTL, _ := s.l.ApprovalConfig()
	item := newPageItem(st, now, executionTTL)
	v := pageView{
		Title: "Approval " + st.ID.String(), Approver: ses.name, CSRF: ses.csrf, Item: item,
		Decision: string(req.Decision), Policies: req.Policies,
		Preview: pretty.String(), PreviewDigest: shown.Digest.String(), PreviewSent: shown.Sent,
		MayDecide: item.State == approvals.StatePending, Truncation: newPageTruncation(shown.Kept),
		Attributes: attrs, RequestIndex: st.Request,
	}
	if req.PolicySet != (commit.Digest{}) {
		v.PolicySet = req.PolicySet.String()
	}
	return v, true
}

// requestEntry reads the entry of an approval's request.
func (s *Page) requestEntry(ctx context.Context, st ledger.ApprovalStatus) (*entry.Entry, error) {
	raw, err := s.l.Entry(ctx, st.Request)
	if err != nil {
		return nil, err
	}
	return entry.Parse(raw)
}

// pageVerdict is POST /approvals/{id}/verdict: verdict, preview_digest,
// csrf (checked by the guard) and confirm. Without confirm=yes it asks
// for a confirmation; with it, it appends the approval entry.
func (s *Page) pageVerdict(w http.ResponseWriter, r *http.Request, ses *pageSession) {
	st, ok := s.pageLookup(w, r, ses)
	if !ok {
		return
	}
	var verdict entry.Verdict
	switch r.PostForm.Get("verdict") {
	case "approve":
		verdict = entry.Approve
	case "deny":
		verdict = entry.Reject
	default:
		s.pageRefuse(w, r, http.StatusBadRequest, "invalid_request", "verdict: approve or deny")
		return
	}
	shown, err := commit.ParseDigest(r.PostForm.Get("preview_digest"))
	if err != nil {
		s.pageRefuse(w, r, http.StatusBadRequest, "invalid_request", "preview_digest: the digest of the preview shown, sha256:<64 lower-case hex>")
		return
	}
	now := s.appr.Now()
	switch approvals.StateAt(st, now) {
	case approvals.StatePending:
	case approvals.StateExpired:
		if st.Verdict == "" {
			s.pageRefuse(w, r, http.StatusConflict, "approval_expired", "the approval's pending deadline has passed")
			return
		}
		fallthrough
	default:
		s.pageRefuse(w, r, http.StatusConflict, "approval_decided", "the approval has a verdict already")
		return
	}
	kept, err := s.appr.Preview(r.Context(), s.l, st)
	if err != nil {
		s.log.ErrorContext(r.Context(), "approver's page: no preview", "approval", st.ID.String(), "error", err)
		s.pageRefuse(w, r, http.StatusInternalServerError, "internal", "the approval's preview could not be read")
		return
	}
	digest := kept.Digest
	if shown != digest {
		s.pageRefuse(w, r, http.StatusConflict, "preview_changed", "the preview is not the one shown (preview_digest differs): read the approval again")
		return
	}
	if r.PostForm.Get("confirm") != "yes" {
		if wantsJSON(r) {
			s.pageRefuse(w, r, http.StatusBadRequest, "confirm_required", "send confirm=yes to record the verdict")
			return
		}
		v, ok := s.pageApprovalView(w, r, ses, st, now, kept)
		if !ok {
			return
		}
		v.Title, v.Verdict = "Confirm: "+string(verdict), string(verdict)
		v.VerdictPresent = map[entry.Verdict]string{entry.Approve: "Approve", entry.Reject: "Deny"}[verdict]
		s.renderPage(w, http.StatusOK, "confirm", v)
		return
	}
	receipt, err := s.l.Append(r.Context(), ledger.Record{
		Kind: entry.KindApproval, ApprovalID: st.ID, Approver: ses.name, Verdict: verdict, PreviewDigest: digest,
	})
	var ae *ledger.ApprovalError
	switch {
	case err == nil:
	case errors.As(err, &ae):
		s.pageLifecycleRefusal(w, r, ae)
		return
	case errors.Is(err, ledger.ErrQueueFull):
		s.pageRefuse(w, r, http.StatusTooManyRequests, "busy", "the append queue is full; retry later")
		return
	default:
		s.log.ErrorContext(r.Context(), "approver's verdict not appended", "approver", ses.name, "approval", st.ID.String(), "error", err)
		s.pageRefuse(w, r, http.StatusServiceUnavailable, "unavailable", "the verdict was not appended")
		return
	}
	s.log.InfoContext(r.Context(), "approval verdict", "approver", ses.name, "approval", st.ID.String(),
		"verdict", string(verdict), "index", receipt.Index, "preview_digest", digest.String())
	if verdict == entry.Reject {
		if err := s.appr.Previews.Remove(r.Context(), st.ID); err != nil {
			s.log.ErrorContext(r.Context(), "a denied approval's preview was not removed; the sweep will", "approval", st.ID.String(), "error", err)
		}
	}
	if wantsJSON(r) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"index":%d,"leaf_hash":"%x","entry":%s}`+"\n", receipt.Index, receipt.LeafHash, receipt.Entry)
		return
	}
	pageSeeOther(w, "/approvals/"+st.ID.String())
}

// pageLifecycleRefusal answers a verdict the ledger refused by the
// lifecycle's rules (docs/approvals.md §Lifecycle).
func (s *Page) pageLifecycleRefusal(w http.ResponseWriter, r *http.Request, ae *ledger.ApprovalError) {
	switch ae.Code {
	case ledger.CodeNotFound:
		s.pageRefuse(w, r, http.StatusNotFound, "approval_not_found", "no approval has this id")
	case ledger.CodeDecided:
		s.pageRefuse(w, r, http.StatusConflict, "approval_decided", "the approval has a verdict already")
	case ledger.CodeExpired:
		s.pageRefuse(w, r, http.StatusConflict, "approval_expired", "the approval's pending deadline has passed")
	case ledger.CodeSelf:
		s.pageRefuse(w, r, http.StatusConflict, "approval_self", "an approver never approves a request whose principal is themselves")
	default:
		s.log.ErrorContext(r.Context(), "approver's verdict refused by an unexpected rule", "code", ae.Code)
		s.pageRefuse(w, r, http.StatusInternalServerError, "internal", "the verdict was refused by the rule %s", ae.Code)
	}
}
