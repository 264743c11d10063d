package mcpgate

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/decisionledger/ledger/commit"
)

// Config is the gateway's configuration file (JSON, in the strict
// domain). Unknown members are refused, and so is a value out of range:
// the gateway never replaces a value it was given. Relative paths are
// relative to the config file's directory. docs/mcp.md is the reference.
type Config struct {
	// Ledger is the ledgerd the gateway asks to decide. Required.
	Ledger LedgerConfig `json:"ledger"`
	// DeclarationsDir holds one declaration file (*.json) per gated tool,
	// the same files as ledgerd's catalog_dir. Required.
	DeclarationsDir string `json:"declarations_dir"`
	// Allowlists are payee_known's lists, by the name a declaration gives
	// them. Optional.
	Allowlists map[string][]string `json:"allowlists"`
	// Servers are the upstream MCP servers, by the name that prefixes
	// their tools ("fs" makes write_file "fs.write_file"). Required: at
	// least one.
	Servers map[string]ServerConfig `json:"servers"`
	// Stdio configures the agent side over standard input and output.
	// Optional; needed for "ledger-mcp serve --stdio".
	Stdio *StdioConfig `json:"stdio"`
	// HTTP configures the agent side over streamable HTTP. Optional;
	// needed for "ledger-mcp serve --http".
	HTTP *HTTPConfig `json:"http"`
	// Approvals configures how a needs_approval decision reaches the
	// agent. Optional; without it such a call is refused, naming the
	// approval.
	Approvals *ApprovalsConfig `json:"approvals"`
	// AllowNonInteger admits arguments with non-integer numbers (0.7),
	// committed to in their RFC 8785 form (commit.Domain.AllowNonInteger;
	// an auditor checks such parameters with ledger-verify's
	// --allow-non-integer). Optional; default false: a call with one is
	// refused, as the strict domain refuses them by default.
	AllowNonInteger bool `json:"allow_non_integer"`
	// Commitment is the parameter commitment each call is recorded under
	// (docs/commitment.md): "hiding", version 2, a per-field SHA-256
	// salted with openings drawn at random per call, which only the call's
	// disclosure (Disclosures) can open; or "v1", version 1, the SHA-256
	// of the canonical arguments, which anyone holding a guess of the
	// arguments can confirm against the log: a dictionary attack on
	// exactly the fields the declarations keep out of it (§7.1).
	// Optional; default "hiding".
	Commitment string `json:"commitment"`
	// Disclosures is where each call's disclosure (its values and
	// openings, docs/commitment.md §7.4) is kept: a directory, mode 0700
	// (made if absent), holding one file per call, named by the digest's
	// hex (<64 hex>.json), mode 0600, written and synced before the ledger
	// is asked; or "none", which keeps no disclosure, so that no call's
	// parameters can ever be checked against the log (write "./none" for
	// a directory of that name). Required with the hiding commitment;
	// refused with "v1", which has no disclosures.
	Disclosures string `json:"disclosures"`
	// CallTimeout bounds each forwarded call, a Go duration. Optional;
	// default "60s". A call that runs out is recorded "unknown".
	CallTimeout string `json:"call_timeout"`
	// RefreshInterval is how often each upstream's tools/list is read
	// again to check the pins (besides its list_changed notifications and
	// every tools/list an agent sends). Optional; default "60s".
	RefreshInterval string `json:"refresh_interval"`

	dir string // the config file's directory
}

// LedgerConfig names the ledger and the gateway's mediator credential.
type LedgerConfig struct {
	// URL is ledgerd's base URL (http://127.0.0.1:8080). Required.
	URL string `json:"url"`
	// TokenFile holds the gateway's mediator token, readable by its owner
	// only. Required.
	TokenFile string `json:"token_file"`
	// VerifierKey is the log's note verifier key: every answer the
	// gateway acts on is checked against it. Required.
	VerifierKey string `json:"verifier_key"`
}

// ServerConfig is one upstream: a command or a URL, exactly one.
type ServerConfig struct {
	// Command starts the server as a subprocess speaking MCP over stdio:
	// the program and its arguments.
	Command []string `json:"command"`
	// Env is added to the subprocess's environment. Optional.
	Env map[string]string `json:"env"`
	// StderrFile receives the subprocess's standard error (appended,
	// mode 0600). Optional; default none: it is discarded, since a
	// server's own messages may hold argument values and must not mix
	// with the gateway's log.
	StderrFile string `json:"stderr_file"`
	// URL is a streamable HTTP MCP endpoint.
	URL string `json:"url"`
	// BearerTokenFile, with URL, holds a token sent as
	// "Authorization: Bearer". Optional.
	BearerTokenFile string `json:"bearer_token_file"`
	// Forward lists what besides tools is passed through from this
	// server: "resources", "prompts", "completions". Optional; default
	// none: only gated tools cross the gateway.
	Forward []string `json:"forward"`
}

