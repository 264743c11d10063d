package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/decisionledger/ledger/approval/approver"
	"github.com/decisionledger/ledger/internal/apitest"
)

// TestDaemonApprovalKill9 runs the real ledgerd: each round opens an
// approval (a mediator's needs_approval decision with a preview), has a
// person approve it through the approver's page (its JSON answers, as
// curl would), kills ledgerd with SIGKILL between the approval and the
// consumption, and after the restart 64 mediators' requests race to
// consume it: exactly one is consumed (201), 63 are refused
// approval_consumed. Then ledgerd is killed again right after that
// acknowledgement: after the restart a 65th consumption is refused, and
// the winner's retry with its Idempotency-Key gets the same entry. At the
// end, ledger-verify approvals finds every lifecycle in the export sound.
func TestDaemonApprovalKill9(t *testing.T) {
	t.Parallel() // a process of its own on its own directory and port
	if testing.Short() {
		t.Skip("builds and runs ledgerd")
	}
	ledgerd, ledgerVerify := buildBinaries(t)
	dir := t.TempDir()
	d := startDaemon(t, ledgerd, dir) // makes the data directory and a mediator token
	d.cmd.Process.Kill()
	d.cmd.Wait()
	const password = "kill-nine approver password"
	hash, err := approver.HashPassword(password)
	if err != nil {
		t.Fatal(err)
	}
	setConfig(t, dir, map[string]any{"approvals": map[string]any{
		"approvers": []map[string]any{{"name": "approver-1", "password_argon2id": hash, "actions": []string{"*"}}},
	}})
	token, err := os.ReadFile(filepath.Join(dir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer hc.CloseIdleConnections()
	running := func() *process {
		t.Helper()
		return startDaemon(t, ledgerd, dir)
	}
	kill := func(d *process) {
		t.Helper()
		d.cmd.Process.Kill()
		d.cmd.Wait()
		hc.CloseIdleConnections()
	}
	post := func(u, key, body string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest("POST", u, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+string(token))
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Errorf("POST %s: %v", u, err)
			return 0, nil
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}

	const rounds = 5
	for round := range rounds {
		d := running()
		base := "http://" + d.addr
		q := apitest.PayRequest(250_000 + round)
		status, body := post(base+"/v1/entries", "", q.AppendBody("needs_approval", fmt.Sprintf(`{"payee":"billing@example.com","round":%d}`, round)))
		var op apitest.Opened
		if status != http.StatusCreated || json.Unmarshal(body, &op) != nil || op.Approval.ID == "" {
			t.Fatalf("round %d: opening: %d %s", round, status, body)
		}
		approveOnPage(t, base, op.Approval.ID, op.Approval.PreviewDigest, password)
		kill(d) // between the approval and the consumption

		d = running()
		base = "http://" + d.addr
		consume := base + "/v1/approvals/" + op.Approval.ID + "/consume"
		type answer struct {
			status int
			body   []byte
		}
		answers := make([]answer, 64)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range answers {
			wg.Go(func() {
				<-start
				s, b := post(consume, fmt.Sprintf("round-%d-mediator-%d", round, i), q.ConsumeBody())
				answers[i] = answer{s, b}
			})
		}
		close(start)
		wg.Wait()
		winner, consumed := -1, 0
		for i, a := range answers {
			switch {
			case a.status == http.StatusCreated:
				winner = i
			case a.status == http.StatusConflict && errorCode(a.body) == "approval_consumed":
				consumed++
			default:
				t.Errorf("round %d: consumption %d: %d %s", round, i, a.status, a.body)
			}
		}
		if winner < 0 || consumed != 63 {
			t.Fatalf("round %d: %d refused approval_consumed and winner %d; want exactly one 201 and 63 refusals", round, consumed, winner)
		}
		var won struct{ Index uint64 }
		json.Unmarshal(answers[winner].body, &won)
		kill(d) // right after the consumption was acknowledged

		d = running()
		base = "http://" + d.addr
		consume = base + "/v1/approvals/" + op.Approval.ID + "/consume"
		if s, b := post(consume, "", q.ConsumeBody()); s != http.StatusConflict || errorCode(b) != "approval_consumed" {
			t.Fatalf("round %d: a consumption after the restart: %d %s", round, s, b)
		}
		s, b := post(consume, fmt.Sprintf("round-%d-mediator-%d", round, winner), q.ConsumeBody())
		var again struct{ Index uint64 }
		if s != http.StatusOK || json.Unmarshal(b, &again) != nil || again.Index != won.Index {
			t.Fatalf("round %d: the winner's retry after the restart: %d %s (consumed at %d)", round, s, b, won.Index)
		}
		if round < rounds-1 {
			kill(d)
			continue
		}
		var cp struct{ Size uint64 }
		apitest.WaitFor(t, "a checkpoint of every entry", func() bool {
			resp, err := hc.Get(base + "/v1/checkpoint")
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			// The checkpoint's second line is its size.
			lines := strings.Split(string(b), "\n")
			return len(lines) > 1 && json.Unmarshal([]byte(lines[1]), &cp.Size) == nil && cp.Size == won.Index+1
		})
		export := filepath.Join(t.TempDir(), "all.ledger")
		resp, err := hc.Get(fmt.Sprintf("%s/v1/export?start=0&end=%d", base, cp.Size))
		if err != nil {
			t.Fatal(err)
		}
		b, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err := os.WriteFile(export, b, 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(ledgerVerify, "approvals", "--key", d.vkey, export).CombinedOutput()
		if err != nil {
			t.Fatalf("ledger-verify approvals: %v\n%s", err, out)
		}
		if !strings.Contains(string(out), fmt.Sprintf("%d consumptions, %d without outcome", rounds, rounds)) {
			t.Errorf("ledger-verify approvals does not count %d consumptions:\n%s", rounds, out)
		}
		kill(d)
	}
}

// approveOnPage signs approver-1 in on the approver's page of the ledgerd
// at base and approves the approval id, whose preview has the digest
// shown, through the page's JSON answers, as curl would.
func approveOnPage(t *testing.T, base, id, shown, password string) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	form := func(path string, v url.Values) (int, []byte) {
		req, _ := http.NewRequest("POST", base+path, strings.NewReader(v.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Accept", "application/json")
		req.Header.Set("Origin", base)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	status, body := form("/approvals/sign-in", url.Values{"name": {"approver-1"}, "password": {password}})
	var session struct{ CSRF string }
	if status != http.StatusOK || json.Unmarshal(body, &session) != nil || session.CSRF == "" {
		t.Fatalf("sign-in: %d %s", status, body)
	}
	status, body = form("/approvals/"+id+"/verdict", url.Values{
		"verdict": {"approve"}, "preview_digest": {shown}, "csrf": {session.CSRF}, "confirm": {"yes"}})
	if status != http.StatusCreated {
		t.Fatalf("approve: %d %s", status, body)
	}
}

// errorCode is the code of an error answer's body.
func errorCode(body []byte) string {
	var e struct{ Error struct{ Code string } }
	json.Unmarshal(body, &e)
	return e.Error.Code
}
