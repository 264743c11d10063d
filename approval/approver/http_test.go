package approver

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestCheckCSRF(t *testing.T) {
	const tok = "k3lGTlLGuvJlQxSx6ZFz8uJ9JRfR3nW0Ww8p5AxM4cY"
	for _, c := range []struct {
		session, submitted string
		want               bool
	}{
		{tok, tok, true},
		{tok, "", false},
		{tok, tok[:42], false},
		{tok, tok + "A", false},
		{tok, strings.ToUpper(tok), false},
		{tok, "j" + tok[1:], false},
		{"", "", false},
	} {
		if got := CheckCSRF(c.session, c.submitted); got != c.want {
			t.Errorf("CheckCSRF(%q, %q) = %v, want %v", c.session, c.submitted, got, c.want)
		}
	}
}

func TestCheckOrigin(t *testing.T) {
	for _, c := range []struct {
		name    string
		host    string
		headers map[string]string
		trusted []string
		ok      bool
	}{
		{"same-origin", "ledger.example", map[string]string{"Sec-Fetch-Site": "same-origin"}, nil, true},
		{"same-origin, another Origin", "ledger.example", map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "https://evil.example"}, nil, true},
		{"same-site", "ledger.example", map[string]string{"Sec-Fetch-Site": "same-site", "Origin": "https://ledger.example"}, nil, false},
		{"cross-site", "ledger.example", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://ledger.example"}, nil, false},
		{"none", "ledger.example", map[string]string{"Sec-Fetch-Site": "none"}, nil, false},
		{"Origin of this host", "ledger.example:8443", map[string]string{"Origin": "https://ledger.example:8443"}, nil, true},
		{"Origin over HTTP", "127.0.0.1:8080", map[string]string{"Origin": "http://127.0.0.1:8080"}, nil, true},
		{"Origin of another port", "ledger.example:8443", map[string]string{"Origin": "https://ledger.example"}, nil, false},
		{"Origin of another host", "ledger.example", map[string]string{"Origin": "https://evil.example"}, nil, false},
		{"Origin suffix", "ledger.example", map[string]string{"Origin": "https://ledger.example.evil.example"}, nil, false},
		{"Origin null", "ledger.example", map[string]string{"Origin": "null"}, nil, false},
		{"Origin with a path", "ledger.example", map[string]string{"Origin": "https://ledger.example/x"}, nil, false},
		{"Origin with user", "ledger.example", map[string]string{"Origin": "https://u@ledger.example"}, nil, false},
		{"Origin of another scheme", "ledger.example", map[string]string{"Origin": "ftp://ledger.example"}, nil, false},
		{"trusted Origin", "127.0.0.1:8080", map[string]string{"Origin": "https://ledger.example"}, []string{"https://ledger.example"}, true},
		{"untrusted Origin", "127.0.0.1:8080", map[string]string{"Origin": "https://evil.example"}, []string{"https://ledger.example"}, false},
		{"neither header", "ledger.example", nil, nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "http://"+c.host+"/approve", nil)
			for k, v := range c.headers {
				r.Header.Set(k, v)
			}
			err := CheckOrigin(r, c.trusted...)
			if (err == nil) != c.ok || err != nil && !errors.Is(err, ErrCrossOrigin) {
				t.Fatalf("CheckOrigin = %v, want ok %v", err, c.ok)
			}
		})
	}
}

func TestSessionCookie(t *testing.T) {
	const tok = "k3lGTlLGuvJlQxSx6ZFz8uJ9JRfR3nW0Ww8p5AxM4cY"
	for _, c := range []struct {
		cookie *http.Cookie
		want   string
	}{
		{SessionCookie(tok, true, 12*time.Hour), "__Host-ledger-session=" + tok + "; Path=/; Max-Age=43200; HttpOnly; Secure; SameSite=Strict"},
		{SessionCookie(tok, false, 12*time.Hour), "ledger-session=" + tok + "; Path=/; Max-Age=43200; HttpOnly; SameSite=Strict"},
		{SessionCookie(tok, true, 0), "__Host-ledger-session=" + tok + "; Path=/; HttpOnly; Secure; SameSite=Strict"},
		{SessionCookie(tok, false, time.Millisecond), "ledger-session=" + tok + "; Path=/; Max-Age=1; HttpOnly; SameSite=Strict"},
		{ClearSessionCookie(true), "__Host-ledger-session=; Path=/; Max-Age=0; HttpOnly; Secure; SameSite=Strict"},
		{ClearSessionCookie(false), "ledger-session=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict"},
	} {
		if got := c.cookie.String(); got != c.want {
			t.Errorf("cookie\n %s\nwant\n %s", got, c.want)
		}
		if c.cookie.Domain != "" {
			t.Errorf("cookie %s has a Domain", c.cookie.Name)
		}
	}

	// SessionToken reads the cookie of its kind only.
	r := httptest.NewRequest("GET", "/approve", nil)
	r.AddCookie(SessionCookie(tok, true, time.Hour))
	if got, ok := SessionToken(r, true); !ok || got != tok {
		t.Fatalf("SessionToken(secure) = %q, %v", got, ok)
	}
	if _, ok := SessionToken(r, false); ok {
		t.Fatal("the insecure name read the secure cookie")
	}
	r = httptest.NewRequest("GET", "/approve", nil)
	r.AddCookie(SessionCookie(tok, false, time.Hour))
	if _, ok := SessionToken(r, true); ok {
		t.Fatal("a plain-HTTP cookie was taken under TLS")
	}
}

func TestRefuseBearer(t *testing.T) {
	const secret = "mediator-secret-token-value"
	for _, c := range []struct {
		name   string
		values []string
		refuse bool
	}{
		{"none", nil, false},
		{"bearer", []string{"Bearer " + secret}, true},
		{"lower case", []string{"bearer " + secret}, true},
		{"basic", []string{"Basic YWxpY2U6cHc="}, true},
		{"bare token", []string{secret}, true},
		{"empty", []string{""}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/approve", nil)
			r.AddCookie(SessionCookie("k3lGTlLGuvJlQxSx6ZFz8uJ9JRfR3nW0Ww8p5AxM4cY", true, time.Hour))
			if c.values != nil {
				r.Header["Authorization"] = c.values
			}
			err := RefuseBearer(r)
			var ae *AuthorizationError
			if c.refuse != errors.As(err, &ae) || (err != nil) != c.refuse {
				t.Fatalf("RefuseBearer = %v, want refused %v", err, c.refuse)
			}
			if err != nil && (strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), "a mediator token can never approve")) {
				t.Fatalf("error %q", err)
			}
		})
	}
}