// StdioConfig is the agent side over stdio: the agent host that launches
// the gateway acts for one principal.
type StdioConfig struct {
	// Principal is recorded for every call. Required.
	Principal string `json:"principal"`
}

// HTTPConfig is the agent side over streamable HTTP.
type HTTPConfig struct {
	// Listen is host:port. Optional; default "127.0.0.1:8090".
	Listen string `json:"listen"`
	// Agents are the bearer tokens agents present, each mapped to the
	// principal recorded for its calls. Required: at least one, unless
	// UnauthenticatedPrincipal is set.
	Agents []Agent `json:"agents"`
	// UnauthenticatedPrincipal, if set, is recorded for requests that
	// carry no Authorization header (a request with a wrong token is
	// still refused). Only for a loopback listen address: it is for a
	// single-user machine and for test suites whose clients cannot send a
	// token. Optional; default none: every request needs a token.
	UnauthenticatedPrincipal string `json:"unauthenticated_principal"`
}

// Agent is one agent credential: only its token's SHA-256 is kept.
type Agent struct {
	Principal   string `json:"principal"`
	TokenSHA256 string `json:"token_sha256"`
}

// ApprovalsConfig says how an agent is sent to the approver's page.
type ApprovalsConfig struct {
	// PageURL is the base URL approvers reach ledgerd's page at; the
	// agent is pointed at PageURL/approvals/{id}. Optional; default the
	// ledger's URL.
	PageURL string `json:"page_url"`
	// Wait bounds how long one call waits for a verdict, a Go duration.
	// Optional; default "120s".
	Wait string `json:"wait"`
	// Preview is what approvers are shown: "arguments", the tool and its
	// arguments, redacted then bounded (approval/preview), sent with
	// every decide since the gateway cannot know beforehand which calls
	// the policies send to a person (ledgerd keeps it only for those);
	// or "attributes", no preview sent: approvers see ledgerd's default
	// preview, made from the entry (the minimized attributes), and no
	// argument value ever reaches ledgerd. Optional; default "arguments".
	Preview string `json:"preview"`
	// StateKeyFile holds the 32-byte key (64 hex digits) that
	// authenticates request states, readable by its owner only.
	// Optional; default a random key made at start, so that states do
	// not survive a restart.
	StateKeyFile string `json:"state_key_file"`
}

