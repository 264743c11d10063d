package mcpgate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// upstream is one MCP server behind the gateway, connected on first use
// and again after its session ends.
type upstream struct {
	name string
	cfg  ServerConfig
	gw   *Gateway
	http *http.Transport // for a server at a URL, kept across sessions

	syncMu sync.Mutex // held while the tools are listed and replaced

	mu      sync.Mutex
	session *mcp.ClientSession
	stderr  io.Closer
	listed  time.Time // when the tools were last listed
}

// connectTimeout bounds a connection and its handshake.
const connectTimeout = 30 * time.Second

// connected returns the live session, connecting if there is none.
func (u *upstream) connected(ctx context.Context) (*mcp.ClientSession, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.session != nil {
		return u.session, nil
	}
	t, err := u.transport()
	if err != nil {
		return nil, err
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "ledger-mcp", Version: Version}, &mcp.ClientOptions{
		Logger: discardSDKLog,
		// A changed list is read at once, so that a changed definition
		// is hidden before an agent calls it.
		ToolListChangedHandler: func(ctx context.Context, _ *mcp.ToolListChangedRequest) {
			go u.gw.sync(context.WithoutCancel(ctx), u)
		},
		ResourceUpdatedHandler: func(ctx context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			if u.forwards("resources") {
				u.gw.server.ResourceUpdated(ctx, req.Params)
			}
		},
		Capabilities: &mcp.ClientCapabilities{},
	})
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	s, err := c.Connect(cctx, t, nil)
	if err != nil {
		u.closeStderr()
		return nil, fmt.Errorf("connecting to server %s: %w", u.name, err)
	}
	u.session = s
	go func() {
		s.Wait()
		u.mu.Lock()
		if u.session == s {
			u.session = nil
			u.closeStderr()
		}
		u.mu.Unlock()
	}()
	return s, nil
}

func (u *upstream) closeStderr() {
	if u.stderr != nil {
		u.stderr.Close()
		u.stderr = nil
	}
}

// transport is the configured way to reach the server.
func (u *upstream) transport() (mcp.Transport, error) {
	if u.cfg.URL != "" {
		hc := &http.Client{Transport: u.http}
		if u.cfg.BearerTokenFile != "" {
			tok, err := readSecret("servers."+u.name+".bearer_token_file", u.gw.cfg.Path(u.cfg.BearerTokenFile))
			if err != nil {
				return nil, err
			}
			hc.Transport = bearer{token: string(tok), next: u.http}
		}
		return &mcp.StreamableClientTransport{Endpoint: u.cfg.URL, HTTPClient: hc, DisableStandaloneSSE: false}, nil
	}
	cmd := exec.Command(u.cfg.Command[0], u.cfg.Command[1:]...)
	cmd.Dir = u.gw.cfg.dir
	cmd.Env = os.Environ()
	for k, v := range u.cfg.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	if u.cfg.StderrFile != "" {
		f, err := os.OpenFile(u.gw.cfg.Path(u.cfg.StderrFile), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("servers.%s.stderr_file: %w", u.name, err)
		}
		cmd.Stderr = f
		u.stderr = f
	}
	return &mcp.CommandTransport{Command: cmd}, nil
}

// bearer adds an Authorization header to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// listTools reads every page of the server's tools/list.
func (u *upstream) listTools(ctx context.Context) ([]*mcp.Tool, error) {
	s, err := u.connected(ctx)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	var tools []*mcp.Tool
	for t, err := range s.Tools(ctx, nil) {
		if err != nil {
			u.drop(s)
			return nil, fmt.Errorf("server %s: tools/list: %w", u.name, err)
		}
		tools = append(tools, t)
	}
	return tools, nil
}

// call forwards a tool call with the arguments exactly as received.
func (u *upstream) call(ctx context.Context, tool string, args []byte) (*mcp.CallToolResult, error) {
	s, err := u.connected(ctx)
	if err != nil {
		return nil, err
	}
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: rawJSON(args)})
	if err != nil {
		if errors.Is(err, mcp.ErrConnectionClosed) {
			u.drop(s)
		}
		return nil, err
	}
	return res, nil
}

// drop forgets a session that failed, so the next use reconnects.
func (u *upstream) drop(s *mcp.ClientSession) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.session == s {
		u.session = nil
		s.Close()
	}
}

func (u *upstream) close() error {
	u.mu.Lock()
	s := u.session
	u.session = nil
	u.mu.Unlock()
	if s == nil {
		return nil
	}
	err := s.Close()
	u.mu.Lock()
	u.closeStderr()
	u.mu.Unlock()
	return err
}
