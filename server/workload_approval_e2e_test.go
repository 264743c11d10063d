package server

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/decisionledger/ledger/approval/approver"
	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/config"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/internal/apitest"
)

// buildWorkload builds examples/workload.
func buildWorkload(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "workload")
	if out, err := exec.Command("go", "build", "-o", bin, "../examples/workload").CombinedOutput(); err != nil {
		t.Fatalf("go build workload: %v\n%s", err, out)
	}
	return bin
}

var approvalLine = regexp.MustCompile(`(?m)^ledger:   approval (sha256:[0-9a-f]{64}) pending until `)

// runWorkload runs the workload on external mail (needs_approval under
// the reference policies) against s with args; once it prints the
// approval's id, verdict (if set) is called with it. It returns the
// output and the id.
func runWorkload(t *testing.T, bin string, s *testServer, verdict func(id commit.Digest), args ...string) (string, commit.Digest) {
	t.Helper()
	out, id, err := runWorkloadAt(t, bin, s.url, s, verdict, args...)
	if err != nil {
		t.Fatalf("workload %v: %v\n%s", args, err, out)
	}
	return out, id
}

// runWorkloadAt is runWorkload with the ledger at url (a proxy of s), and
// the workload's exit error.
func runWorkloadAt(t *testing.T, bin, url string, s *testServer, verdict func(id commit.Digest), args ...string) (string, commit.Digest, error) {
	t.Helper()
	dir := t.TempDir()
	params, tokenFile := filepath.Join(dir, "params.json"), filepath.Join(dir, "token")
	os.WriteFile(params, []byte(`{"recipient":"carol@example.org","subject":"Q3","body":"figures"}`), 0o600)
	os.WriteFile(tokenFile, []byte(s.token), 0o600)
	catalog, _ := filepath.Abs(apitest.CorpusDir)
	args = append([]string{"--url", url, "--token-file", tokenFile, "--key", s.key.VerifierKey(),
		"--declaration", filepath.Join(catalog, "send_email.json"), "--decide"}, append(args, params)...)
	cmd := exec.Command(bin, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	kill := time.AfterFunc(60*time.Second, func() { cmd.Process.Kill() })
	defer kill.Stop()
	var out strings.Builder
	var id commit.Digest
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		out.WriteString(line + "\n")
		if m := approvalLine.FindStringSubmatch(line); m != nil {
			if id, err = commit.ParseDigest(m[1]); err != nil {
				t.Fatal(err)
			}
		}
		// The verdict comes once the workload says it waits for one.
		if strings.HasPrefix(line, "mediator: waiting up to ") && verdict != nil {
			verdict(id)
		}
	}
	err = cmd.Wait()
	return out.String() + stderr.String(), id, err
}

// lastEntries returns the last n entries of s's log, parsed.
func lastEntries(t *testing.T, s *testServer, n uint64) []*entry.Entry {
	t.Helper()
	var es []*entry.Entry
	for i := s.l.Size() - n; i < s.l.Size(); i++ {
		b, err := s.l.Entry(context.Background(), i)
		if err != nil {
			t.Fatal(err)
		}
		e, err := entry.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		es = append(es, e)
	}
	return es
}

