package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
)

// findChromium returns the path of a Chromium to drive, or skips the test
// without one; under LEDGER_CI=1 (.ci/run) it fails instead.
func findChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	const how = "no chromium or chromium-browser on PATH: apt-get install chromium, or run bash .ci/run"
	if os.Getenv("LEDGER_CI") == "1" {
		t.Fatal(how + " (LEDGER_CI=1: the browser test must run)")
	}
	t.Skip(how)
	return ""
}

// browserShots checks and keeps the test's screenshots: each must be a
// PNG of a plausible size whose pixels vary (not a blank page). They are
// written to $LEDGER_SCREENSHOTS if set, else to the test's directory.
type browserShots struct {
	t   *testing.T
	dir string
}

func (b *browserShots) take(ctx context.Context, name string) {
	t := b.t
	t.Helper()
	data, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("screenshot %s is not a PNG: %v", name, err)
	}
	r := img.Bounds()
	if r.Dx() < 400 || r.Dy() < 300 || r.Dx() > 8000 || r.Dy() > 20000 {
		t.Errorf("screenshot %s is %dx%d", name, r.Dx(), r.Dy())
	}
	if n := distinctColors(img); n < 8 {
		t.Errorf("screenshot %s has %d colors: a blank page?", name, n)
	}
	path := filepath.Join(b.dir, name+".png")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s: %dx%d, %d bytes, %s", name, r.Dx(), r.Dy(), len(data), path)
}

// distinctColors counts the colors of img, on a grid, up to 1000.
func distinctColors(img image.Image) int {
	seen := map[[4]uint32]bool{}
	r := img.Bounds()
	for y := r.Min.Y; y < r.Max.Y; y += 3 {
		for x := r.Min.X; x < r.Max.X; x += 3 {
			cr, cg, cb, ca := img.At(x, y).RGBA()
			seen[[4]uint32{cr, cg, cb, ca}] = true
			if len(seen) >= 1000 {
				return len(seen)
			}
		}
	}
	return len(seen)
}

