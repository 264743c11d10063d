package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/decisionledger/ledger/approval/approver"
	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/config"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/internal/apitest"
	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/server/approvals"
	"github.com/decisionledger/ledger/server/approverpage"
	"github.com/decisionledger/ledger/storage/memory"
)

// pageServer starts a ledger with approvals on, approvers alice and bob,
// and an approval_config entry, so that needs_approval requests open
// approvals.
func pageServer(t *testing.T) *testServer {
	t.Helper()
	s := startServerWith(t, func(c *config.Config) {
		c.Approvals = &config.ApprovalsConfig{Approvers: apitest.TestApprovers()}
	})
	if _, _, ok := s.l.ApprovalConfig(); !ok {
		if _, err := s.l.Append(t.Context(), ledger.Record{Kind: entry.KindApprovalConfig, PendingTTL: 24 * time.Hour, ExecutionTTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// openRequest appends over HTTP, as the test's mediator, a needs_approval
// decision of principal for action with the preview doc (none if empty),
// and returns the approval's id.
func openRequest(t *testing.T, s *testServer, principal, action, doc string, i int) commit.Digest {
	t.Helper()
	return openRequestWith(t, s, principal, action, fmt.Sprintf(`{"amount_minor":%d}`, i), doc, i)
}

// openRequestWith is openRequest with the attributes attrs (a JSON
// object) recorded.
func openRequestWith(t *testing.T, s *testServer, principal, action, attrs, doc string, i int) commit.Digest {
	t.Helper()
	c, _ := commit.Params([]byte(fmt.Sprintf(`{"to":"user%d@example.com","amount_minor":%d}`, i, i)))
	var withPreview string
	if doc != "" {
		withPreview = `,"preview":` + doc
	}
	body := fmt.Sprintf(`{"principal":%q,"action":%q,"decision":"needs_approval","policies":["payments.review"],`+
		`"params_digest":"%s","params_size":%d,"tiers_digest":"sha256:%064x","attributes":%s%s}`,
		principal, action, c.Digest, c.Size, i, attrs, withPreview)
	resp, b := s.post(t, s.token, body)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("append of a needs_approval request: %d %s", resp.StatusCode, b)
	}
	var receipt struct {
		Approval struct {
			ID            string `json:"id"`
			PreviewDigest string `json:"preview_digest"`
		} `json:"approval"`
		Entry json.RawMessage
	}
	if err := json.Unmarshal(b, &receipt); err != nil {
		t.Fatal(err)
	}
	e, err := entry.Parse(receipt.Entry)
	if err != nil {
		t.Fatal(err)
	}
	id, err := e.Hash()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.l.Approval(id); !ok || receipt.Approval.ID != id.String() {
		t.Fatalf("the request at %d opened no approval: %s", e.Index, b)
	}
	if _, digest, ok := storedPreview(s.srv, id); ok != (doc != "") || ok && digest.String() != receipt.Approval.PreviewDigest {
		t.Fatalf("the request at %d has a preview %v (%s), sent %q", e.Index, ok, digest, doc)
	}
	return id
}

// expect checks an answer's status and, for an error, its code.
func expect(t *testing.T, what string, resp *http.Response, body []byte, status int, code string) {
	t.Helper()
	var e struct{ Error apiError }
	json.Unmarshal(body, &e)
	if resp.StatusCode != status || e.Error.Code != code {
		t.Errorf("%s: %d %s, want %d %q", what, resp.StatusCode, body, status, code)
	}
	checkPageHeaders(t, what, resp)
}

// checkPageHeaders checks the security headers every answer of the page
// carries.
func checkPageHeaders(t *testing.T, what string, resp *http.Response) {
	t.Helper()
	for _, h := range approverpage.SecurityHeaders {
		if got := resp.Header.Get(h[0]); got != h[1] {
			t.Errorf("%s: %s %q, want %q", what, h[0], got, h[1])
		}
	}
}

// With approvals off every route of the page answers 404 approvals_off.
func TestPageOff(t *testing.T) {
	s := startServer(t)
	p := apitest.NewPageClient(t, s.url)
	id := "sha256:" + strings.Repeat("ab", 32)
	for _, c := range []struct{ method, path string }{
		{"GET", "/approvals/"}, {"POST", "/approvals/sign-in"}, {"POST", "/approvals/sign-out"},
		{"GET", "/approvals/" + id}, {"POST", "/approvals/" + id + "/verdict"},
	} {
		var form url.Values
		if c.method == "POST" {
			form = url.Values{}
		}
		resp, b := p.Do(c.method, c.path, form)
		expect(t, c.method+" "+c.path, resp, b, http.StatusNotFound, "approvals_off")
	}
}

// The whole path as curl takes it: sign in, list, read, approve with the
// confirmation, and every refusal on the way.
func TestPageJSON(t *testing.T) {
	logs := new(apitest.LockedBuffer)
	testLogs = logs
	defer func() { testLogs = nil }()
	s := pageServer(t)
	payment := openRequest(t, s, "agent:billing", "make_payment", `{"payee":"ACME <b>Ltd</b>","amount":"12.00 EUR"}`, 1)
	email := openRequest(t, s, "agent:mail", "send_email", "", 2)
	self := openRequest(t, s, "alice", "send_email", `{"to":"carol@example.org"}`, 3)

	p := apitest.NewPageClient(t, s.url)
	resp, b := p.Do("GET", "/approvals/", nil)
	expect(t, "the list without a session", resp, b, http.StatusUnauthorized, "unauthenticated")

	// Sign-in: same origin, no Authorization, right password.
	signIn := url.Values{"name": {"alice"}, "password": {apitest.TestPassword}}
	resp, b = p.Do("POST", "/approvals/sign-in", signIn, "Origin", "")
	expect(t, "sign-in without Origin", resp, b, http.StatusForbidden, "cross_origin")
	resp, b = p.Do("POST", "/approvals/sign-in", signIn, "Origin", "https://evil.example.org")
	expect(t, "sign-in from another origin", resp, b, http.StatusForbidden, "cross_origin")
	resp, b = p.Do("POST", "/approvals/sign-in", signIn, "Sec-Fetch-Site", "cross-site")
	expect(t, "sign-in with Sec-Fetch-Site: cross-site", resp, b, http.StatusForbidden, "cross_origin")
	resp, b = p.Do("POST", "/approvals/sign-in", signIn, "Authorization", "Bearer "+s.token)
	expect(t, "sign-in with a mediator's token", resp, b, http.StatusUnauthorized, "bearer_refused")
	resp, b = p.Do("POST", "/approvals/sign-in", url.Values{"name": {"alice"}, "password": {"not-the-password-7391"}})
	expect(t, "sign-in with a wrong password", resp, b, http.StatusUnauthorized, "credentials")
	if c := resp.Header.Get("Set-Cookie"); c != "" {
		t.Errorf("a refused sign-in set a cookie: %s", c)
	}
	resp, b = p.Do("POST", "/approvals/sign-in", signIn, "Origin", "", "Sec-Fetch-Site", "same-origin")
	expect(t, "sign-in with Sec-Fetch-Site: same-origin", resp, b, http.StatusOK, "")
	cookie := resp.Header.Get("Set-Cookie")
	for _, want := range []string{approver.CookieName + "=", "HttpOnly", "SameSite=Strict", "Path=/"} {
		if !strings.Contains(cookie, want) {
			t.Errorf("the session cookie %q lacks %s", cookie, want)
		}
	}
	p.SignIn("alice", apitest.TestPassword)

	// The list: what alice may approve, not her own request.
	var list struct {
		Approver, CSRF string
		Approvals      []approverpage.Status
	}
	resp, b = p.Do("GET", "/approvals/", nil)
	expect(t, "the list", resp, b, http.StatusOK, "")
	if err := json.Unmarshal(b, &list); err != nil || list.Approver != "alice" || list.CSRF != p.CSRF ||
		len(list.Approvals) != 2 || list.Approvals[0].ID != payment.String() || list.Approvals[1].ID != email.String() ||
		list.Approvals[0].State != "pending" {
		t.Fatalf("alice's list: %s", b)
	}

	// One approval, with its preview.
	var one approverpage.Status
	resp, b = p.Do("GET", "/approvals/"+payment.String(), nil)
	expect(t, "the approval", resp, b, http.StatusOK, "")
	if err := json.Unmarshal(b, &one); err != nil || one.Action != "make_payment" || one.Principal != "agent:billing" ||
		!bytes.Contains(one.Preview, []byte(`"ACME <b>Ltd</b>"`)) || !strings.HasPrefix(one.PreviewDigest, "sha256:") {
		t.Fatalf("the approval: %s", b)
	}
	resp, b = p.Do("GET", "/approvals/"+self.String(), nil)
	expect(t, "her own request", resp, b, http.StatusForbidden, "not_permitted")
	resp, b = p.Do("GET", "/approvals/sha256:"+strings.Repeat("0", 64), nil)
	expect(t, "an unknown approval", resp, b, http.StatusNotFound, "approval_not_found")
	resp, b = p.Do("GET", "/approvals/nothing", nil)
	expect(t, "a malformed id", resp, b, http.StatusBadRequest, "invalid_request")

	size := s.l.Size()
	verdict := "/approvals/" + payment.String() + "/verdict"
	f := p.VerdictForm("approve", one.PreviewDigest, true)
	resp, b = p.Do("POST", verdict, f, "Authorization", "Bearer "+s.token)
	expect(t, "a verdict with a mediator's token beside the cookie", resp, b, http.StatusUnauthorized, "bearer_refused")
	resp, b = p.Do("POST", verdict, f, "Origin", "http://ledger.example.com")
	expect(t, "a verdict from another origin", resp, b, http.StatusForbidden, "cross_origin")
	f.Set("csrf", strings.Repeat("A", 43))
	resp, b = p.Do("POST", verdict, f)
	expect(t, "a verdict with another csrf token", resp, b, http.StatusForbidden, "csrf")
	f.Del("csrf")
	resp, b = p.Do("POST", verdict, f)
	expect(t, "a verdict without a csrf token", resp, b, http.StatusForbidden, "csrf")
	resp, b = p.Do("POST", verdict, p.VerdictForm("approve", one.PreviewDigest, false))
	expect(t, "a verdict without confirm", resp, b, http.StatusBadRequest, "confirm_required")
	resp, b = p.Do("POST", verdict, p.VerdictForm("approve", "sha256:"+strings.Repeat("1", 64), true))
	expect(t, "a verdict on another preview", resp, b, http.StatusConflict, "preview_changed")
	resp, b = p.Do("POST", verdict, p.VerdictForm("maybe", one.PreviewDigest, true))
	expect(t, "a verdict neither approve nor deny", resp, b, http.StatusBadRequest, "invalid_request")
	_, selfDigest, _ := storedPreview(s.srv, self)
	resp, b = p.Do("POST", "/approvals/"+self.String()+"/verdict", p.VerdictForm("approve", selfDigest.String(), true))
	expect(t, "a verdict on her own request", resp, b, http.StatusForbidden, "not_permitted")
	if s.l.Size() != size {
		t.Fatalf("refused verdicts appended %d entries", s.l.Size()-size)
	}

	// Approve.
	resp, b = p.Do("POST", verdict, p.VerdictForm("approve", one.PreviewDigest, true))
	expect(t, "the approval's verdict", resp, b, http.StatusCreated, "")
	var receipt struct {
		Index uint64
		Entry json.RawMessage
	}
	json.Unmarshal(b, &receipt)
	e, err := entry.Parse(receipt.Entry)
	if err != nil {
		t.Fatalf("the verdict's receipt: %v: %s", err, b)
	}
	if e.Kind != entry.KindApproval || e.ApprovalID != payment || e.Approver != "alice" || e.Verdict != entry.Approve ||
		e.PreviewDigest.String() != one.PreviewDigest {
		t.Errorf("the verdict's entry: %s", receipt.Entry)
	}
	resp, b = p.Do("POST", verdict, p.VerdictForm("deny", one.PreviewDigest, true))
	expect(t, "a second verdict", resp, b, http.StatusConflict, "approval_decided")
	if st, _ := s.l.Approval(payment); st.Verdict != entry.Approve || st.Approver != "alice" {
		t.Errorf("after the verdict the approval is %+v", st)
	}

	// Deny, on the default preview: the preview store has none to remove.
	_, b = p.Do("GET", "/approvals/"+email.String(), nil)
	json.Unmarshal(b, &one)
	if !bytes.Contains(one.Preview, []byte("The mediator sent no preview")) {
		t.Errorf("the default preview: %s", one.Preview)
	}
	resp, b = p.Do("POST", "/approvals/"+email.String()+"/verdict", p.VerdictForm("deny", one.PreviewDigest, true))
	expect(t, "a denial", resp, b, http.StatusCreated, "")
	_, b = p.Do("GET", "/approvals/", nil)
	json.Unmarshal(b, &list)
	if len(list.Approvals) != 0 {
		t.Errorf("after both verdicts alice's list is %s", b)
	}

	// Bob may not approve payments.
	q := apitest.NewPageClient(t, s.url)
	q.SignIn("bob", apitest.TestPassword)
	_, b = q.Do("GET", "/approvals/", nil)
	json.Unmarshal(b, &list)
	if len(list.Approvals) != 1 || list.Approvals[0].ID != self.String() {
		t.Errorf("bob's list: %s", b)
	}
	resp, b = q.Do("GET", "/approvals/"+payment.String(), nil)
	expect(t, "bob reads a payment", resp, b, http.StatusForbidden, "not_permitted")
	resp, b = q.Do("POST", "/approvals/sign-out", url.Values{"csrf": {p.CSRF}})
	expect(t, "sign-out with another session's csrf token", resp, b, http.StatusForbidden, "csrf")
	resp, b = q.Do("POST", "/approvals/sign-out", url.Values{"csrf": {q.CSRF}})
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"signed_out":true`) {
		t.Errorf("sign-out: %d %s", resp.StatusCode, b)
	}
	resp, b = q.Do("GET", "/approvals/", nil)
	expect(t, "the list after sign-out", resp, b, http.StatusUnauthorized, "unauthenticated")

	// The log holds no secret: no password, session token, csrf token or
	// preview content.
	for _, secret := range []string{apitest.TestPassword, "not-the-password-7391", p.CSRF, q.CSRF, "ACME", "carol@example.org"} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the log holds %q", secret)
		}
	}
	for _, c := range p.C.Jar.Cookies(&url.URL{Scheme: "http", Host: strings.TrimPrefix(s.url, "http://")}) {
		if strings.Contains(logs.String(), c.Value) {
			t.Error("the log holds a session token")
		}
	}
	if !strings.Contains(logs.String(), `"approval verdict"`) {
		t.Error("the verdicts were not logged")
	}
}

// A denial removes the mediator's preview.
func TestPageDenyRemovesPreview(t *testing.T) {
	s := pageServer(t)
	id := openRequest(t, s, "agent:mail", "send_email", `{"subject":"quarterly report"}`, 1)
	p := apitest.NewPageClient(t, s.url)
	p.SignIn("bob", apitest.TestPassword)
	_, digest, ok := storedPreview(s.srv, id)
	if !ok {
		t.Fatal("no preview stored")
	}
	resp, b := p.Do("POST", "/approvals/"+id.String()+"/verdict", p.VerdictForm("deny", digest.String(), true))
	expect(t, "a denial", resp, b, http.StatusCreated, "")
	if _, _, ok := storedPreview(s.srv, id); ok {
		t.Error("the denied approval's preview is still stored")
	}
	st, _ := s.l.Approval(id)
	raw, err := s.l.Entry(context.Background(), st.VerdictIndex)
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := entry.Parse(raw); e.PreviewDigest != digest || e.Verdict != entry.Reject || e.Approver != "bob" {
		t.Errorf("the denial's entry: %s", raw)
	}
	// Denied, the approval is reduced in the ledger; the page still shows
	// it, its terms read from its entries.
	if !st.Reduced {
		t.Errorf("the denied approval is kept whole: %+v", st)
	}
	resp, b = p.Do("GET", "/approvals/"+id.String(), nil)
	expect(t, "the denied approval's page", resp, b, http.StatusOK, "")
	var v approverpage.Status
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	if v.State != approvals.StateDenied || v.Action != "send_email" || v.Principal != "agent:mail" || v.Approver != "bob" {
		t.Errorf("the denied approval's page: %s", b)
	}
}

// The HTML page escapes what it shows, asks for a confirmation, and
// carries the session's csrf token in its forms.
func TestPageHTML(t *testing.T) {
	s := pageServer(t)
	id := openRequest(t, s, "agent:mail", "send_email", `{"subject":"<script>alert(1)</script>","body":"a & b"}`, 1)
	p := apitest.NewPageClient(t, s.url)
	p.SignIn("bob", apitest.TestPassword)
	p.Header.Set("Accept", "text/html")
	resp, b := p.Do("GET", "/approvals/"+id.String(), nil)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("the approval's page: %d %s", resp.StatusCode, b)
	}
	checkPageHeaders(t, "the approval's page", resp)
	page := string(b)
	if strings.Contains(page, "<script>") || !strings.Contains(page, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Errorf("the preview is not escaped:\n%s", page)
	}
	_, digest, _ := storedPreview(s.srv, id)
	for _, want := range []string{`name="csrf" value="` + p.CSRF + `"`, `name="preview_digest" value="` + digest.String() + `"`, "agent:mail", "needs_approval", "payments.review"} {
		if !strings.Contains(page, want) {
			t.Errorf("the approval's page lacks %s", want)
		}
	}
	// Pretty-printed: one member a line.
	if !strings.Contains(page, "\n  &#34;body&#34;: &#34;a &amp; b&#34;,\n") {
		t.Errorf("the preview is not pretty-printed:\n%s", page)
	}
	size := s.l.Size()
	resp, b = p.Do("POST", "/approvals/"+id.String()+"/verdict", p.VerdictForm("approve", digest.String(), false))
	if resp.StatusCode != 200 || !strings.Contains(string(b), `name="confirm" value="yes"`) || s.l.Size() != size {
		t.Fatalf("the confirmation: %d %s", resp.StatusCode, b)
	}
	resp, b = p.Do("POST", "/approvals/"+id.String()+"/verdict", p.VerdictForm("approve", digest.String(), true))
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/approvals/"+id.String() {
		t.Fatalf("the confirmed verdict: %d %s", resp.StatusCode, b)
	}
	_, b = p.Do("GET", "/approvals/"+id.String(), nil)
	if !strings.Contains(string(b), `id="state">approved<`) || strings.Contains(string(b), `id="approve-form"`) {
		t.Errorf("after the verdict the page shows:\n%s", b)
	}
	// Without a session, a page redirects to the sign-in form; an error
	// is a page.
	q := apitest.NewPageClient(t, s.url)
	q.Header.Set("Accept", "text/html")
	resp, _ = q.Do("GET", "/approvals/"+id.String(), nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/approvals/" {
		t.Errorf("an approval without a session: %d, Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, b = q.Do("GET", "/approvals/", nil)
	if resp.StatusCode != 200 || !strings.Contains(string(b), `action="/approvals/sign-in"`) {
		t.Errorf("the sign-in form: %d %s", resp.StatusCode, b)
	}
	resp, b = q.Do("POST", "/approvals/sign-in", url.Values{"name": {"bob"}, "password": {"not the password at all"}})
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(b), "credentials") {
		t.Errorf("a wrong password's page: %d %s", resp.StatusCode, b)
	}
	resp, b = q.Do("POST", "/approvals/sign-in", url.Values{"name": {"bob"}, "password": {apitest.TestPassword}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/approvals/" {
		t.Errorf("a sign-in: %d %s", resp.StatusCode, b)
	}
}

func init() {
	notExercised["post /approvals/sign-in 503"] = "busy: more than 34 sign-ins at once (approver's tests: TestGate)"
	notExercised["post /approvals/{id}/verdict 429"] = "busy: the append queue full"
}

// pageDo is answerChecker.do without following redirects.
func pageDo(a *apitest.AnswerChecker, s *testServer, want int, method, path, body string, header ...string) {
	a.T.Helper()
	req, _ := http.NewRequest(method, s.url+path, strings.NewReader(body))
	if method == "GET" {
		req.Body, req.ContentLength = nil, 0
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		a.T.Fatalf("%s %s: %v", method, path, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != want {
		a.T.Errorf("%s %s: %d %s, want %d", method, path, resp.StatusCode, b, want)
	}
	a.Check(req, resp, b)
}

// pageAnswers brings about, for TestOpenAPIAnswers, every answer of the
// approver's page that docs/openapi.json describes.
func pageAnswers(t *testing.T, a *apitest.AnswerChecker) {
	off := startServer(t)
	id := "/approvals/sha256:" + strings.Repeat("0", 64)
	form := []string{"Content-Type", "application/x-www-form-urlencoded"}
	asJSON := append([]string{"Accept", "application/json"}, form...)
	pageDo(a, off, 404, "GET", "/approvals/", "")
	pageDo(a, off, 404, "POST", "/approvals/sign-in", "", asJSON...)
	pageDo(a, off, 404, "POST", "/approvals/sign-out", "", asJSON...)
	pageDo(a, off, 404, "GET", id, "")
	pageDo(a, off, 404, "POST", id+"/verdict", "", asJSON...)

	store := memory.New()
	s := startServerOn(t, func(c *config.Config) { c.Approvals = &config.ApprovalsConfig{Approvers: apitest.TestApprovers()} }, store)
	if _, err := s.l.Append(t.Context(), ledger.Record{Kind: entry.KindApprovalConfig, PendingTTL: time.Hour, ExecutionTTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	mail := openRequest(t, s, "agent:mail", "send_email", `{"subject":"minutes"}`, 1)
	other := openRequest(t, s, "agent:mail", "send_email", `{"subject":"agenda"}`, 2)
	last := openRequest(t, s, "agent:mail", "send_email", `{"subject":"notes"}`, 3)
	pay := openRequest(t, s, "agent:billing", "make_payment", "", 4)
	_, digest, _ := storedPreview(s.srv, mail)
	_, otherDigest, _ := storedPreview(s.srv, other)
	_, lastDigest, _ := storedPreview(s.srv, last)
	p := apitest.NewPageClient(t, s.url)
	p.SignIn("bob", apitest.TestPassword)
	var cookie string
	for _, c := range p.C.Jar.Cookies(&url.URL{Scheme: "http", Host: strings.TrimPrefix(s.url, "http://")}) {
		cookie = c.Name + "=" + c.Value
	}
	origin := []string{"Origin", s.url}
	session := append([]string{"Cookie", cookie}, origin...)
	sessionJSON := append(append([]string{}, session...), asJSON...)
	sessionForm := append(append([]string{}, session...), form...)
	verdict := func(v string, d commit.Digest, confirm bool) string {
		f := url.Values{"verdict": {v}, "preview_digest": {d.String()}, "csrf": {p.CSRF}}
		if confirm {
			f.Set("confirm", "yes")
		}
		return f.Encode()
	}
	signIn := url.Values{"name": {"bob"}, "password": {apitest.TestPassword}}.Encode()

	pageDo(a, s, 200, "GET", "/approvals/", "")
	pageDo(a, s, 401, "GET", "/approvals/", "", "Accept", "application/json")
	pageDo(a, s, 200, "GET", "/approvals/", "", sessionJSON...)
	pageDo(a, s, 200, "POST", "/approvals/sign-in", signIn, append(asJSON, origin...)...)
	pageDo(a, s, 303, "POST", "/approvals/sign-in", signIn, append(form, origin...)...)
	pageDo(a, s, 401, "POST", "/approvals/sign-in", url.Values{"name": {"bob"}, "password": {"not-the-password-7391"}}.Encode(), append(asJSON, origin...)...)
	pageDo(a, s, 403, "POST", "/approvals/sign-in", signIn, asJSON...)
	for range approver.MaxFailures {
		pageDo(a, s, 401, "POST", "/approvals/sign-in", url.Values{"name": {"mallory"}, "password": {"not-the-password-7391"}}.Encode(), append(asJSON, origin...)...)
	}
	pageDo(a, s, 429, "POST", "/approvals/sign-in", url.Values{"name": {"mallory"}, "password": {"not-the-password-7391"}}.Encode(), append(asJSON, origin...)...)

	pageDo(a, s, 200, "GET", "/approvals/"+mail.String(), "", session...)
	pageDo(a, s, 200, "GET", "/approvals/"+mail.String(), "", sessionJSON...)
	pageDo(a, s, 303, "GET", "/approvals/"+mail.String(), "")
	pageDo(a, s, 400, "GET", "/approvals/nothing", "", sessionJSON...)
	pageDo(a, s, 401, "GET", "/approvals/"+mail.String(), "", "Accept", "application/json")
	pageDo(a, s, 403, "GET", "/approvals/"+pay.String(), "", sessionJSON...)
	pageDo(a, s, 404, "GET", id, "", sessionJSON...)

	pageDo(a, s, 200, "POST", "/approvals/"+mail.String()+"/verdict", verdict("approve", digest, false), sessionForm...)
	pageDo(a, s, 400, "POST", "/approvals/"+mail.String()+"/verdict", verdict("approve", digest, false), sessionJSON...)
	pageDo(a, s, 401, "POST", "/approvals/"+mail.String()+"/verdict", verdict("approve", digest, true), append(asJSON, origin...)...)
	pageDo(a, s, 403, "POST", "/approvals/"+mail.String()+"/verdict", verdict("approve", digest, true), append(sessionJSON, "Origin", "https://evil.example.org")...)
	pageDo(a, s, 404, "POST", id+"/verdict", verdict("approve", digest, true), sessionJSON...)
	pageDo(a, s, 201, "POST", "/approvals/"+mail.String()+"/verdict", verdict("approve", digest, true), sessionJSON...)
	pageDo(a, s, 409, "POST", "/approvals/"+mail.String()+"/verdict", verdict("deny", digest, true), sessionJSON...)
	pageDo(a, s, 303, "POST", "/approvals/"+other.String()+"/verdict", verdict("deny", otherDigest, true), sessionForm...)
	store.Close()
	pageDo(a, s, 503, "POST", "/approvals/"+last.String()+"/verdict", verdict("deny", lastDigest, true), sessionJSON...)

	pageDo(a, s, 403, "POST", "/approvals/sign-out", "csrf=x", sessionJSON...)
	pageDo(a, s, 200, "POST", "/approvals/sign-out", "csrf="+p.CSRF, sessionJSON...)
	pageDo(a, s, 401, "POST", "/approvals/sign-out", "csrf="+p.CSRF, sessionJSON...)
	p.SignIn("bob", apitest.TestPassword)
	for _, c := range p.C.Jar.Cookies(&url.URL{Scheme: "http", Host: strings.TrimPrefix(s.url, "http://")}) {
		cookie = c.Name + "=" + c.Value
	}
	pageDo(a, s, 303, "POST", "/approvals/sign-out", "csrf="+p.CSRF, append([]string{"Cookie", cookie}, append(origin, form...)...)...)
}

// Past its pending deadline, by the server's clock, an approval leaves
// the list and a verdict on it is refused.
func TestPageExpired(t *testing.T) {
	s := pageServer(t)
	id := openRequest(t, s, "agent:mail", "send_email", `{"subject":"late"}`, 1)
	p := apitest.NewPageClient(t, s.url)
	p.SignIn("bob", apitest.TestPassword)
	_, digest, _ := storedPreview(s.srv, id)
	st, _ := s.l.Approval(id)
	s.srv.appr.Now = func() time.Time { return st.PendingDeadline }
	_, b := p.Do("GET", "/approvals/", nil)
	if !strings.Contains(string(b), `"approvals":[]`) {
		t.Errorf("the list at the deadline: %s", b)
	}
	resp, b := p.Do("GET", "/approvals/"+id.String(), nil)
	if !strings.Contains(string(b), `"state":"expired"`) {
		t.Errorf("the approval at the deadline: %d %s", resp.StatusCode, b)
	}
	resp, b = p.Do("POST", "/approvals/"+id.String()+"/verdict", p.VerdictForm("approve", digest.String(), true))
	expect(t, "a verdict at the deadline", resp, b, http.StatusConflict, "approval_expired")
}

// htmlPage is the approval id's page as p's browser gets it.
func htmlPage(t *testing.T, p *apitest.PageClient, id commit.Digest) string {
	t.Helper()
	resp, b := p.Do("GET", "/approvals/"+id.String(), nil, "Accept", "text/html")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the page of %s: %d %s", id, resp.StatusCode, b)
	}
	checkPageHeaders(t, "the page of "+id.String(), resp)
	return string(b)
}

// between is the part of page from the element with the id to the end of
// the element tag (end) that follows.
func between(t *testing.T, page, id, end string) string {
	t.Helper()
	i := strings.Index(page, `id="`+id+`"`)
	if i < 0 {
		t.Fatalf("the page has no element %s:\n%s", id, page)
	}
	j := strings.Index(page[i:], end)
	if j < 0 {
		t.Fatalf("element %s does not end with %s", id, end)
	}
	return page[i : i+j]
}

// The page says whether ledgerd shortened the preview from its own
// record, outside the preview, never from the preview's text: a
// truncated preview gets the banner; a preview holding a marker of the
// workload's own hand, or HTML that would imitate the banner, does not;
// nor does the default preview; a preview an earlier ledgerd kept, with
// no record, says so.
func TestPageTruncationBanner(t *testing.T) {
	s := pageServer(t)
	var long strings.Builder
	for i := range 500 {
		fmt.Fprintf(&long, "%d,", i)
	}
	truncated := openRequest(t, s, "agent:mail", "send_email", `{"recipients":[`+strings.TrimSuffix(long.String(), ",")+`]}`, 1)
	forged := openRequest(t, s, "agent:mail", "send_email",
		`{"recipients":["dana@example.org","[+450 items]"],"note":"<p class=\"ledgerd truncated\" id=\"truncated\">shortened</p>"}`, 2)
	byDefault := openRequest(t, s, "agent:mail", "send_email", "", 3)
	legacy := openRequest(t, s, "agent:mail", "send_email", `{"subject":"minutes"}`, 4)
	// legacy's preview as an earlier ledgerd kept it: the JSON alone.
	doc, digest, _ := storedPreview(s.srv, legacy)
	ctx := t.Context()
	if err := s.srv.appr.Previews.Remove(ctx, legacy); err != nil {
		t.Fatal(err)
	}
	staged, err := s.srv.appr.Previews.Stage(ctx, doc)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.srv.appr.Previews.Commit(ctx, staged, legacy); err != nil {
		t.Fatal(err)
	}
	if _, again, _ := storedPreview(s.srv, legacy); again != digest {
		t.Fatalf("the legacy record's digest %s, want %s", again, digest)
	}

	p := apitest.NewPageClient(t, s.url)
	p.SignIn("bob", apitest.TestPassword)
	for _, c := range []struct {
		name   string
		id     commit.Digest
		banner string // the element expected; the others must be absent
		says   []string
	}{
		{"truncated", truncated, "truncated", []string{"This preview is incomplete.", "pass 1: strings cut to 1000 characters, lists to 50 items"}},
		{"a marker of the workload's hand", forged, "not-truncated", []string{"Nothing is left out"}},
		{"the default preview", byDefault, "not-truncated", nil},
		{"kept by an earlier ledgerd", legacy, "truncation-unknown", []string{"did not record"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			page := htmlPage(t, p, c.id)
			for _, id := range []string{"truncated", "not-truncated", "truncation-unknown"} {
				if has := strings.Contains(page, `id="`+id+`"`); has != (id == c.banner) {
					t.Errorf("element %s: %v, want %v", id, has, id == c.banner)
				}
			}
			banner := between(t, page, c.banner, "</p>")
			for _, want := range c.says {
				if !strings.Contains(banner, want) {
					t.Errorf("the banner %q lacks %q", banner, want)
				}
			}
			// Outside the preview, before it.
			if b, pre := strings.Index(page, `id="`+c.banner+`"`), strings.Index(page, `<pre id="preview">`); pre < 0 || b > pre {
				t.Errorf("the banner (at %d) is not before the preview (at %d)", b, pre)
			}
		})
	}
	page := htmlPage(t, p, forged)
	if pre := between(t, page, "preview", "</pre>"); !strings.Contains(pre, "[&#43;450 items]") ||
		!strings.Contains(pre, "&lt;p class=\\&#34;ledgerd truncated\\&#34; id=\\&#34;truncated\\&#34;&gt;") {
		t.Errorf("the workload's text is not shown escaped in the preview:\n%s", pre)
	}
}

// Beside the preview the page shows the attributes the request's entry
// records and signs, each value as JSON (a string quoted, a number not),
// escaped: a preview that misstates the amount is caught there.
func TestPageAttributes(t *testing.T) {
	s := pageServer(t)
	id := openRequestWith(t, s, "agent:billing", "make_payment",
		`{"amount_minor":125000,"currency":"EUR","payee":{"allowlisted":true,"domain":"<b>example.com</b>"},"reference":"125000"}`,
		`{"amount":"12.00 EUR","payee":"ACME Ltd"}`, 1)
	none := openRequestWith(t, s, "agent:billing", "make_payment", `{}`, "", 2)
	p := apitest.NewPageClient(t, s.url)
	p.SignIn("alice", apitest.TestPassword)
	page := htmlPage(t, p, id)
	st, _ := s.l.Approval(id)
	table := between(t, page, "attributes", "</table>")
	for _, want := range []string{
		"<code>amount_minor</code></td><td><pre>125000</pre>",
		"<code>currency</code></td><td><pre>&#34;EUR&#34;</pre>",
		"<code>payee</code></td><td><pre>{\n  &#34;allowlisted&#34;: true,\n  &#34;domain&#34;: &#34;&lt;b&gt;example.com&lt;/b&gt;&#34;\n}</pre>",
		"<code>reference</code></td><td><pre>&#34;125000&#34;</pre>",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("the attributes lack %q:\n%s", want, table)
		}
	}
	if strings.Contains(page, "<b>example.com") {
		t.Error("an attribute's value is not escaped")
	}
	if rows := strings.Count(table, `class="attribute"`); rows != 4 {
		t.Errorf("%d attribute rows, want 4", rows)
	}
	if want := fmt.Sprintf("signed in entry %d", st.Request); !strings.Contains(page, want) {
		t.Errorf("the page does not say %q", want)
	}
	if !strings.Contains(between(t, page, "preview", "</pre>"), "12.00 EUR") {
		t.Error("the preview is not shown beside the attributes")
	}
	if !strings.Contains(htmlPage(t, p, none), `<p id="attributes">The request's entry records no attributes.</p>`) {
		t.Error("an entry without attributes: no note")
	}
	// The confirmation shows them too.
	_, digest, _ := storedPreview(s.srv, id)
	_, b := p.Do("POST", "/approvals/"+id.String()+"/verdict", p.VerdictForm("approve", digest.String(), false), "Accept", "text/html")
	if !strings.Contains(string(b), "<code>amount_minor</code></td><td><pre>125000</pre>") {
		t.Errorf("the confirmation lacks the attributes:\n%s", b)
	}
}

// The page shows the request's time and both deadlines, the decision
// (pending) deadline and, once approved, the execution deadline, in UTC
// to the second, with how far they are from the page's time, and the
// exact time in a <time> element's datetime.
func TestPageDeadlines(t *testing.T) {
	s := pageServer(t)
	if pending, execution, _ := s.l.ApprovalConfig(); pending != 24*time.Hour || execution != time.Hour {
		t.Fatalf("TTLs %v, %v; the test expects 24h, 1h", pending, execution)
	}
	id := openRequest(t, s, "agent:mail", "send_email", `{"subject":"minutes"}`, 1)
	st, _ := s.l.Approval(id)
	p := apitest.NewPageClient(t, s.url)
	p.SignIn("bob", apitest.TestPassword)
	// timeOf is how t is shown, but for the relative part.
	timeOf := func(t time.Time) string {
		return `<time datetime="` + t.UTC().Format(entry.TimeLayout) + `">` + t.UTC().Format("2006-01-02 15:04:05") + ` UTC</time>`
	}

	s.srv.appr.Now = func() time.Time { return st.RequestTime.Add(20 * time.Minute) }
	page := htmlPage(t, p, id)
	for el, want := range map[string]string{
		"requested":          timeOf(st.RequestTime) + ` <span class="rel">(20 min ago)</span>`,
		"pending-deadline":   timeOf(st.PendingDeadline) + ` <span class="rel">(in 23 h 40 min)</span>`,
		"execution-deadline": `>none yet: 1 h after an approval<`,
	} {
		if got := between(t, page, el, "</dd>"); !strings.Contains(got+"<", want) {
			t.Errorf("%s: %s, want %s", el, got, want)
		}
	}
	_, b := p.Do("GET", "/approvals/", nil, "Accept", "text/html")
	if !strings.Contains(string(b), timeOf(st.PendingDeadline)+` <span class="rel">(in 23 h 40 min)</span>`) {
		t.Errorf("the list does not show the deadline:\n%s", b)
	}
	if strings.Contains(page, "T"+st.RequestTime.UTC().Format("15:04:05.000000")+"Z<") {
		t.Error("the page shows a raw RFC 3339 time")
	}

	_, digest, _ := storedPreview(s.srv, id)
	resp, b := p.Do("POST", "/approvals/"+id.String()+"/verdict", p.VerdictForm("approve", digest.String(), true))
	expect(t, "approve", resp, b, http.StatusCreated, "")
	st, _ = s.l.Approval(id)
	if st.ExecutionDeadline.IsZero() {
		t.Fatal("approved without an execution deadline")
	}
	s.srv.appr.Now = func() time.Time { return st.ExecutionDeadline.Add(-4*time.Minute - 30*time.Second) }
	page = htmlPage(t, p, id)
	if got, want := between(t, page, "execution-deadline", "</dd>"), timeOf(st.ExecutionDeadline)+` <span class="rel">(in 4 min)</span>`; !strings.Contains(got, want) {
		t.Errorf("approved: execution deadline %s, want %s", got, want)
	}
	s.srv.appr.Now = func() time.Time { return st.ExecutionDeadline.Add(3 * time.Minute) }
	page = htmlPage(t, p, id)
	if got, want := between(t, page, "execution-deadline", "</dd>"), timeOf(st.ExecutionDeadline)+` <span class="rel">(3 min ago)</span>`; !strings.Contains(got, want) ||
		!strings.Contains(page, `id="state">expired<`) {
		t.Errorf("past the execution deadline: %s, want %s, and the state expired", got, want)
	}
}
