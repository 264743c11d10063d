package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/decisionledger/ledger/internal/keyflag"
	"github.com/decisionledger/ledger/internal/termtext"
)

// What consistency --url and monitor read from ledgerd: checkpoints,
// consistency proofs and C2SP tlog-tiles. Everything fetched is checked
// before it is trusted: a fetch only moves bytes.

// tokenEnv names the environment variable that may hold a reader's bearer
// token, for a ledgerd whose reads are protected (as ledgerctl's).
const tokenEnv = "LEDGER_TOKEN"

// netOptions is the usage text of the flags netFlags registers.
const netOptions = `    --token-file FILE     A reader's bearer token, for a ledgerd whose reads
                          are protected (or the LEDGER_TOKEN environment
                          variable).
    --timeout DURATION    Give up on a request after this long (default 30s).
`

// netFlags are the options of the commands that read from ledgerd.
type netFlags struct {
	tokenFile string
	timeout   time.Duration
}

func (n *netFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&n.tokenFile, "token-file", "", "")
	fs.DurationVar(&n.timeout, "timeout", 30*time.Second, "")
}

// fetcher reads from one ledgerd.
type fetcher struct {
	base   *url.URL
	token  string
	client *http.Client
}

func (n *netFlags) fetcher(base string) (*fetcher, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%s is not an http:// or https:// URL", termtext.Quote(base))
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%s: the URL takes no query or fragment", termtext.Quote(base))
	}
	if n.timeout <= 0 {
		return nil, errors.New("--timeout must be positive")
	}
	token := strings.TrimSpace(os.Getenv(tokenEnv))
	if n.tokenFile != "" {
		b, err := keyflag.ReadFileLimit(n.tokenFile, 4096)
		if err != nil {
			return nil, fmt.Errorf("--token-file: %w", err)
		}
		token = strings.TrimSpace(string(b))
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	return &fetcher{base: u, token: token, client: &http.Client{Timeout: n.timeout}}, nil
}

// fetchError: the log could not be read — no answer, or an answer other
// than 200. It says nothing about the log's honesty (exit status 4).
type fetchError struct {
	url    string
	status int    // 0: no answer
	code   string // ledgerd's error code, if it answered one
	msg    string
	err    error
}

func (e *fetchError) Error() string {
	switch {
	case e.status == 0:
		return fmt.Sprintf("GET %s: %v", e.url, e.err)
	case e.code != "":
		return fmt.Sprintf("GET %s: HTTP %d, %s: %s", e.url, e.status, termtext.Quote(e.code), termtext.Quote(e.msg))
	default:
		return fmt.Sprintf("GET %s: HTTP %d", e.url, e.status)
	}
}

func (e *fetchError) Unwrap() error { return e.err }

// get fetches path (with its query) under the base URL, at most limit
// bytes.
func (f *fetcher) get(ctx context.Context, path string, limit int64) ([]byte, error) {
	u := f.base.String() + path
	req, err := http.NewRequestWithContext(ctx, "GET", u, nil)
	if err != nil {
		return nil, &fetchError{url: u, err: err}
	}
	if f.token != "" {
		req.Header.Set("Authorization", "Bearer "+f.token)
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, &fetchError{url: u, err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, &fetchError{url: u, err: err}
	}
	if resp.StatusCode != http.StatusOK {
		e := &fetchError{url: u, status: resp.StatusCode}
		var answer struct {
			Error struct{ Code, Message string }
		}
		if json.Unmarshal(b, &answer) == nil {
			e.code, e.msg = answer.Error.Code, answer.Error.Message
		}
		return nil, e
	}
	if int64(len(b)) > limit {
		return nil, &fetchError{url: u, status: resp.StatusCode, err: fmt.Errorf("answer longer than %d bytes", limit)}
	}
	return b, nil
}
