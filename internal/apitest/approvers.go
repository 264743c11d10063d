package apitest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"

	"github.com/decisionledger/ledger/approval/approver"
)

// The approvers of the page's tests. Their password hash is
// docs/approvals.md's worked example (libargon2 gives it too).
const (
	TestPassword     = "correct horse battery staple"
	TestPasswordHash = "$argon2id$v=19$m=65536,t=3,p=2$c2FsdHNhbHRzYWx0c2FsdA$qie54+IvXCT/C6ByRYKGNAZGg0sxeR/8LT3gdIvqGyU"
)

// TestApprovers are alice (make_payment and send_email) and bob
// (send_email), both with TestPassword.
func TestApprovers() []approver.Approver {
	return []approver.Approver{
		{Name: "alice", PasswordHash: TestPasswordHash, Actions: []string{"make_payment", "send_email"}},
		{Name: "bob", PasswordHash: TestPasswordHash, Actions: []string{"send_email"}},
	}
}

// PageClient is an approver's client of the page, as curl with a cookie
// jar: JSON answers, and the Origin of the server.
type PageClient struct {
	T      testing.TB
	URL    string
	C      *http.Client
	CSRF   string
	Header http.Header // sent with every request
}

// NewPageClient is a PageClient of the page at url.
func NewPageClient(t testing.TB, url string) *PageClient {
	jar, _ := cookiejar.New(nil)
	return &PageClient{T: t, URL: url, Header: http.Header{"Accept": {"application/json"}, "Origin": {url}},
		C: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// Do sends a request; form, if not nil, is the POST body. header are
// pairs to set (an empty value deletes the header).
func (p *PageClient) Do(method, path string, form url.Values, header ...string) (*http.Response, []byte) {
	p.T.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, p.URL+path, body)
	for k, v := range p.Header {
		req.Header[k] = v
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i+1] == "" {
			req.Header.Del(header[i])
		} else {
			req.Header.Set(header[i], header[i+1])
		}
	}
	resp, err := p.C.Do(req)
	if err != nil {
		p.T.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// SignIn signs name in with password, and keeps the session's CSRF
// token.
func (p *PageClient) SignIn(name, password string) {
	p.T.Helper()
	resp, b := p.Do("POST", "/approvals/sign-in", url.Values{"name": {name}, "password": {password}})
	var ok struct{ Approver, CSRF string }
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &ok) != nil || ok.Approver != name || len(ok.CSRF) != 43 {
		p.T.Fatalf("sign-in of %s: %d %s", name, resp.StatusCode, b)
	}
	p.CSRF = ok.CSRF
}

// VerdictForm is a verdict's form.
func (p *PageClient) VerdictForm(verdict string, digest string, confirm bool) url.Values {
	f := url.Values{"verdict": {verdict}, "preview_digest": {digest}, "csrf": {p.CSRF}}
	if confirm {
		f.Set("confirm", "yes")
	}
	return f
}