var (
	serverName = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9_-]{0,31}$`)
	forwards   = []string{"resources", "prompts", "completions"}
)

// LoadConfig reads and checks a config file.
func LoadConfig(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseConfig(b, filepath.Dir(path))
}

// ParseConfig checks a config; dir is where relative paths start.
func ParseConfig(b []byte, dir string) (*Config, error) {
	if _, err := commit.Canonicalize(b); err != nil {
		var de *commit.DomainError
		if errors.As(err, &de) {
			return nil, fmt.Errorf("config: %s: outside the strict JSON domain: %s", de.Pointer, de.Kind)
		}
		return nil, fmt.Errorf("config: not JSON in the strict domain")
	}
	var c Config
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c.dir = dir
	if err := c.check(); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return &c, nil
}

// Path resolves a path of the config against its directory.
func (c *Config) Path(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(c.dir, p)
}

func (c *Config) check() error {
	u, err := url.Parse(c.Ledger.URL)
	switch {
	case c.Ledger.URL == "":
		return errors.New("ledger.url: missing")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return errors.New("ledger.url: not an http or https URL")
	case c.Ledger.TokenFile == "":
		return errors.New("ledger.token_file: missing")
	case c.Ledger.VerifierKey == "":
		return errors.New("ledger.verifier_key: missing")
	case c.DeclarationsDir == "":
		return errors.New("declarations_dir: missing")
	case len(c.Servers) == 0:
		return errors.New("servers: missing or empty")
	}
	for name, s := range c.Servers {
		p := "servers." + name
		if !serverName.MatchString(name) {
			return fmt.Errorf("%s: a server name is a letter then up to 31 ASCII letters, digits, '_' or '-'", p)
		}
		switch {
		case len(s.Command) == 0 && s.URL == "":
			return fmt.Errorf("%s: needs command or url", p)
		case len(s.Command) != 0 && s.URL != "":
			return fmt.Errorf("%s: command and url are exclusive", p)
		case s.URL != "":
			if u, err := url.Parse(s.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return fmt.Errorf("%s.url: not an http or https URL", p)
			}
			if len(s.Env) != 0 || s.StderrFile != "" {
				return fmt.Errorf("%s: env and stderr_file are for a command", p)
			}
		default:
			if s.Command[0] == "" {
				return fmt.Errorf("%s.command: empty program", p)
			}
			if s.BearerTokenFile != "" {
				return fmt.Errorf("%s.bearer_token_file: for a url", p)
			}
		}
		for i, f := range s.Forward {
			if !slices.Contains(forwards, f) {
				return fmt.Errorf("%s.forward[%d]: not one of %s", p, i, strings.Join(forwards, ", "))
			}
		}
	}
	if c.Stdio != nil && c.Stdio.Principal == "" {
		return errors.New("stdio.principal: missing")
	}
	if c.HTTP != nil {
		if len(c.HTTP.Agents) == 0 && c.HTTP.UnauthenticatedPrincipal == "" {
			return errors.New("http.agents: missing or empty")
		}
		seen := map[string]bool{}
		for i, a := range c.HTTP.Agents {
			switch {
			case a.Principal == "":
				return fmt.Errorf("http.agents[%d].principal: missing", i)
			case !isTokenHash(a.TokenSHA256):
				return fmt.Errorf("http.agents[%d].token_sha256: not 64 lower-case hex digits", i)
			case seen[a.TokenSHA256]:
				return fmt.Errorf("http.agents[%d].token_sha256: repeated", i)
			}
			seen[a.TokenSHA256] = true
		}
	}
	switch {
	case c.Commitment != "" && c.Commitment != "hiding" && c.Commitment != "v1":
		return errors.New(`commitment: not "hiding" or "v1"`)
	case c.Hiding() && c.Disclosures == "":
		return errors.New(`disclosures: missing: the hiding commitment (the default) needs a directory for each call's disclosure, or "none" to keep none, so that no call's parameters can be checked later (docs/mcp.md §6)`)
	case !c.Hiding() && c.Disclosures != "":
		return errors.New(`disclosures: only with the hiding commitment; "commitment": "v1" has no disclosures`)
	}
	if _, err := c.callTimeout(); err != nil {
		return err
	}
	if _, err := c.refreshInterval(); err != nil {
		return err
	}
	if a := c.Approvals; a != nil {
		if a.PageURL != "" {
			if u, err := url.Parse(a.PageURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return errors.New("approvals.page_url: not an http or https URL")
			}
		}
		if _, err := a.wait(); err != nil {
			return err
		}
		switch a.Preview {
		case "", "arguments", "attributes":
		default:
			return errors.New(`approvals.preview: not "arguments" or "attributes"`)
		}
	}
	return nil
}

func isTokenHash(h string) bool {
	if len(h) != 64 || strings.ToLower(h) != h {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil
}

func duration(field, text string, def time.Duration) (time.Duration, error) {
	if text == "" {
		return def, nil
	}
	d, err := time.ParseDuration(text)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s: not a positive Go duration", field)
	}
	return d, nil
}

func (c *Config) callTimeout() (time.Duration, error) {
	return duration("call_timeout", c.CallTimeout, 60*time.Second)
}

func (c *Config) refreshInterval() (time.Duration, error) {
	return duration("refresh_interval", c.RefreshInterval, 60*time.Second)
}

func (a *ApprovalsConfig) wait() (time.Duration, error) {
	return duration("approvals.wait", a.Wait, 120*time.Second)
}

// Hiding reports whether calls are committed to with the hiding
// commitment (version 2), the default.
func (c *Config) Hiding() bool { return c.Commitment != "v1" }

// DisclosureDir is the directory disclosures are written to, resolved
// against the config's directory; "" when none are kept (or with v1).
func (c *Config) DisclosureDir() string {
	if c.Disclosures == "none" {
		return ""
	}
	return c.Path(c.Disclosures)
}

// pageBase is where approvers open an approval.
func (c *Config) pageBase() string {
	if c.Approvals != nil && c.Approvals.PageURL != "" {
		return strings.TrimRight(c.Approvals.PageURL, "/")
	}
	return strings.TrimRight(c.Ledger.URL, "/")
}

// readSecret reads a file that must be readable by its owner only.
func readSecret(field, path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s: %s is readable by others (mode %04o); chmod 600 it", field, path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	return bytes.TrimSpace(b), nil
}
