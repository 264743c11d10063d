//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/decisionledger/ledger/approval/preview"
	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/internal/apitest"
	"github.com/decisionledger/ledger/internal/pgtest"
	"github.com/decisionledger/ledger/storage/postgres"
)

// approverBrowser is an approver's browser: the session cookie it got at
// sign-in, sent to whichever instance it asks.
type approverBrowser struct {
	t       *testing.T
	hc      *http.Client
	cookies []*http.Cookie
	csrf    string
}

// do sends a page request to base (GET, or a form POST from the page's
// origin) asking for JSON, with the browser's cookies.
func (b *approverBrowser) do(base, method, path string, form url.Values) (int, []byte) {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, base+path, body)
	req.Header.Set("Accept", "application/json")
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", base)
	}
	for _, c := range b.cookies {
		req.AddCookie(c)
	}
	resp, err := b.hc.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s%s: %v", method, base, path, err)
	}
	defer resp.Body.Close()
	if method == "POST" && path == "/approvals/sign-in" {
		b.cookies = resp.Cookies()
	}
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// shownPreview is GET /approvals/{id}'s preview and digest.
type shownPreview struct {
	State         string          `json:"state"`
	Preview       json.RawMessage `json:"preview"`
	PreviewDigest string          `json:"preview_digest"`
}

func (b *approverBrowser) approval(base, id string) shownPreview {
	b.t.Helper()
	status, body := b.do(base, "GET", "/approvals/"+id, nil)
	var p shownPreview
	if status != http.StatusOK || json.Unmarshal(body, &p) != nil {
		b.t.Fatalf("GET %s/approvals/%s: %d %s", base, id, status, body)
	}
	return p
}