// TestWorkloadApproval runs examples/workload --decide --wait-approval
// against a ledgerd with approvals on: on approve (the verdict appended
// to the ledger while the workload waits) it consumes the approval with
// the request's terms, acts once and reports the outcome, and the log
// ends with the verdict, the consumption and the outcome; on deny, on
// expiry and without a verdict in time it stops and says why, and the
// log has no consumption; without --wait-approval it stops as before,
// naming the approval and its page.
func TestWorkloadApproval(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the workload")
	}
	bin := buildWorkload(t)
	s := approvalsServer(t)
	ctx := context.Background()
	verdict := func(v entry.Verdict) func(commit.Digest) {
		return func(id commit.Digest) {
			st, ok := s.l.Approval(id)
			if !ok {
				t.Errorf("the ledger does not know approval %s", id)
				return
			}
			shown, err := s.srv.appr.Preview(ctx, s.l, st)
			if err != nil {
				t.Error(err)
				return
			}
			appendVerdict(t, s, id, shown.Digest, v)
		}
	}

	t.Run("approve", func(t *testing.T) {
		previewFile := filepath.Join(t.TempDir(), "preview.json")
		os.WriteFile(previewFile, []byte(`{"to":"carol@example.org","subject":"Q3","body":"figures for the quarter"}`), 0o600)
		out, id := runWorkload(t, bin, s, verdict(entry.Approve), "--wait-approval", "30s", "--preview", previewFile)
		t.Logf("the workload's output:\n%s", out)
		es := lastEntries(t, s, 4)
		request, approval, consumption, outcome := es[0], es[1], es[2], es[3]
		if h, _ := request.Hash(); h != id || request.Decision != entry.NeedsApproval {
			t.Fatalf("the request before the verdict is not approval %s:\n%s", id, out)
		}
		if approval.Kind != entry.KindApproval || approval.Verdict != entry.Approve || approval.ApprovalID != id {
			t.Errorf("entry %d: %+v, want the approve", approval.Index, approval)
		}
		if consumption.Kind != entry.KindConsumption || consumption.ApprovalID != id || consumption.Action != "send_email" ||
			consumption.Principal != request.Principal || !consumption.Params.Equal(request.Params) || consumption.Mediator != request.Mediator {
			t.Errorf("entry %d: %+v, want the consumption of %s on the request's terms", consumption.Index, consumption, id)
		}
		if outcome.Kind != entry.KindOutcome || outcome.ApprovalID != id || outcome.Consumption != consumption.Index ||
			outcome.Result != entry.Succeeded || !strings.HasPrefix(outcome.OperationID, "op-") {
			t.Errorf("entry %d: %+v, want the outcome succeeded of consumption %d", outcome.Index, outcome, consumption.Index)
		}
		for _, want := range []string{
			"ledger:   decided needs_approval by [email.approval-external]",
			"approver: " + s.url + "/approvals/" + id.String(),
			"ledger:   approved by alice (entry " + itoa(approval.Index) + ")",
			"ledger:   consumed approval " + id.String() + " (entry " + itoa(consumption.Index) + ")",
			"mediator: approved by alice: acting on send_email",
			"ledger:   outcome succeeded, operation " + outcome.OperationID + " (entry " + itoa(outcome.Index) + ")",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("the output lacks %q:\n%s", want, out)
			}
		}
		if strings.Contains(out, "not acting") {
			t.Errorf("approved, but not acting:\n%s", out)
		}
	})

	noConsumption := func(t *testing.T, out string, id commit.Digest) {
		t.Helper()
		if st, _ := s.l.Approval(id); st.Consumed {
			t.Errorf("approval %s consumed:\n%s", id, out)
		}
		if strings.Contains(out, "acting on") || strings.Contains(out, "consum") {
			t.Errorf("acted against the verdict:\n%s", out)
		}
	}
	t.Run("deny", func(t *testing.T) {
		out, id := runWorkload(t, bin, s, verdict(entry.Reject), "--wait-approval", "30s")
		last := lastEntries(t, s, 1)[0]
		if last.Kind != entry.KindApproval || last.Verdict != entry.Reject || last.ApprovalID != id {
			t.Errorf("the log does not end with the deny: %+v", last)
		}
		if want := "mediator: denied by alice (entry " + itoa(last.Index) + "): not acting"; !strings.Contains(out, want) {
			t.Errorf("the output lacks %q:\n%s", want, out)
		}
		noConsumption(t, out, id)
	})
	t.Run("no verdict in time", func(t *testing.T) {
		out, id := runWorkload(t, bin, s, nil, "--wait-approval", "300ms")
		if !strings.Contains(out, "mediator: no verdict within 300ms: not acting") {
			t.Errorf("the output lacks the timeout:\n%s", out)
		}
		noConsumption(t, out, id)
	})
	t.Run("without --wait-approval", func(t *testing.T) {
		out, id := runWorkload(t, bin, s, nil)
		for _, want := range []string{"approver: " + s.url + "/approvals/" + id.String(),
			"mediator: needs_approval by email.approval-external: not acting"} {
			if !strings.Contains(out, want) {
				t.Errorf("the output lacks %q:\n%s", want, out)
			}
		}
		noConsumption(t, out, id)
	})
	t.Run("a verdict on another preview", func(t *testing.T) {
		// A ledger that names one preview in the decision's answer while
		// its approver approves another: the workload, which sent no
		// preview, takes the first as given, but the signed verdict
		// names the other, and it stops before consuming.
		digest := regexp.MustCompile(`"preview_digest":"sha256:[0-9a-f]{64}"`)
		proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			req, _ := http.NewRequest(r.Method, s.url+r.URL.RequestURI(), r.Body)
			req.Header = r.Header
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if r.URL.Path == "/v1/decide" {
				b = digest.ReplaceAll(b, []byte(`"preview_digest":"sha256:`+strings.Repeat("7", 64)+`"`))
			}
			w.WriteHeader(resp.StatusCode)
			w.Write(b)
		}))
		defer proxy.Close()
		out, id, err := runWorkloadAt(t, bin, proxy.URL, s, verdict(entry.Approve), "--wait-approval", "30s")
		if err == nil || !strings.Contains(out, "does not verify") || !strings.Contains(out, "approves preview") {
			t.Errorf("exit %v, want a failure naming the preview:\n%s", err, out)
		}
		noConsumption(t, out, id)
	})
	t.Run("expired", func(t *testing.T) {
		short := approvalsServerWith(t, func(a *config.ApprovalsConfig) { a.PendingTTL = "500ms" })
		out, id := runWorkload(t, bin, short, nil, "--wait-approval", "30s")
		if !strings.Contains(out, "mediator: the approval expired (pending deadline ") || !strings.Contains(out, "not acting") {
			t.Errorf("the output lacks the expiry:\n%s", out)
		}
		if st, _ := short.l.Approval(id); st.Consumed || st.Verdict != "" || strings.Contains(out, "consum") {
			t.Errorf("expired approval %s: %+v\n%s", id, st, out)
		}
	})
}

