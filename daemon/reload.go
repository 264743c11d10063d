// The config's reload (Daemon.Reload, ledgerd's SIGHUP; docs/config.md "Reload"): the
// credentials — mediators' tokens and rates, readers' tokens, approvers
// (server.Credentials), the TLS certificate — change without a restart,
// so that a leaked token or a departed approver is refused at once.
// Everything else the config sets is read at start only; a reload names
// the fields that changed and need a restart.

package daemon

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/decisionledger/ledger/config"
	"github.com/decisionledger/ledger/server"
	"github.com/decisionledger/ledger/server/metrics"
)

// configReloader re-reads the config file at each reload and puts its
// credentials in force.
type configReloader struct {
	path  string
	start *config.Config // the file's config at start, before --listen
	creds *server.Credentials
	cert  *serverCert // nil without TLS
	log   *slog.Logger
	m     *metrics.Series
}

// reload reads and checks the config file as a start does. A config that
// does not load changes nothing: it is logged (the check's message, which
// names the field and never a secret), counted as failed and returned.
// Otherwise its credentials are put in force, and the members that need
// a restart are named in a warning.
func (r *configReloader) reload(ctx context.Context) error {
	next, err := config.Load(r.path)
	if err != nil {
		r.log.ErrorContext(ctx, "config reload refused; the credentials in force stay", "error", err)
		r.m.ConfigReload(false)
		return err
	}
	// Counted last, once everything is logged: a count seen on /metrics
	// means the reload and its log lines are done.
	defer r.m.ConfigReload(true)
	ch := r.creds.Apply(next)
	r.log.InfoContext(ctx, "config reloaded: credentials in force", "config", r.path, "changes", ch,
		"mediators", len(next.Mediators), "approvers", approverCount(next))
	if n, expiries := config.PreviousTokens(next, r.creds.Now()); n > 0 {
		r.log.InfoContext(ctx, "config reload: previous mediator tokens in force until their expiry", "count", n, "expires", expiries)
	}
	if r.cert != nil && next.TLS != nil {
		// The check loaded the pair already; a file rewritten since
		// then is read again here, or refused.
		if changed, err := r.cert.reload(next.TLS.CertFile, next.TLS.KeyFile); err != nil {
			r.log.ErrorContext(ctx, "config reload: the TLS certificate did not load; the one in force stays", "error", err)
		} else if changed {
			attrs := []any{"cert_file", next.TLS.CertFile}
			if leaf := r.cert.current().Leaf; leaf != nil {
				attrs = append(attrs, "subject", leaf.Subject.String(), "not_after", leaf.NotAfter)
			}
			r.log.InfoContext(ctx, "config reload: TLS certificate in force", attrs...)
		}
	}
	if names := config.RestartFields(r.start, next); len(names) > 0 {
		r.log.WarnContext(ctx, "config reload: these members changed and take effect only at a restart", "fields", strings.Join(names, ","))
	}
	return nil
}

func approverCount(c *config.Config) int {
	if c.Approvals == nil {
		return 0
	}
	return len(c.Approvals.Approvers)
}

// serverCert is the server's TLS certificate in force, which new
// connections get: read at start, and again at each reload, so that a
// renewed certificate serves without a restart. Connections open keep
// theirs.
type serverCert struct {
	cur atomic.Pointer[tls.Certificate]
}

func (c *serverCert) current() *tls.Certificate { return c.cur.Load() }

// reload reads the pair and puts it in force; changed says whether it
// differs from the one in force.
func (c *serverCert) reload(certFile, keyFile string) (changed bool, err error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return false, fmt.Errorf("tls: %w", err)
	}
	old := c.cur.Load()
	changed = old == nil || !slices.EqualFunc(old.Certificate, cert.Certificate, slices.Equal)
	c.cur.Store(&cert)
	return changed, nil
}

// serverTLS is t.ServerConfig with its certificate taken, at each
// handshake, from the returned serverCert.
func serverTLS(t *config.TLSConfig) (*tls.Config, *serverCert, error) {
	c, err := t.ServerConfig()
	if err != nil {
		return nil, nil, err
	}
	sc := new(serverCert)
	sc.cur.Store(&c.Certificates[0])
	c.Certificates = nil
	c.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return sc.current(), nil }
	return c, sc, nil
}
