package apitest

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/commit/declare"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/internal/referencecalls"
	"github.com/decisionledger/ledger/ledger"
)

// AppendBody is the i-th append request of the tests: a payment by
// agent-1 that its mediator allowed.
func AppendBody(i int) string {
	c, _ := commit.Params([]byte(fmt.Sprintf(`{"to":"user%d@example.com","amount_minor":%d}`, i, i)))
	tiers := commit.Digest(sha256.Sum256([]byte("tiers")))
	return fmt.Sprintf(`{"principal":"agent-1","action":"make_payment","decision":"allow","policies":["payments.limit"],`+
		`"params_digest":"%s","params_size":%d,"tiers_digest":"%s","attributes":{"amount_minor":%d,"payee_known":true}}`,
		c.Digest, c.Size, tiers, i)
}

// Record is the ledger record of the append request body of mediator
// "local", for tests that append without HTTP: its members read in the
// commitment's strict domain, as ledgerd reads them.
func Record(t testing.TB, body string) ledger.Record {
	t.Helper()
	obj, err := commit.Domain{}.Object([]byte(body))
	if err != nil {
		t.Error(err)
		return ledger.Record{Mediator: "local"}
	}
	text := func(name string) string {
		v, _ := obj.Get(name)
		s, _ := v.Text()
		return s
	}
	rec := ledger.Record{Mediator: "local", Principal: text("principal"), Action: text("action"), Decision: entry.Decision(text("decision"))}
	if v, ok := obj.Get("policies"); ok {
		rec.Policies, _ = v.TextList()
	}
	if v, ok := obj.Get("attributes"); ok {
		rec.Attributes = v.Canonical()
	}
	if v, ok := obj.Get("params_size"); ok {
		n, _ := v.Integer()
		rec.Params.Size = int(n)
	}
	rec.Params.Digest, rec.Params.Hiding, _ = commit.ParseParamsDigest(text("params_digest"))
	rec.Tiers, _ = commit.ParseDigest(text("tiers_digest"))
	return rec
}

// OutcomePath is the path of the outcome of the allow decision at index.
func OutcomePath(index uint64) string { return fmt.Sprintf("/v1/entries/%d/outcome", index) }

// AppendWith posts AppendBody(i) to url's /v1/entries with token and
// returns the status.
func AppendWith(t testing.TB, url, token string, i int) int {
	t.Helper()
	req, _ := http.NewRequest("POST", url+"/v1/entries", strings.NewReader(AppendBody(i)))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// AppendN appends AppendBody(from) to AppendBody(from+n-1) at url with
// token, then has l, the ledger url serves, publish a checkpoint, and
// returns its size.
func AppendN(t testing.TB, url, token string, l *ledger.Ledger, from, n int) uint64 {
	t.Helper()
	for i := from; i < from+n; i++ {
		req, _ := http.NewRequest("POST", url+"/v1/entries", strings.NewReader(AppendBody(i)))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("append %d: %s %s", i, resp.Status, b)
		}
	}
	if _, err := l.Publish(t.Context()); err != nil {
		t.Fatal(err)
	}
	_, size := l.Checkpoint()
	return size
}