// TestClusterApprovalFailover: approvals on two instances on PostgreSQL.
// An approver signs in on the sequencer a; a mediator opens two
// approvals there, each with a preview; a is killed (SIGKILL) and b takes
// over. On b the approver's session still holds, and b shows the same
// preview bytes with the digest a's answer announced; the approver
// approves one (the verdict records that digest) and denies the other;
// the approved one is consumed. Each preview's row is gone once its
// approval is denied or consumed; signing out on b ends the session in
// the database, for every instance.
func TestClusterApprovalFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two ledgerd instances on PostgreSQL")
	}
	dbURL := pgtest.Shared(t).NewDatabase(t)
	approvals := map[string]any{"approvers": []map[string]any{
		{"name": "alice", "password_argon2id": apitest.TestPasswordHash, "actions": []string{"*"}}}}
	c := newCluster(t, dbURL, clusterSeed(t), map[string]any{"approvals": approvals}, map[string]any{"lease_ttl": "1s"}, "a", "b")
	a, b := c.nodes[0], c.nodes[1]
	c.start(a)
	_, epoch := c.sequencer([]*proc{a}, 0, 30*time.Second)
	c.start(b)
	c.waitReady(b)
	db, err := postgres.Open(t.Context(), dbURL, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	browser := &approverBrowser{t: t, hc: &http.Client{Timeout: 30 * time.Second}}
	defer browser.hc.CloseIdleConnections()
	status, body := browser.do(a.url(), "POST", "/approvals/sign-in", url.Values{"name": {"alice"}, "password": {apitest.TestPassword}})
	var signedIn struct{ CSRF string }
	if status != http.StatusOK || json.Unmarshal(body, &signedIn) != nil || signedIn.CSRF == "" {
		t.Fatalf("sign-in on a: %d %s", status, body)
	}
	browser.csrf = signedIn.CSRF

	open := func(q apitest.MedRequest, key, doc string) apitest.Opened {
		t.Helper()
		ans := c.postPatient(a, key, q.AppendBody("needs_approval", doc))
		if ans.status != http.StatusCreated {
			t.Fatalf("opening %s on a: %d %s %v", key, ans.status, ans.code, ans.err)
		}
		var op apitest.Opened
		// postPatient keeps the receipt only; ask again for the approval
		// member (a replay answers the same).
		req, _ := http.NewRequest("POST", a.url()+"/v1/entries", strings.NewReader(q.AppendBody("needs_approval", doc)))
		req.Header.Set("Authorization", "Bearer "+c.token)
		req.Header.Set("Idempotency-Key", key)
		resp, err := c.patient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(&op); err != nil || resp.StatusCode != http.StatusOK || op.Approval.ID == "" {
			t.Fatalf("the replay of %s on a: %d %v %+v", key, resp.StatusCode, err, op)
		}
		rendered, err := preview.Render([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		if op.Approval.PreviewDigest != rendered.Digest.String() {
			t.Fatalf("%s: the answer announces %s, not the sent preview's digest %s", key, op.Approval.PreviewDigest, rendered.Digest)
		}
		return op
	}
	pay, mail := apitest.PayRequest(4200), apitest.MedRequest{Principal: "agent-2", Action: "send_email", Params: `{"to":"carol@example.org"}`}
	payDoc, mailDoc := `{"amount":"42.00 EUR","payee":"billing@example.com","memo":"failover"}`, `{"to":"carol@example.org","subject":"Q3"}`
	opPay, opMail := open(pay, "clapp-pay", payDoc), open(mail, "clapp-mail", mailDoc)
	onA := browser.approval(a.url(), opPay.Approval.ID)

	a.kill()
	if seq, _ := c.sequencer([]*proc{b}, epoch, 2*takeoverBound); seq != b {
		t.Fatalf("the sequencer after a's kill is %s", seq.name)
	}
	onB := browser.approval(b.url(), opPay.Approval.ID)
	if !bytes.Equal(onB.Preview, onA.Preview) || onB.PreviewDigest != opPay.Approval.PreviewDigest || onA.PreviewDigest != opPay.Approval.PreviewDigest {
		t.Fatalf("after the failover b shows %s (digest %s); a showed %s (digest %s); the answer announced %s",
			onB.Preview, onB.PreviewDigest, onA.Preview, onA.PreviewDigest, opPay.Approval.PreviewDigest)
	}
	rendered, _ := preview.Render([]byte(payDoc))
	if !bytes.Equal(onB.Preview, rendered.JSON) {
		t.Fatalf("b shows %s, not the rendered preview %s", onB.Preview, rendered.JSON)
	}

	verdict := func(op apitest.Opened, v string) *entry.Entry {
		t.Helper()
		status, body := browser.do(b.url(), "POST", "/approvals/"+op.Approval.ID+"/verdict", url.Values{
			"verdict": {v}, "preview_digest": {op.Approval.PreviewDigest}, "csrf": {browser.csrf}, "confirm": {"yes"}})
		var rec appendReceipt
		if status != http.StatusCreated || json.Unmarshal(body, &rec) != nil {
			t.Fatalf("%s on b with the session from a: %d %s", v, status, body)
		}
		e, err := entry.Parse(rec.Entry)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	hasPreview := func(op apitest.Opened) bool {
		t.Helper()
		id, err := commit.ParseDigest(op.Approval.ID)
		if err != nil {
			t.Fatal(err)
		}
		ids, err := db.PreviewIDs(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range ids {
			if x == id {
				return true
			}
		}
		return false
	}
	if e := verdict(opPay, "approve"); e.PreviewDigest.String() != opPay.Approval.PreviewDigest {
		t.Errorf("the verdict records the preview digest %s, the answer announced %s", e.PreviewDigest, opPay.Approval.PreviewDigest)
	}
	if !hasPreview(opPay) {
		t.Error("the approved (not consumed) approval's preview is gone")
	}
	verdict(opMail, "deny")
	if hasPreview(opMail) {
		t.Error("the denied approval's preview is still in approval_previews")
	}

	req, _ := http.NewRequest("POST", b.url()+"/v1/approvals/"+opPay.Approval.ID+"/consume", strings.NewReader(pay.ConsumeBody()))
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Idempotency-Key", "clapp-consume")
	resp, err := c.patient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("consume on b: %d %s", resp.StatusCode, body)
	}
	if hasPreview(opPay) {
		t.Error("the consumed approval's preview is still in approval_previews")
	}

	// Signing out on b ends the session in the database: a, started
	// again, follows and forwards to b, which refuses the cookie.
	if status, body := browser.do(b.url(), "POST", "/approvals/sign-out", url.Values{"csrf": {browser.csrf}}); status != http.StatusOK {
		t.Fatalf("sign-out on b: %d %s", status, body)
	}
	if n, err := db.CountSessions(t.Context()); n != 0 || err != nil {
		t.Errorf("%d sessions in approver_sessions after the sign-out (%v)", n, err)
	}
	c.start(a)
	c.waitReady(a)
	if status, body := browser.do(a.url(), "GET", "/approvals/"+opPay.Approval.ID, nil); status != http.StatusUnauthorized {
		t.Errorf("the signed-out session on a: %d %s, want 401", status, body)
	}
}
