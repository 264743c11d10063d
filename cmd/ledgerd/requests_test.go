package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// Appends and protected reads need the Bearer scheme, whose name is
// matched without regard to case (RFC 9110 §11.1); a bare token is refused.
func TestBearerScheme(t *testing.T) {
	readerToken := "reader-secret-token"
	sum := sha256.Sum256([]byte(readerToken))
	s := startServerWith(t, func(c *Config) { c.ReaderTokensSHA256 = []string{fmt.Sprintf("%x", sum)} })
	do := func(method, path, authorization, body string) int {
		t.Helper()
		req, _ := http.NewRequest(method, s.url+path, strings.NewReader(body))
		if authorization != "" {
			req.Header.Set("Authorization", authorization)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for i, auth := range []string{"Bearer " + s.token, "bearer " + s.token, "BEARER " + s.token, "bEaReR  " + s.token} {
		if code := do("POST", "/v1/entries", auth, appendBody(i)); code != http.StatusCreated {
			t.Errorf("append with %q: %d", strings.Replace(auth, s.token, "TOKEN", 1), code)
		}
	}
	for _, auth := range []string{s.token, "Basic " + s.token, "Bearer" + s.token, "Bearer ", "Token " + s.token} {
		if code := do("POST", "/v1/entries", auth, appendBody(9)); code != http.StatusUnauthorized {
			t.Errorf("append with %q: %d, want 401", strings.Replace(auth, s.token, "TOKEN", 1), code)
		}
	}
	s.l.Publish(context.Background())
	for _, auth := range []string{"Bearer " + readerToken, "bearer " + readerToken, "BEARER " + readerToken, "bearer " + s.token} {
		if code := do("GET", "/v1/checkpoint", auth, ""); code != http.StatusOK {
			t.Errorf("read with %q: %d", auth, code)
		}
	}
	for _, auth := range []string{readerToken, s.token, "Basic " + readerToken, "Bearer" + readerToken, "Bearer "} {
		if code := do("GET", "/v1/checkpoint", auth, ""); code != http.StatusUnauthorized {
			t.Errorf("read with %q: %d, want 401", auth, code)
		}
	}
}
