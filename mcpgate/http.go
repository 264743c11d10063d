package mcpgate

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Handler serves agents over streamable HTTP at /mcp, each authenticated
// by a bearer token whose SHA-256 the config lists, and the metrics at
// /metrics.
func (g *Gateway) Handler() http.Handler {
	mux := http.NewServeMux()
	server := func(*http.Request) *mcp.Server { return g.server }
	// Clients of 2026-07-28 and later send each request on its own, with
	// its protocol version in a header; earlier ones hold a session. The
	// SDK serves the former only statelessly and the latter only with
	// sessions, so each goes to its own handler of the one server.
	stateful := mcp.NewStreamableHTTPHandler(server, &mcp.StreamableHTTPOptions{Logger: discardSDKLog})
	stateless := mcp.NewStreamableHTTPHandler(server, &mcp.StreamableHTTPOptions{Logger: discardSDKLog, Stateless: true})
	mcpHandler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := r.Header.Get("Mcp-Protocol-Version"); v >= sessionlessProtocol {
			stateless.ServeHTTP(w, r)
			return
		}
		stateful.ServeHTTP(w, r)
	})
	// Agent tokens are long-lived credentials the config lists (rotated
	// by editing it), not OAuth access tokens: they carry no expiry.
	authenticated := auth.RequireBearerToken(g.verifyToken, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(mcpHandler)
	mux.Handle("/mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" && g.cfg.HTTP != nil && g.cfg.HTTP.UnauthenticatedPrincipal != "" {
			mcpHandler.ServeHTTP(w, r)
			return
		}
		authenticated.ServeHTTP(w, r)
	}))
	mux.Handle("GET /metrics", g.metrics)
	return mux
}

// sessionlessProtocol is the first protocol version without sessions.
const sessionlessProtocol = "2026-07-28"

// verifyToken maps a bearer token to its principal. Every listed hash is
// compared in constant time, so the answer's timing tells nothing of
// which is near.
func (g *Gateway) verifyToken(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	if g.cfg.HTTP == nil {
		return nil, auth.ErrInvalidToken
	}
	sum := sha256.Sum256([]byte(token))
	var principal string
	for _, a := range g.cfg.HTTP.Agents {
		want, err := hex.DecodeString(a.TokenSHA256)
		if err == nil && subtle.ConstantTimeCompare(sum[:], want) == 1 {
			principal = a.Principal
		}
	}
	if principal == "" {
		g.metrics.add(g.metrics.refused, "unauthenticated")
		return nil, auth.ErrInvalidToken
	}
	return &auth.TokenInfo{UserID: principal}, nil
}

// CheckListen refuses a listen address that is not loopback when
// requests without a token are admitted.
func (c *Config) CheckListen(addr string) error {
	if c.HTTP == nil || c.HTTP.UnauthenticatedPrincipal == "" {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("listen address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("http.unauthenticated_principal admits requests without a token: listen on a loopback address, not %q", addr)
	}
	return nil
}
