package server

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
	"github.com/decisionledger/ledger/internal/apitest"
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

// element takes a screenshot of the element sel, kept as take keeps
// the page's.
func (b *browserShots) element(ctx context.Context, name, sel string) image.Image {
	t := b.t
	t.Helper()
	data, err := chromedp.Run(ctx, chromedp.Screenshot(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("screenshot %s of %s: %v", name, sel, err)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("screenshot %s is not a PNG: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(b.dir, name+".png"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return img
}

// dominantColor is the most frequent color of img (8 bits a channel), on
// a grid, and the share of the grid's points it has.
func dominantColor(img image.Image) ([3]uint8, float64) {
	count := map[[3]uint8]int{}
	n := 0
	r := img.Bounds()
	for y := r.Min.Y; y < r.Max.Y; y += 2 {
		for x := r.Min.X; x < r.Max.X; x += 2 {
			cr, cg, cb, _ := img.At(x, y).RGBA()
			count[[3]uint8{uint8(cr >> 8), uint8(cg >> 8), uint8(cb >> 8)}]++
			n++
		}
	}
	var best [3]uint8
	for c, k := range count {
		if k > count[best] || k == count[best] && bytes.Compare(c[:], best[:]) < 0 {
			best = c
		}
	}
	return best, float64(count[best]) / float64(max(n, 1))
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
	payment := openRequestWith(t, s, "agent:billing", "make_payment",
		`{"amount_minor":125000,"currency":"EUR","payee":{"allowlisted":true,"domain":"acme.example.com"}}`,
		`{"payee":"ACME <b>Ltd</b>","amount":"1,250.00 EUR","memo":"invoice 2026-117","api_token":"tok-93f1c0de4b7a"}`, 1)
	// The e-mail's preview is shortened: 80 recipients, 50 shown.
	var recipients []string
	for i := range 80 {
		recipients = append(recipients, fmt.Sprintf(`"member%02d@example.org"`, i))
	}
	email := openRequest(t, s, "agent:mail", "send_email",
		`{"to":[`+strings.Join(recipients, ",")+`],"subject":"Contract draft"}`, 2)
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
		chromedp.SendKeys(chromedp.ID("password"), apitest.TestPassword),
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
	// Beside the preview, the attributes the request's entry signs, as
	// JSON; ledgerd's note that the preview is whole; the deadlines, in
	// <time> elements carrying the exact times.
	if attrs := text("#attributes"); !strings.Contains(attrs, "amount_minor125000") || !strings.Contains(attrs, `currency"EUR"`) {
		t.Errorf("the attributes shown:\n%s", attrs)
	}
	preBox, err := chromedp.Run(ctx, chromedp.Dimensions(chromedp.ID("preview")))
	if err != nil {
		t.Fatal(err)
	}
	attrBox, err := chromedp.Run(ctx, chromedp.Dimensions(chromedp.ID("attributes")))
	if err != nil {
		t.Fatal(err)
	}
	if attrBox.Border[0] < preBox.Border[2] || attrBox.Border[1] > preBox.Border[5] {
		t.Errorf("the attributes (x %.0f, y %.0f) are not beside the preview (right %.0f, bottom %.0f)", attrBox.Border[0], attrBox.Border[1], preBox.Border[2], preBox.Border[5])
	}
	if note := text("#not-truncated"); !strings.Contains(note, "Nothing is left out") {
		t.Errorf("the preview's note: %q", note)
	}
	st, _ := s.l.Approval(payment)
	for sel, want := range map[string]time.Time{"#requested time": st.RequestTime, "#pending-deadline time": st.PendingDeadline} {
		at, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS(sel), "datetime"))
		if err != nil || at.Value != want.UTC().Format(entry.TimeLayout) {
			t.Errorf("%s: datetime %q (%v), want %s", sel, at.Value, err, want.UTC().Format(entry.TimeLayout))
		}
		if got := text(sel); got != want.UTC().Format("2006-01-02 15:04:05 UTC") {
			t.Errorf("%s shows %q", sel, got)
		}
	}
	if got := text("#pending-deadline"); !strings.Contains(got, "(in 23 h 59 min)") && !strings.Contains(got, "(in 23 h 58 min)") {
		t.Errorf("the decision deadline: %q", got)
	}
	if got := text("#execution-deadline"); got != "none yet: 1 h after an approval" {
		t.Errorf("the execution deadline before a verdict: %q", got)
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
	st, _ = s.l.Approval(payment)
	if at, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS("#execution-deadline time"), "datetime")); err != nil ||
		st.ExecutionDeadline.IsZero() || at.Value != st.ExecutionDeadline.UTC().Format(entry.TimeLayout) {
		t.Errorf("the execution deadline once approved: datetime %q (%v), want %s", at.Value, err, st.ExecutionDeadline.UTC().Format(entry.TimeLayout))
	}
	if got := text("#execution-deadline"); !strings.Contains(got, "(in 59 min)") && !strings.Contains(got, "(in 58 min)") {
		t.Errorf("the execution deadline once approved: %q", got)
	}
	shots.take(ctx, "4-approved")

	// Deny the e-mail, confirm.
	// The e-mail: its preview shortened, ledgerd's banner above it, in
	// colors no preview text can take (the preview is plain text on
	// white).
	step("the second approval", 200, chromedp.Navigate(s.url+"/approvals/"+email.String()))
	emailDigest := text("#preview-digest")
	if banner := text("#truncated"); !strings.Contains(banner, "This preview is incomplete.") || !strings.Contains(banner, "lists to 50 items") {
		t.Errorf("the truncation banner: %q", banner)
	}
	if pre := text("#preview"); !strings.Contains(pre, `"[+30 items]"`) {
		t.Errorf("the shortened preview:\n%s", pre)
	}
	shots.take(ctx, "2b-truncated")
	bannerColor, share := dominantColor(shots.element(ctx, "2c-truncated-banner", "#truncated"))
	if bannerColor != [3]uint8{0x7a, 0x2e, 0x0e} || share < 0.5 {
		t.Errorf("the banner's screenshot is mostly %v (%.0f%%), want the banner's #7a2e0e", bannerColor, 100*share)
	}
	if c, _ := dominantColor(shots.element(ctx, "2d-preview", "#preview")); c != [3]uint8{0xff, 0xff, 0xff} {
		t.Errorf("the preview's screenshot is mostly %v, want white", c)
	}
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
	p := apitest.NewPageClient(t, s.url)
	p.SignIn("bob", apitest.TestPassword)
	_, digestForged, _ := storedPreview(s.srv, forged)
	resp, b := p.Do("POST", "/approvals/"+forged.String()+"/verdict", p.VerdictForm("approve", digestForged.String(), true),
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
		if code := apitest.GetJSON(t, fmt.Sprintf("%s/v1/entries/%d", s.url, st.VerdictIndex), &raw); code != 200 {
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