// An approver in a real, headless Chromium: sign in, see the pending
// approval, open it, approve it after the confirmation, deny another, and
// a forged csrf token refused; a mediator's token refused at the page.
// The log then holds the verdicts with the approver and the digest of the
// preview shown.
func TestBrowserApproval(t *testing.T) {
	chromium := findChromium(t)
	start := time.Now()
	s := pageServer(t)
	payment := openRequest(t, s, "agent:billing", "make_payment",
		`{"payee":"ACME <b>Ltd</b>","amount":"1,250.00 EUR","memo":"invoice 2026-117","api_token":"tok-93f1c0de4b7a"}`, 1)
	email := openRequest(t, s, "agent:mail", "send_email", `{"to":"dana@example.org","subject":"Contract draft"}`, 2)
	forged := openRequest(t, s, "agent:mail", "send_email", `{"to":"erin@example.org","subject":"Minutes"}`, 3)

	dir := os.Getenv("LEDGER_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	shots := &browserShots{t: t, dir: dir}

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.WindowSize(1200, 900),
		// On a loaded 2-core machine (the race pass of .ci/run beside
		// other builds) Chromium has taken more than chromedp's default
		// 20 s to print its DevTools address; waiting longer costs
		// nothing when it starts at once.
		chromedp.WSURLReadTimeout(2*time.Minute))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(t.Context(), opts...)
	defer cancelAlloc()
	browser, cancelBrowser := chromedp.NewContext(allocCtx)
	defer cancelBrowser()
	if err := chromedp.Do(browser); err != nil { // start the browser
		t.Fatalf("starting %s: %v", chromium, err)
	}
	ctx, cancel := context.WithTimeout(browser, 60*time.Second)
	defer cancel()
	// step runs one navigation and checks the status of the page it
	// lands on.
	step := func(what string, want int, a chromedp.Action[chromedp.Void]) {
		t.Helper()
		resp, err := chromedp.RunResponse(ctx, a)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if int(resp.Status) != want {
			t.Fatalf("%s: %d %s, want %d", what, resp.Status, resp.StatusText, want)
		}
	}
	text := func(sel string) string { // as in the document, whatever the CSS
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("the text of %s: %v", sel, err)
		}
		return s
	}

	// Sign in.
	step("the sign-in form", 200, chromedp.Navigate(s.url+"/approvals/"))
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.ID("name"), "alice"),
		chromedp.SendKeys(chromedp.ID("password"), testPassword),
	); err != nil {
		t.Fatal(err)
	}
	step("sign-in", 200, chromedp.Click(chromedp.CSS("#sign-in button")))

	// The list: the payment and the two e-mails, with links to each.
	list := text("#approvals")
	for _, want := range []string{"make_payment", "agent:billing", "send_email", "agent:mail"} {
		if !strings.Contains(list, want) {
			t.Errorf("the list lacks %s:\n%s", want, list)
		}
	}
	shots.take(ctx, "1-list")

	// The payment, its preview escaped and pretty-printed.
	step("the approval", 200, chromedp.Click(chromedp.CSS(`a[href="/approvals/`+payment.String()+`"]`)))
	pre := text("#preview")
	if !strings.Contains(pre, `"payee": "ACME <b>Ltd</b>"`) || !strings.Contains(pre, "\n  \"amount\"") {
		t.Errorf("the preview shown:\n%s", pre)
	}
	if strings.Contains(pre, "tok-93f1c0de4b7a") || !strings.Contains(pre, `"api_token": "[REDACTED]"`) {
		t.Error("the preview shows a token the renderer should have redacted")
	}
	if got := text("#state"); got != "pending" {
		t.Errorf("state %q", got)
	}
	digest := text("#preview-digest")
	_, stored, _ := storedPreview(s.srv, payment)
	if digest != stored.String() {
		t.Errorf("the page shows the digest %s, the preview's is %s", digest, stored)
	}
	shots.take(ctx, "2-approval")

	// Approve, confirm.
	size := s.l.Size()
	step("approve", 200, chromedp.Click(chromedp.ID("approve")))
	if h := text("h1"); !strings.Contains(h, "Approve") {
		t.Errorf("the confirmation's heading: %q", h)
	}
	if s.l.Size() != size {
		t.Fatal("the verdict was appended before it was confirmed")
	}
	shots.take(ctx, "3-confirmation")
	step("confirm", 200, chromedp.Click(chromedp.ID("confirm")))
	if got := text("#state"); got != "approved" {
		t.Errorf("after the confirmation the state is %q", got)
	}
	if v := text("#verdict"); !strings.Contains(v, "approve by alice") {
		t.Errorf("the verdict shown: %q", v)
	}
	shots.take(ctx, "4-approved")

	// Deny the e-mail, confirm.
	step("the second approval", 200, chromedp.Navigate(s.url+"/approvals/"+email.String()))
	emailDigest := text("#preview-digest")
	step("deny", 200, chromedp.Click(chromedp.ID("deny")))
	step("confirm the denial", 200, chromedp.Click(chromedp.ID("confirm")))
	if got := text("#state"); got != "denied" {
		t.Errorf("after the denial the state is %q", got)
	}
	if _, _, ok := storedPreview(s.srv, email); ok {
		t.Error("the denied approval's preview is still stored")
	}

	// A forged csrf token in the confirmation's form: 403 csrf, nothing
	// appended.
	step("the third approval", 200, chromedp.Navigate(s.url+"/approvals/"+forged.String()))
	step("approve the third", 200, chromedp.Click(chromedp.ID("approve")))
	if err := chromedp.Do(ctx, chromedp.SetValue(chromedp.CSS(`#confirm-form input[name="csrf"]`), strings.Repeat("x", 43))); err != nil {
		t.Fatal(err)
	}
	size = s.l.Size()
	step("confirm with a forged csrf token", http.StatusForbidden, chromedp.Click(chromedp.ID("confirm")))
	if code := text("#error-code"); code != "csrf" {
		t.Errorf("the forged token's refusal: %q", code)
	}
	shots.take(ctx, "5-csrf-refused")
	if s.l.Size() != size {
		t.Error("a verdict with a forged csrf token was appended")
	}

	// A session, with a mediator's token beside it: 401, nothing appended.
	p := newPageClient(t, s)
	p.signIn("bob", testPassword)
	_, digestForged, _ := storedPreview(s.srv, forged)
	resp, b := p.do("POST", "/approvals/"+forged.String()+"/verdict", p.verdictForm("approve", digestForged.String(), true),
		"Authorization", "Bearer "+s.token)
	expect(t, "a verdict with a mediator's token", resp, b, http.StatusUnauthorized, "bearer_refused")
	if s.l.Size() != size {
		t.Error("a verdict with a mediator's token was appended")
	}

	// The log: each verdict by its approver, on the digest of the preview
	// shown, read back over the API.
	for _, c := range []struct {
		id      commit.Digest
		verdict entry.Verdict
		digest  string
	}{{payment, entry.Approve, digest}, {email, entry.Reject, emailDigest}} {
		st, _ := s.l.Approval(c.id)
		var raw json.RawMessage
		if code := getJSON(t, fmt.Sprintf("%s/v1/entries/%d", s.url, st.VerdictIndex), &raw); code != 200 {
			t.Fatalf("entry %d: %d", st.VerdictIndex, code)
		}
		e, err := entry.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if e.Kind != entry.KindApproval || e.ApprovalID != c.id || e.Approver != "alice" || e.Verdict != c.verdict ||
			e.PreviewDigest.String() != c.digest {
			t.Errorf("the verdict's entry %d: %s", st.VerdictIndex, raw)
		}
	}
	if st, _ := s.l.Approval(forged); st.Verdict != "" {
		t.Errorf("the third approval has a verdict: %+v", st)
	}
	t.Logf("the browser test took %v", time.Since(start).Round(time.Millisecond))
}