// CosignedCheckpoint fetches url's /v1/checkpoint and its
// Ledger-Cosignatures.
func CosignedCheckpoint(t testing.TB, url string) ([]byte, int) {
	t.Helper()
	resp, err := http.Get(url + "/v1/checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	n, err := strconv.Atoi(resp.Header.Get("Ledger-Cosignatures"))
	if resp.StatusCode != 200 || err != nil {
		t.Fatalf("GET /v1/checkpoint: %s, Ledger-Cosignatures %q", resp.Status, resp.Header.Get("Ledger-Cosignatures"))
	}
	return b, n
}

// WaitCosignatures waits until the latest checkpoint url serves, of
// size, has n cosignatures, and returns it.
func WaitCosignatures(t testing.TB, url string, size uint64, n int) []byte {
	t.Helper()
	var cp []byte
	WaitUntil(t, fmt.Sprintf("%d cosignatures on the checkpoint of size %d", n, size), func() bool {
		var got int
		cp, got = CosignedCheckpoint(t, url)
		return got == n && bytes.Contains(cp, []byte(fmt.Sprintf("\n%d\n", size)))
	})
	return cp
}

// AppendRequestBody is agent-1's append of action as minimized in res,
// allowed by p.one, with attributes in place of res's if not empty.
func AppendRequestBody(action string, res declare.Result, attributes string) string {
	if attributes == "" {
		attributes = string(res.Attributes)
	}
	return fmt.Sprintf(`{"principal":"agent-1","action":%q,"decision":"allow","policies":["p.one"],`+
		`"params_digest":"%s","params_size":%d,"tiers_digest":"%s","attributes":%s}`,
		action, res.Params.DigestText(), res.Params.Size, res.Tiers, attributes)
}

// CopyPolicies copies the reference policy set into a new directory, for
// a test to change.
func CopyPolicies(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	files, _ := filepath.Glob(filepath.Join(ReferencePolicies, "*.cedar"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// DenyAllPayments is a policy that, added to the reference set, makes
// every make_payment deny.
const DenyAllPayments = "\n@id(\"payments.freeze\")\nforbid (principal, action == Action::\"make_payment\", resource);\n"

// MinimizeCall minimizes a reference call with the reference catalog's
// declaration of its action, as the call's mediator would.
func MinimizeCall(t testing.TB, c referencecalls.Call) declare.Result {
	t.Helper()
	decls, err := referencecalls.Declarations(CorpusDir)
	if err != nil {
		t.Fatal(err)
	}
	res, err := referencecalls.Minimize(decls, c)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// DecideBody is the decide request of a reference call.
func DecideBody(t testing.TB, c referencecalls.Call) string {
	t.Helper()
	return DecideRequestBody(c.Principal, c.Action, MinimizeCall(t, c))
}

// DecideRequestBody is the decide request of principal's action, as
// minimized in res.
func DecideRequestBody(principal, action string, res declare.Result) string {
	return fmt.Sprintf(`{"principal":%q,"action":%q,"params_digest":"%s","params_size":%d,"tiers_digest":"%s","attributes":%s}`,
		principal, action, res.Params.DigestText(), res.Params.Size, res.Tiers, res.Attributes)
}

// Payment is the reference call of a small payment to a known payee:
// allow under the reference set, deny with DenyAllPayments.
func Payment(t testing.TB) string {
	return DecideBody(t, referencecalls.Call{Principal: "agent-1", Action: "make_payment", Params: referencecalls.Pay(5000, "EUR", "payee-0001")})
}

// Decided is a decide answer.
type Decided struct {
	Decision     entry.Decision  `json:"decision"`
	Policies     []string        `json:"policies"`
	PolicyErrors []string        `json:"policy_errors"`
	PolicySet    string          `json:"policy_set"`
	Index        uint64          `json:"index"`
	Entry        json.RawMessage `json:"entry"`
}

// DecideOn posts body to url's /v1/decide and returns the status, the
// answer (if 200 or 201) and the raw body.
func DecideOn(t testing.TB, url, token, body string, headers ...string) (int, Decided, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url+"/v1/decide", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var d Decided
	if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusCreated {
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("decide answer: %v\n%s", err, b)
		}
		if resp.StatusCode == http.StatusOK && resp.Header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("200 without Idempotent-Replayed")
		}
	}
	return resp.StatusCode, d, string(b)
}

// MedRequest is the terms of a request: its principal, action and raw
// parameters (whose digest and size the mediator sends).
type MedRequest struct {
	Principal, Action string
	Params            string
	// Openings, if set, make the commitment a hiding one (version 2)
	// under these openings; a *commit.Disclosure of an earlier call
	// commits again as that call did.
	Openings commit.OpeningSource
}

// Commitment is q's parameter commitment.
func (q MedRequest) Commitment() commit.Commitment {
	if q.Openings != nil {
		c, _, err := commit.Hide([]byte(q.Params), q.Openings)
		if err != nil {
			panic(err)
		}
		return c
	}
	c, err := commit.Params([]byte(q.Params))
	if err != nil {
		panic(err)
	}
	return c
}

// PayRequest is a payment of amount to an example.com payee by agent-1.
func PayRequest(amount int) MedRequest {
	return MedRequest{Principal: "agent-1", Action: "make_payment", Params: fmt.Sprintf(`{"amount_minor":%d,"payee":"billing@example.com"}`, amount)}
}

// AppendBody is q's append with decision and, if not empty, preview.
func (q MedRequest) AppendBody(decision, preview string) string {
	c := q.Commitment()
	tiers := commit.Digest(sha256.Sum256([]byte("tiers")))
	b := fmt.Sprintf(`{"principal":%q,"action":%q,"decision":%q,"policies":["payments.approval"],"params_digest":"%s","params_size":%d,"tiers_digest":"%s","attributes":{"amount_minor":1}`,
		q.Principal, q.Action, decision, c.DigestText(), c.Size, tiers)
	if preview != "" {
		b += `,"preview":` + preview
	}
	return b + "}"
}

// ConsumeBody is the consume request of q's terms.
func (q MedRequest) ConsumeBody() string {
	c := q.Commitment()
	return fmt.Sprintf(`{"action":%q,"principal":%q,"params_digest":"%s","params_size":%d}`, q.Action, q.Principal, c.DigestText(), c.Size)
}

// Opened is the answer of a needs_approval append or decide.
type Opened struct {
	Approval struct {
		ID              string `json:"id"`
		PendingDeadline string `json:"pending_deadline"`
		PreviewDigest   string `json:"preview_digest"`
	} `json:"approval"`
	Decision string          `json:"decision"`
	Index    uint64          `json:"index"`
	Entry    json.RawMessage `json:"entry"`
}

// Healthz is a GET /healthz request, written by hand.
const Healthz = "GET /healthz HTTP/1.1\r\nHost: example.com\r\n\r\n"

// PartialAppend is the header of an append announcing a 1,000-byte body,
// and the body's first bytes.
func PartialAppend(authorization string) string { return PartialPost("/v1/entries", authorization) }

// PartialPost is PartialAppend to another path.
func PartialPost(path, authorization string) string {
	h := "POST " + path + " HTTP/1.1\r\nHost: example.com\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n"
	if authorization != "" {
		h += "Authorization: " + authorization + "\r\n"
	}
	return h + "\r\n" + `{"principal":"agent-1",`
}