func itoa(i uint64) string { return strconv.FormatUint(i, 10) }

// TestWorkloadApprovalPage runs the workload as TestWorkloadApproval's
// approve case does, with the verdict given by a person through the
// approver's page (its JSON answers): sign in, read the approval and its
// preview, approve with the preview's digest; the workload then
// consumes, acts and reports the outcome.
func TestWorkloadApprovalPage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the workload")
	}
	const password = "correct horse battery staple 4417"
	hash, err := approver.HashPassword(password)
	if err != nil {
		t.Fatal(err)
	}
	s := approvalsServerWith(t, func(a *config.ApprovalsConfig) {
		a.Approvers = []approver.Approver{{Name: "dana", PasswordHash: hash, Actions: []string{"send_email"}}}
	})
	bin := buildWorkload(t)
	jar, _ := cookiejar.New(nil)
	page := &http.Client{Jar: jar}
	do := func(method, path string, form url.Values) map[string]any {
		t.Helper()
		req, _ := http.NewRequest(method, s.url+path, strings.NewReader(form.Encode()))
		req.Header.Set("Accept", "application/json")
		req.Header.Set("Origin", s.url)
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		resp, err := page.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var v map[string]any
		if resp.StatusCode/100 != 2 || json.Unmarshal(b, &v) != nil {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
		}
		return v
	}
	signedIn := do("POST", "/approvals/sign-in", url.Values{"name": {"dana"}, "password": {password}})
	csrf, _ := signedIn["csrf"].(string)

	var shown string
	out, id := runWorkload(t, bin, s, func(id commit.Digest) {
		a := do("GET", "/approvals/"+id.String(), nil)
		shown, _ = a["preview_digest"].(string)
		do("POST", "/approvals/"+id.String()+"/verdict", url.Values{"verdict": {"approve"},
			"preview_digest": {shown}, "csrf": {csrf}, "confirm": {"yes"}})
	}, "--wait-approval", "30s")
	es := lastEntries(t, s, 3)
	if es[0].Kind != entry.KindApproval || es[0].Approver != "dana" || es[0].PreviewDigest.String() != shown ||
		es[1].Kind != entry.KindConsumption || es[1].ApprovalID != id ||
		es[2].Kind != entry.KindOutcome || es[2].Result != entry.Succeeded || es[2].Consumption != es[1].Index {
		t.Errorf("the log does not end with dana's verdict, the consumption and the outcome: %+v %+v %+v\n%s", es[0], es[1], es[2], out)
	}
	if !strings.Contains(out, "mediator: approved by dana: acting on send_email") || !strings.Contains(out, "ledger:   outcome succeeded") {
		t.Errorf("the workload did not act and report:\n%s", out)
	}
}
