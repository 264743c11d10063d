package server

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/decisionledger/ledger/config"
	"github.com/decisionledger/ledger/internal/apitest"
)

// A 401 says what is wrong with the credential: no Authorization header,
// another scheme, an empty token, a reader's token on an append, or a
// token the ledger does not know. It never repeats the token.
func TestAuthMessages(t *testing.T) {
	const readerToken = "reader-token-SECRET1"
	sum := sha256.Sum256([]byte(readerToken))
	s := startServerWith(t, func(c *config.Config) { c.ReaderTokensSHA256 = []string{fmt.Sprintf("%x", sum)} })
	const unknown = "unknown-token-SECRET2"
	for _, c := range []struct {
		method, path, authorization, want string
	}{
		{"POST", "/v1/entries", "", "appends need a mediator's token: the request has no Authorization header"},
		{"POST", "/v1/entries", "Basic " + unknown, "the Authorization header is not in the Bearer scheme"},
		{"POST", "/v1/entries", unknown, "the Authorization header is not in the Bearer scheme"},
		{"POST", "/v1/entries", "Bearer ", "the Authorization header's bearer token is empty"},
		{"POST", "/v1/entries", "Bearer " + unknown, "unknown token: no mediator of this ledger has it"},
		{"POST", "/v1/entries", "Bearer " + readerToken, "the token is a reader's, which may only read; appends need a mediator's token"},
		{"GET", "/v1/checkpoint", "", "reads need a reader's or a mediator's token: the request has no Authorization header"},
		{"GET", "/v1/checkpoint", "Token " + unknown, "the Authorization header is not in the Bearer scheme"},
		{"GET", "/v1/checkpoint", "Bearer " + unknown, "unknown token: neither a reader's nor a mediator's"},
	} {
		req, _ := http.NewRequest(c.method, s.url+c.path, strings.NewReader(apitest.AppendBody(1)))
		if c.authorization != "" {
			req.Header.Set("Authorization", c.authorization)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e struct{ Error apiError }
		json.Unmarshal(b, &e)
		name := c.method + " " + c.path + " with " + strings.NewReplacer(unknown, "UNKNOWN", readerToken, "READER").Replace(c.authorization)
		if resp.StatusCode != http.StatusUnauthorized || e.Error.Code != "unauthenticated" || !strings.Contains(e.Error.Message, c.want) {
			t.Errorf("%s: %d %s; want 401 unauthenticated %q", name, resp.StatusCode, b, c.want)
		}
		if strings.Contains(string(b), "SECRET") {
			t.Errorf("%s: the answer repeats the token: %s", name, b)
		}
	}
}
