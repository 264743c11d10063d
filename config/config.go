// Package config is ledgerd's configuration file: its schema (Config and
// the types of its members), its strict parsing, every check and default,
// and what a reload may change. docs/config.md is its reference,
// generated from the doc comments of the types in this file.
//
// The file is one JSON object (Config). Parse refuses an unknown member,
// at any depth, and text after the object, and Parse and Load check every
// value before returning: a value out of its range is refused, never
// replaced by a default. Where a field's comment says so, 0, "" or an
// absent member means its default; elsewhere a zero that makes no sense
// (a "0s" timeout) is refused. A field kept as text or with a default
// has an accessor that returns its value in force: the field's name
// with Duration appended for a duration (IdleTimeoutDuration,
// LeaseTTLDuration, ...), WitnessesNeededCount, ConnectionCaps, TTLs.
// Errors name the file and the member at fault (mediators[1],
// approvals.pending_ttl), never a token, a hash or the store URL's
// password.
//
// Paths in the file (key_file, store_dir, catalog_dir, policy_dir and the
// tls files) are relative to the file's directory: Parse joins them to
// the directory of the path it is given. The key, the store directory
// and the directories named must exist, and the TLS pair must load: the
// config never creates a file.
//
// On SIGHUP a running ledgerd parses the file again as at start and puts
// its credentials in force: mediators (tokens and rates),
// reader_tokens_sha256, approvals.approvers and the TLS certificate.
// DiffCredentials names what changed in them; RestartFields names every
// other member that differs from the file at start and takes effect only
// at a restart (approvals and tls themselves when they appear or go
// away, approvals' other members, tls.client_ca_file). The credentials in
// force are ledgerd's, not this package's.
//
// The changes ledgerd's commands make to the file are here too
// (change.go): AddMediatorToken and RotateMediatorToken ("ledgerd
// token"), AddApprover and RemoveApprover ("ledgerd approver"), RotateKey
// ("ledgerd key rotate"), SetMember and UnsetMember ("ledgerd config",
// set.go: the top-level scalar members, ScalarMembers), and NewFile,
// the text "ledgerd init" and a first start write: only the key file,
// the store directory, one mediator and, if given, listen. Each change
// takes the file's text and returns the changed text, parsed and
// checked; only the members it names change, the others keep their
// place and value. They write no file: the caller replaces it
// atomically, and only if it still holds the text it read.
//
// Mediators are known by the SHA-256 of their bearer token (MediatorTokens,
// Authenticate, IsReader, each hash compared in constant time), and
// Config's LogValue shows names, never a hash, a key path or a password.
//
// The package imports no part of ledgerd, the ledger or a store
// (internal/rooms holds it to this): besides the standard library, only
// golang.org/x/mod/sumdb/note (previous_keys), pgx's URL parsing
// (github.com/jackc/pgx/v5, store), and small parsing helpers of this
// module: approval/approver (approvers), entry (identifiers), verify
// (witness keys and policy) and internal/pgurl (the store URL redacted).
package config

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"golang.org/x/mod/sumdb/note"

	"github.com/decisionledger/ledger/approval/approver"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/internal/pgurl"
	"github.com/decisionledger/ledger/verify"
)

// Config is the reference for ledgerd's configuration file (JSON);
// docs/config.md is generated from these comments. Every field says
// whether it is optional and its default. Unknown fields are refused, and
// so is a value out of range: ledgerd never replaces a value it was given.
// Relative paths are relative to the config file's directory.
type Config struct {
	// Listen is the address to serve on, host:port (":8080" for every
	// address). Optional; default "127.0.0.1:8080". The --listen option
	// overrides it.
	Listen string `json:"listen"`
	// KeyFile is the signing key: a note-format private key or an OpenSSH
	// ed25519 key, readable by its owner only. Required; it must exist
	// (ledgerd never creates a key a config names: "ledgerd init" and
	// "ledgerd keygen" make one).
	KeyFile string `json:"key_file"`
	// KeyName is the log origin, the name every checkpoint carries.
	// Optional for a note key, which carries its own name; default that
	// name, which KeyName, if set, must equal. Required for an OpenSSH
	// key, which carries none.
	KeyName string `json:"key_name"`
	// PreviousKeys are the note verifier keys of the log's earlier signing
	// keys, after a key rotation (docs/operations.md): the checkpoints and
	// entries they signed before the rotation checkpoint are accepted,
	// and the store opens only if its keys follow each other through
	// rotation checkpoints signed by both keys. Each has the log's name.
	// "ledgerd key rotate" adds the replaced key here. Optional; default
	// none: the key of key_file is the log's only key. A store whose key
	// was rotated does not open without its previous keys listed.
	PreviousKeys []string `json:"previous_keys"`
	// StoreDir is the store's directory. Required; it must exist
	// ("ledgerd init" creates one, with a key and a config). With Store
	// set, the log is in PostgreSQL and this directory holds only the
	// instance's own files: the policy archive (approval previews,
	// approver sessions and witness cosignatures are in the database).
	StoreDir string `json:"store_dir"`
	// Store, if set, is the URL of a PostgreSQL database that holds the
	// log (docs/postgres.md): postgres://user[:password]@host[:port]/db,
	// or postgresql://, with libpq's query parameters (sslmode, host=
	// a Unix socket directory, search_path). Several ledgerd instances
	// may share one database: exactly one sequences at a time, the others
	// serve reads and forward the rest to it (Cluster; docs/operations.md
	// "Several instances on PostgreSQL"). ledgerd never logs or prints
	// the URL's password. Optional; default none: a badger store in
	// StoreDir, for one instance.
	Store string `json:"store"`
	// Cluster names this instance among those sharing the Store's
	// database, and sets the sequencer's lease. Only with Store.
	// Optional; default every member's default.
	Cluster *ClusterConfig `json:"cluster"`
	// Mediators are the clients allowed to append. Required, at least one.
	// SIGHUP puts a changed list in force without a restart (tokens,
	// rates; docs/config.md "Reload").
	Mediators []Mediator `json:"mediators"`
	// CheckpointInterval is the least time between the starts of two
	// checkpoint signings, as a Go duration. A checkpoint is signed as
	// soon as the log has grown and this much has passed since the
	// previous one: an idle log signs none, and under load an entry waits
	// about this much for a checkpoint covering it, and one checkpoint is
	// signed and kept per interval (ledger.Options.CheckpointInterval).
	// Optional; default "100ms".
	CheckpointInterval string `json:"checkpoint_interval"`
	// MinCommitInterval is the least time between the starts of two group
	// commits unless a batch is full, as a Go duration. Under load it
	// makes batches larger and each append cheaper, for at most this much
	// added latency (ledger.Options.MinCommitInterval). Optional; default
	// "1ms"; "0s" commits as soon as the store is free.
	MinCommitInterval string `json:"min_commit_interval"`
	// MaxBodyBytes bounds an append request's body, in bytes. Optional;
	// 0 or absent means the default, 256 KiB; at most 16 MiB, as an entry
	// is at most 64 KiB (docs/entry.md) and each body is held in memory
	// while it is read. A negative value is refused.
	MaxBodyBytes int64 `json:"max_body_bytes"`
	// ReaderTokensSHA256, if not empty, protects the read endpoints
	// (checkpoints, entries, proofs, exports, tiles): they then need a
	// bearer token whose lower-case hex SHA-256 is listed here, or a
	// mediator's token. Optional; default empty: reads are public, as a
	// transparency log's usually are. SIGHUP puts a changed list in force.
	ReaderTokensSHA256 []string `json:"reader_tokens_sha256"`
	// TLS, if set, serves HTTPS instead of HTTP. Optional; default none,
	// HTTP.
	TLS *TLSConfig `json:"tls"`
	// TilesPrefix is the URL path under which the C2SP tlog-tiles read
	// API (checkpoint, tiles, entry bundles) is served, such as "/log".
	// Optional; default "" (the root: /checkpoint, /tile/...).
	TilesPrefix string `json:"tiles_prefix"`
	// IdleTimeout is how long a keep-alive connection may wait for its
	// next request before ledgerd closes it, as a Go duration. Optional;
	// default "60s", under the 90 s for which Go's HTTP client keeps idle
	// connections, so that the server, not the client, is the one to
	// close them (Go's client then retries on a new connection).
	IdleTimeout string `json:"idle_timeout"`
	// BodyTimeout is how long a client may take to send a request's body,
	// counted from the end of its header, as a Go duration. An append
	// whose body is late is refused with 408 body_timeout and its
	// connection closed. Optional; default "30s": the largest body
	// (MaxBodyBytes, 256 KiB by default) then needs about 70 kbit/s.
	// (The header itself must arrive within 10 s of the connection or of
	// the previous request; that bound is fixed.)
	BodyTimeout string `json:"body_timeout"`
	// WriteTimeout is how long a client may take to receive a response, as
	// a Go duration: counted from the end of the request header for reads;
	// for an append from the moment its answer is ready (so neither the
	// body, nor the commit, nor a wait for a checkpoint counts); for an
	// export or a tile, for each 64 KiB, so that a long export is bounded
	// by the client's pace rather than by its length. A connection whose
	// client stops reading is closed when it passes. Optional; default
	// "60s".
	WriteTimeout string `json:"write_timeout"`
	// MaxConnections is the most client connections served at once. When
	// all are taken and another client connects, ledgerd closes the
	// connection that has waited longest without a complete request
	// header to make room: an idle keep-alive connection at once, a new
	// connection that has sent nothing once it has had 250 ms to send a
	// byte, one that has sent part of its header once it has had 2 s from
	// its first byte to send the rest; until one of them can go, or if
	// every connection is busy with a request, the newcomer waits in the
	// listen queue (the timeouts above bound how long). Optional; default derived from the
	// process's descriptor limit (RLIMIT_NOFILE, which Go raises to the
	// hard limit at start): the limit less a reserve for the store's
	// files and the process of a quarter of it (at least 64), at most
	// 4096. A limit of 1024 gives 768; 256 gives 192. A large store holds
	// one descriptor per table file, so a store of many tables may need
	// a smaller value or a higher limit. A value the limit cannot hold
	// beside the reserve of 64 is refused at start.
	MaxConnections int `json:"max_connections"`
	// MaxConnectionsPerSource is the most connections from one source
	// (an IPv4 address, or an IPv6 /64) served at once, so that one client
	// cannot take every connection. When a source has this many and
	// opens another, ledgerd closes the source's own connection that has
	// waited longest without a complete request header, at once; if all
	// of them are busy with requests, it closes the newcomer at once
	// (counted in ledgerd_connections_refused_total). Optional; default
	// (0 or absent) half of max_connections, at least 1, on one machine's
	// store, and no cap on a PostgreSQL store (store set): instances of a
	// cluster forward to the sequencer from their own addresses, many
	// requests at once, and a cluster is reached through a load balancer,
	// where every connection comes from its address. A value of
	// max_connections or more sets no such cap: use it behind a reverse
	// proxy or load balancer (every connection then comes from the proxy's
	// address, and per-client caps belong in the proxy), and on the
	// sequencer of a cluster whose followers forward many requests
	// (docs/operations.md "Floods of connections"). A negative value is
	// refused.
	MaxConnectionsPerSource int `json:"max_connections_per_source"`
	// CatalogDir, if set, is a directory of action declarations (*.json,
	// docs/declarations.md). Appends must then name a declared action,
	// carry attributes its generated JSON Schema accepts and its
	// applied-tiers digest, and their entries (version 2) record the
	// declaration's action definition digest. The directory is read at
	// start only; a declaration that is refused, or an unreviewed draft
	// ("reviewed": false), stops the start, naming its file. Optional;
	// default none: any action, version 1 entries.
	CatalogDir string `json:"catalog_dir"`
	// PolicyDir, if set, is a directory of Cedar policy files (*.cedar,
	// docs/policies.md), validated against the catalog's declarations:
	// ledgerd then decides (POST /v1/decide) and records its decisions
	// as version 3 entries naming the policy set's digest. Requires
	// CatalogDir. A set that does not load stops the start, naming
	// file:line:col. ledgerd keeps every set it used in
	// store_dir/policies and publishes each in the log before deciding
	// with it; SIGHUP reloads the directory (an invalid set is refused
	// and the one in force stays). Optional; default none: POST
	// /v1/decide is refused (404 no_policies).
	PolicyDir string `json:"policy_dir"`
	// Approvals, if set, turns on exact-effect approvals
	// (docs/approvals.md): ledgerd records its approval deadlines in the
	// log, every needs_approval decision after that opens an approval,
	// approvers sign in to the approver's page under /approvals/, and
	// mediators consume approvals and report outcomes. Optional; default
	// none: needs_approval decisions open nothing, and the approval
	// endpoints answer 404 approvals_off.
	Approvals *ApprovalsConfig `json:"approvals"`
	// Witnesses are C2SP tlog-witness witnesses (such as litewitness)
	// that ledgerd asks to cosign each checkpoint it signs, with a
	// consistency proof from the size each last cosigned. ledgerd serves
	// the checkpoint with the cosignatures gathered (GET /v1/checkpoint,
	// the tlog-tiles checkpoint, exports and proofs), as C2SP
	// tlog-cosignature lines on the same note; appends never wait for a
	// witness (docs/operations.md "Witnesses"). Each witness must know
	// the log: its origin and verifier key. Optional; default none.
	Witnesses []WitnessConfig `json:"witnesses"`
	// WitnessesNeeded is how many of the witnesses must cosign a
	// checkpoint for it to count as witnessed: auditors refuse a
	// checkpoint with fewer (ledger-verify --witnesses-needed). ledgerd
	// never holds a checkpoint back for want of cosignatures: it serves
	// the latest with those gathered so far, saying how many in the
	// Ledger-Cosignatures header and comparing them with this number in
	// its metrics (ledgerd_checkpoint_cosignatures,
	// ledgerd_witnesses_needed). Optional; default (0 or absent) every
	// listed witness; at most the number of witnesses.
	WitnessesNeeded int `json:"witnesses_needed"`
	// WitnessInterval is the least time between the starts of two
	// submissions to one witness, as a Go duration: each submission
	// takes the latest checkpoint, so that a witness sees at most one
	// checkpoint per interval however often the log signs, and the
	// checkpoints signed meanwhile are never submitted (nor cosigned).
	// Public witnesses ask a log to declare its submission rate and may
	// refuse a log that exceeds it. Optional; default "1s".
	WitnessInterval string `json:"witness_interval"`
}

// ApprovalsConfig configures the approval lifecycle and the people who
// approve.
type ApprovalsConfig struct {
	// PendingTTL is how long an approval awaits a verdict, from its
	// request's entry time, as a Go duration in whole milliseconds, from
	// "1ms" to "8784h" (366 days). A verdict at or after the deadline is
	// refused. Optional; default "24h".
	PendingTTL string `json:"pending_ttl"`
	// ExecutionTTL is how long an approved request may be consumed, from
	// the verdict's entry time, as a Go duration in whole milliseconds,
	// from "1ms" to "8784h". A consumption at or after the deadline is
	// refused. Optional; default "1h".
	ExecutionTTL string `json:"execution_ttl"`
	// Approvers are the people who may approve or deny requests, each
	// with a name, an argon2id password hash and the actions (and,
	// optionally, principals) they may approve (docs/approvals.md
	// §Approvers; "ledgerd approver add" adds one). Optional; default
	// none: no request can be approved until one is added. SIGHUP puts a
	// changed list in force: a removed approver's sessions end, and so
	// do those of an approver whose password_hash changed.
	Approvers []approver.Approver `json:"approvers"`
	// TrustedOrigins are origins (scheme://host[:port]) besides ledgerd's
	// own from which the approver's page accepts a POST, for a page
	// served behind a proxy under another name. Optional; default none.
	TrustedOrigins []string `json:"trusted_origins"`
}

// The approval deadlines' defaults and bounds.
const (
	defaultPendingTTL   = 24 * time.Hour
	defaultExecutionTTL = time.Hour
	maxApprovalTTL      = 366 * 24 * time.Hour
)

// TTLs returns the pending and execution TTLs, their defaults for those
// not given.
func (a *ApprovalsConfig) TTLs() (pending, execution time.Duration, err error) {
	if pending, err = approvalTTL("approvals.pending_ttl", a.PendingTTL, defaultPendingTTL); err != nil {
		return 0, 0, err
	}
	execution, err = approvalTTL("approvals.execution_ttl", a.ExecutionTTL, defaultExecutionTTL)
	return pending, execution, err
}

func approvalTTL(field, text string, def time.Duration) (time.Duration, error) {
	d, err := positiveDuration(field, text, def)
	if err != nil {
		return 0, err
	}
	if d%time.Millisecond != 0 || d > maxApprovalTTL {
		return 0, fmt.Errorf("%s %q is out of range: whole milliseconds, from 1ms to 8784h (366 days)", field, text)
	}
	return d, nil
}

// check refuses approvals settings out of range, naming the field.
func (a *ApprovalsConfig) check() error {
	if _, _, err := a.TTLs(); err != nil {
		return err
	}
	for i, ap := range a.Approvers {
		if err := ap.Check(); err != nil {
			return fmt.Errorf("approvals.approvers[%d]: %w", i, err)
		}
	}
	if _, err := approver.ByName(a.Approvers); err != nil {
		return fmt.Errorf("approvals.approvers: %w", err)
	}
	for i, o := range a.TrustedOrigins {
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.User != nil {
			return fmt.Errorf("approvals.trusted_origins[%d] is not an origin, scheme://host[:port]", i)
		}
	}
	return nil
}

// ClusterConfig is this instance's part among the ledgerd instances that
// share one PostgreSQL database.
type ClusterConfig struct {
	// Instance names this instance in the lease, logs, metrics and the
	// Ledger-Forwarded-By header of the requests it forwards: 1 to 64
	// letters, digits, '.', '_' or '-', unique among the instances.
	// Optional; default the host name (its characters outside that set
	// replaced by '-') and a random suffix, new at every start.
	Instance string `json:"instance"`
	// AdvertiseURL is where the other instances reach this one to
	// forward requests while it sequences: http://host:port, or https://
	// with TLS, with no path. Optional; default the scheme and the listen
	// address (with the port really bound when listen's is 0), refused
	// when listen's host is empty, 0.0.0.0 or :: (name a host the other
	// instances can reach).
	AdvertiseURL string `json:"advertise_url"`
	// LeaseTTL is how long the sequencer's lease lasts unless renewed, as
	// a Go duration from "300ms" to "10m". The sequencer renews it every
	// third of it and steps down when it cannot; the other instances try
	// to take an expired lease every sixth of it, so that one replaces a
	// dead sequencer within about 1.2 times it. Optional; default "3s".
	LeaseTTL string `json:"lease_ttl"`
}

// The lease's default and bounds.
const (
	defaultLeaseTTL = 3 * time.Second
	minLeaseTTL     = 300 * time.Millisecond
	maxLeaseTTL     = 10 * time.Minute
)

// instanceName is the form of cluster.instance: it travels in a header.
var instanceName = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// LeaseTTLDuration is cluster.lease_ttl, or its default.
func (c *ClusterConfig) LeaseTTLDuration() (time.Duration, error) {
	if c == nil || c.LeaseTTL == "" {
		return defaultLeaseTTL, nil
	}
	d, err := time.ParseDuration(c.LeaseTTL)
	if err != nil || d < minLeaseTTL || d > maxLeaseTTL {
		return 0, fmt.Errorf("cluster.lease_ttl %q is not a duration from %v to %v", c.LeaseTTL, minLeaseTTL, maxLeaseTTL)
	}
	return d, nil
}

// checkStore refuses a store that is not a PostgreSQL URL pgx accepts,
// and cluster settings out of range or without such a store. Its
// messages show the URL only redacted (pgurl.Redact).
func (c *Config) checkStore() error {
	if c.Store == "" {
		if c.Cluster != nil {
			return errors.New("cluster needs store, a postgres:// URL: a badger store in store_dir serves one instance")
		}
		return nil
	}
	u, err := url.Parse(c.Store)
	var ue *url.Error
	switch {
	case errors.As(err, &ue):
		// url.Error's own message repeats the URL: give its cause alone.
		return fmt.Errorf("store %s is not a URL: %v", pgurl.Redact(c.Store), ue.Err)
	case err != nil:
		return fmt.Errorf("store %s is not a URL", pgurl.Redact(c.Store))
	case u.Scheme != "postgres" && u.Scheme != "postgresql":
		return fmt.Errorf("store: the scheme %q is not postgres or postgresql (a badger store in store_dir needs no store member)", u.Scheme)
	}
	if _, err := pgx.ParseConfig(c.Store); err != nil {
		// pgx's message may repeat the URL: give only the innermost cause.
		why := "malformed"
		var ue *url.Error
		if errors.As(err, &ue) {
			why = ue.Err.Error()
		} else if inner := errors.Unwrap(err); inner != nil {
			why = inner.Error()
		}
		return fmt.Errorf("store %s is not a PostgreSQL URL pgx accepts: %s", pgurl.Redact(c.Store), why)
	}
	cl := c.Cluster
	if cl == nil {
		return nil
	}
	if cl.Instance != "" && !instanceName.MatchString(cl.Instance) {
		return fmt.Errorf("cluster.instance %q is not 1 to 64 letters, digits, '.', '_' or '-'", cl.Instance)
	}
	if cl.AdvertiseURL != "" {
		if err := c.checkAdvertise(cl.AdvertiseURL); err != nil {
			return err
		}
	}
	_, err = cl.LeaseTTLDuration()
	return err
}

// checkAdvertise refuses an advertise URL that is not scheme://host:port
// with the scheme ledgerd serves (https with tls, else http).
func (c *Config) checkAdvertise(text string) error {
	want := "http"
	if c.TLS != nil {
		want = "https"
	}
	u, err := url.Parse(text)
	if err != nil || u.Scheme != want || u.Host == "" || u.Port() == "" || (u.Path != "" && u.Path != "/") ||
		u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("cluster.advertise_url %q is not %s://host:port (where the other instances reach this one, with no path)", text, want)
	}
	return nil
}

// AdvertiseURL is cluster.advertise_url, or its default from the address
// ledgerd listens on (bound: the listener's, whose port is the real one
// when listen's is 0).
func (c *Config) AdvertiseURL(bound net.Addr) (string, error) {
	if c.Cluster != nil && c.Cluster.AdvertiseURL != "" {
		return strings.TrimSuffix(c.Cluster.AdvertiseURL, "/"), nil
	}
	host, port, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return "", err
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		return "", fmt.Errorf("cluster.advertise_url is required: listen %q names no host the other instances could reach", c.Listen)
	}
	if tcp, ok := bound.(*net.TCPAddr); ok && port == "0" {
		port = strconv.Itoa(tcp.Port)
	}
	scheme := "http"
	if c.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(host, port), nil
}

// Instance is cluster.instance, or its default: the host name and a
// random suffix.
func (c *Config) Instance() string {
	if c.Cluster != nil && c.Cluster.Instance != "" {
		return c.Cluster.Instance
	}
	host, _ := os.Hostname()
	host = regexp.MustCompile(`[^A-Za-z0-9._-]`).ReplaceAllString(host, "-")
	if len(host) > 50 {
		host = host[:50]
	}
	if host == "" {
		host = "ledgerd"
	}
	var suffix [4]byte
	rand.Read(suffix[:])
	return host + "-" + hex.EncodeToString(suffix[:])
}

// WitnessConfig is one C2SP tlog-witness witness.
type WitnessConfig struct {
	// Name names the witness in metrics and logs: an identifier, unique
	// among the witnesses. Required.
	Name string `json:"name"`
	// URL is the witness's submission prefix (http or https):
	// checkpoints are POSTed to URL + "/add-checkpoint". Required.
	URL string `json:"url"`
	// Key is the witness's cosignature/v1 verifier key (C2SP
	// tlog-cosignature, key type 0x04), "<name>+<hash>+<base64>", as the
	// witness publishes it (litewitness logs it at start). Cosignature
	// lines that do not verify with it are dropped. Required; no two
	// witnesses may share a key.
	Key string `json:"key"`
}

// TLSConfig serves HTTPS, optionally requiring client certificates.
type TLSConfig struct {
	// CertFile is the server's PEM certificate chain. Required. SIGHUP
	// reads it and KeyFile again (a renewed certificate, or other files
	// named here): new connections get the new certificate.
	CertFile string `json:"cert_file"`
	// KeyFile is the server's PEM private key, for CertFile. Required.
	KeyFile string `json:"key_file"`
	// ClientCAFile, if set, makes every connection present a client
	// certificate signed by one of these PEM CA certificates (mutual
	// TLS), in addition to the bearer tokens. Optional; default none.
	// Read at start only.
	ClientCAFile string `json:"client_ca_file"`
}

// ServerConfig builds the server's TLS configuration.
func (t *TLSConfig) ServerConfig() (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	c := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if t.ClientCAFile != "" {
		pem, err := os.ReadFile(t.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("tls: client_ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls: client_ca_file %s holds no PEM certificate", t.ClientCAFile)
		}
		c.ClientCAs, c.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return c, nil
}

// Mediator is one appending client. Its identity in entries is Name, taken
// from the credential, never from a request.
type Mediator struct {
	// Name is recorded as the entries' mediator: an identifier (UTF-8
	// without control or format characters, docs/entry.md §1.1), unique
	// in the config. Required.
	Name string `json:"name"`
	// TokenSHA256 is the lower-case hex SHA-256 of the mediator's bearer
	// token, no other mediator's. Required. The token itself is never
	// stored ("ledgerd token add" and "ledgerd token rotate" make one).
	TokenSHA256 string `json:"token_sha256"`
	// PreviousTokenSHA256 is the lower-case hex SHA-256 of the token the
	// mediator had before "ledgerd token rotate --overlap", which stays
	// valid as the same mediator's until PreviousTokenExpires, so that a
	// fleet of mediators can move to the new token without refusals.
	// Optional; default none. Only with PreviousTokenExpires; it may be
	// neither TokenSHA256 nor any other mediator's token.
	PreviousTokenSHA256 string `json:"previous_token_sha256"`
	// PreviousTokenExpires is when PreviousTokenSHA256 stops being
	// valid, by the server's clock at each request: an RFC 3339 time in
	// UTC, such as "2026-12-01T15:00:00Z". From that time on the
	// previous token is refused as unknown; the config stays valid.
	// Optional; default none. Only with PreviousTokenSHA256.
	PreviousTokenExpires string `json:"previous_token_expires"`
	// RatePerSecond bounds the mediator's sustained appends per second;
	// beyond it appends get 429 with Retry-After. Optional; default 0,
	// unlimited; otherwise at least 0.001 (one append in 1,000 s), so
	// that a Retry-After stays meaningful. A negative value is refused.
	RatePerSecond float64 `json:"rate_per_second"`
	// Burst is how many appends may come at once within the rate.
	// Optional; default the rate rounded up (at least 1). Only with
	// RatePerSecond; a negative value is refused.
	Burst int `json:"burst"`
}

// LogValue keeps token hashes and paths of keys out of logs.
func (c Config) LogValue() slog.Value {
	names := make([]string, len(c.Mediators))
	for i, m := range c.Mediators {
		names[i] = m.Name
	}
	maxConns, perSource, _ := c.ConnectionCaps()
	witnesses := make([]string, len(c.Witnesses))
	for i, w := range c.Witnesses {
		witnesses[i] = w.Name
	}
	store := "badger in store_dir"
	if c.Store != "" {
		store = pgurl.Redact(c.Store)
	}
	attrs := []slog.Attr{slog.String("listen", c.Listen), slog.String("store_dir", c.StoreDir), slog.String("store", store),
		slog.String("mediators", strings.Join(names, ",")), slog.Int("max_connections", maxConns),
		slog.Int("max_connections_per_source", min(perSource, maxConns)),
		slog.String("witnesses", strings.Join(witnesses, ",")), slog.Int("witnesses_needed", c.WitnessesNeededCount())}
	// Previous tokens valid at start, by expiry; never their hashes.
	if n, expiries := PreviousTokens(&c, time.Now()); n > 0 {
		attrs = append(attrs, slog.String("previous_tokens", expiries))
	}
	return slog.GroupValue(attrs...)
}

const (
	// DefaultListen is listen's default.
	DefaultListen       = "127.0.0.1:8080"
	defaultMaxBodyBytes = 256 << 10
	maxMaxBodyBytes     = 16 << 20
	minRatePerSecond    = 0.001
	defaultIdleTimeout  = 60 * time.Second
	// DefaultBodyTimeout and DefaultWriteTimeout are body_timeout's and
	// write_timeout's defaults.
	DefaultBodyTimeout  = 30 * time.Second
	DefaultWriteTimeout = 60 * time.Second
	// defaultCheckpointInterval is checkpoint_interval's default,
	// ledger.DefaultCheckpointInterval, which this package does not
	// import (TestCheckpointIntervalDefault holds them equal).
	defaultCheckpointInterval = 100 * time.Millisecond
	// maxDefaultConnections caps the MaxConnections derived from the
	// descriptor limit: each connection costs a goroutine and buffers
	// (some 20 KiB), and mediators need few.
	maxDefaultConnections = 4096
	// minDescriptorReserve is the fewest descriptors left to the store
	// and the process beside MaxConnections.
	minDescriptorReserve = 64
)

// positiveDuration parses a duration field of the config; "" is def.
func positiveDuration(field, text string, def time.Duration) (time.Duration, error) {
	if text == "" {
		return def, nil
	}
	d, err := time.ParseDuration(text)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s %q is not a positive duration", field, text)
	}
	return d, nil
}

// IdleTimeoutDuration is IdleTimeout, or its default.
func (c *Config) IdleTimeoutDuration() (time.Duration, error) {
	return positiveDuration("idle_timeout", c.IdleTimeout, defaultIdleTimeout)
}

// BodyTimeoutDuration is BodyTimeout, or DefaultBodyTimeout.
func (c *Config) BodyTimeoutDuration() (time.Duration, error) {
	return positiveDuration("body_timeout", c.BodyTimeout, DefaultBodyTimeout)
}

// WriteTimeoutDuration is WriteTimeout, or DefaultWriteTimeout.
func (c *Config) WriteTimeoutDuration() (time.Duration, error) {
	return positiveDuration("write_timeout", c.WriteTimeout, DefaultWriteTimeout)
}

// maxConnections is MaxConnections, or its default derived from the
// process's descriptor limit (fileLimit). It refuses a value that leaves
// fewer than minDescriptorReserve descriptors of the limit.
func (c *Config) maxConnections() (int, error) {
	limit, known := fileLimit()
	switch {
	case c.MaxConnections < 0:
		return 0, fmt.Errorf("max_connections %d is negative", c.MaxConnections)
	case c.MaxConnections > 0:
		if known && uint64(c.MaxConnections) > limit-min(limit, minDescriptorReserve) {
			return 0, fmt.Errorf("max_connections %d leaves fewer than %d of the process's %d file descriptors (RLIMIT_NOFILE) to the store: raise the limit (ulimit -n) or lower max_connections",
				c.MaxConnections, minDescriptorReserve, limit)
		}
		return c.MaxConnections, nil
	case !known:
		return maxDefaultConnections, nil
	}
	n := defaultMaxConnections(limit)
	if n < 1 {
		return 0, fmt.Errorf("the process may open only %d files (RLIMIT_NOFILE), too few for the store and connections: raise the limit (ulimit -n)", limit)
	}
	return n, nil
}

// ConnectionCaps returns maxConnections and MaxConnectionsPerSource, or
// its default: half of maxConnections, at least 1, or on a PostgreSQL
// store maxConnections (no cap). A per-source cap of max or more caps
// nothing.
func (c *Config) ConnectionCaps() (maxConns, perSource int, err error) {
	if maxConns, err = c.maxConnections(); err != nil {
		return 0, 0, err
	}
	switch {
	case c.MaxConnectionsPerSource < 0:
		return 0, 0, fmt.Errorf("max_connections_per_source %d is negative", c.MaxConnectionsPerSource)
	case c.MaxConnectionsPerSource > 0:
		return maxConns, c.MaxConnectionsPerSource, nil
	}
	if c.Store != "" {
		return maxConns, maxConns, nil
	}
	return maxConns, max(1, maxConns/2), nil
}

// defaultMaxConnections derives MaxConnections from a descriptor limit:
// the limit less a quarter of it (at least minDescriptorReserve), at most
// maxDefaultConnections. It is 0 when the limit leaves nothing.
func defaultMaxConnections(limit uint64) int {
	reserve := max(limit/4, minDescriptorReserve)
	if limit <= reserve {
		return 0
	}
	return int(min(limit-reserve, maxDefaultConnections))
}

// MinCommitIntervalDuration is MinCommitInterval as ledger.Options has
// it: 0 for the ledger's default, -1 for no pacing.
func (c *Config) MinCommitIntervalDuration() (time.Duration, error) {
	if c.MinCommitInterval == "" {
		return 0, nil // the ledger's default
	}
	d, err := time.ParseDuration(c.MinCommitInterval)
	if err != nil || d < 0 || d > time.Second {
		return 0, fmt.Errorf("min_commit_interval %q is not a duration from 0s to 1s", c.MinCommitInterval)
	}
	if d == 0 {
		return -1, nil // no pacing
	}
	return d, nil
}

// CheckpointIntervalDuration is CheckpointInterval, or its default, the
// ledger's (defaultCheckpointInterval).
func (c *Config) CheckpointIntervalDuration() (time.Duration, error) {
	if c.CheckpointInterval == "" {
		return defaultCheckpointInterval, nil
	}
	d, err := time.ParseDuration(c.CheckpointInterval)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("checkpoint_interval %q is not a positive duration", c.CheckpointInterval)
	}
	return d, nil
}

// Load reads and checks a config file. Paths in it are relative to
// the file's directory.
func Load(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(b, path)
}

// Parse checks the text of the config file at path (which it does not
// read), as Load does.
func Parse(b []byte, path string) (*Config, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var c Config
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%s: text after the config's JSON object", path)
	}
	base := filepath.Dir(path)
	paths := []*string{&c.KeyFile, &c.StoreDir, &c.CatalogDir, &c.PolicyDir}
	if c.TLS != nil {
		paths = append(paths, &c.TLS.CertFile, &c.TLS.KeyFile, &c.TLS.ClientCAFile)
	}
	for _, p := range paths {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(base, *p)
		}
	}
	if err := c.Check(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &c, nil
}

// Check checks a config as Parse does after reading it, with the paths as
// they are, and sets the defaults it stores (listen, max_body_bytes).
func (c *Config) Check() error {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if err := CheckListen(c.Listen); err != nil {
		return err
	}
	switch {
	case c.MaxBodyBytes == 0:
		c.MaxBodyBytes = defaultMaxBodyBytes
	case c.MaxBodyBytes < 0 || c.MaxBodyBytes > maxMaxBodyBytes:
		return fmt.Errorf("max_body_bytes %d is out of range: from 1 to %d (16 MiB), or 0 for the default (%d)", c.MaxBodyBytes, maxMaxBodyBytes, defaultMaxBodyBytes)
	}
	if p := c.TilesPrefix; p != "" && (!strings.HasPrefix(p, "/") || strings.ContainsAny(p, " {}")) {
		return fmt.Errorf("tiles_prefix %q must be a path starting with /", p)
	}
	if c.KeyFile == "" {
		return errors.New("key_file is required")
	}
	if c.StoreDir == "" {
		return errors.New("store_dir is required")
	}
	if st, err := os.Stat(c.StoreDir); err != nil || !st.IsDir() {
		return fmt.Errorf("store_dir %s does not exist: ledgerd creates no store a config names", c.StoreDir)
	}
	if _, err := os.Stat(c.KeyFile); err != nil {
		return fmt.Errorf("key_file %s does not exist: ledgerd creates no key a config names (ledgerd keygen makes one)", c.KeyFile)
	}
	for i, vkey := range c.PreviousKeys {
		if _, err := note.NewVerifier(vkey); err != nil {
			return fmt.Errorf("previous_keys[%d]: not a note verifier key (<name>+<hash>+<base64>): %v", i, err)
		}
	}
	if len(c.Mediators) == 0 {
		return errors.New("mediators: at least one is required")
	}
	seen := map[string]bool{}
	tokens := map[string]int{}
	for i, m := range c.Mediators {
		if err := CheckMediatorName(m.Name); err != nil {
			return fmt.Errorf("mediators[%d]: %w", i, err)
		}
		if seen[m.Name] {
			return fmt.Errorf("mediators[%d]: name %q repeated", i, m.Name)
		}
		seen[m.Name] = true
		if !isTokenHash(m.TokenSHA256) {
			return fmt.Errorf("mediators[%d] (%s): token_sha256 is not 64 lower-case hex digits", i, m.Name)
		}
		if j, ok := tokens[m.TokenSHA256]; ok {
			// A token must say which mediator appends.
			return fmt.Errorf("mediators[%d] (%s): token_sha256 is also mediators[%d]'s: each mediator needs its own token", i, m.Name, j)
		}
		tokens[m.TokenSHA256] = i
		if err := m.checkPrevious(); err != nil {
			return fmt.Errorf("mediators[%d] (%s): %w", i, m.Name, err)
		}
		if m.PreviousTokenSHA256 != "" {
			if j, ok := tokens[m.PreviousTokenSHA256]; ok {
				return fmt.Errorf("mediators[%d] (%s): previous_token_sha256 is also mediators[%d]'s: each mediator needs its own token", i, m.Name, j)
			}
			tokens[m.PreviousTokenSHA256] = i
		}
		switch {
		case m.RatePerSecond < 0 || m.RatePerSecond > 0 && m.RatePerSecond < minRatePerSecond:
			return fmt.Errorf("mediators[%d] (%s): rate_per_second %g is out of range: at least %g, or 0 for unlimited", i, m.Name, m.RatePerSecond, minRatePerSecond)
		case m.Burst < 0:
			return fmt.Errorf("mediators[%d] (%s): burst %d is negative", i, m.Name, m.Burst)
		case m.Burst > 0 && m.RatePerSecond == 0:
			return fmt.Errorf("mediators[%d] (%s): burst needs rate_per_second", i, m.Name)
		}
	}
	if c.TLS != nil {
		if c.TLS.CertFile == "" || c.TLS.KeyFile == "" {
			return errors.New("tls: cert_file and key_file are required")
		}
		if _, err := c.TLS.ServerConfig(); err != nil {
			return err
		}
	}
	for i, h := range c.ReaderTokensSHA256 {
		if b, err := hex.DecodeString(h); err != nil || len(b) != sha256.Size || strings.ToLower(h) != h {
			return fmt.Errorf("reader_tokens_sha256[%d] is not 64 lower-case hex digits", i)
		}
	}
	if c.CatalogDir != "" {
		if st, err := os.Stat(c.CatalogDir); err != nil || !st.IsDir() {
			return fmt.Errorf("catalog_dir %s does not exist", c.CatalogDir)
		}
	}
	if c.PolicyDir != "" {
		if c.CatalogDir == "" {
			return errors.New("policy_dir needs catalog_dir: policies are validated against the catalog's declarations")
		}
		if st, err := os.Stat(c.PolicyDir); err != nil || !st.IsDir() {
			return fmt.Errorf("policy_dir %s does not exist", c.PolicyDir)
		}
	}
	if _, err := c.CheckpointIntervalDuration(); err != nil {
		return err
	}
	if _, err := c.IdleTimeoutDuration(); err != nil {
		return err
	}
	if _, err := c.BodyTimeoutDuration(); err != nil {
		return err
	}
	if _, err := c.WriteTimeoutDuration(); err != nil {
		return err
	}
	if _, _, err := c.ConnectionCaps(); err != nil {
		return err
	}
	if c.Approvals != nil {
		if err := c.Approvals.check(); err != nil {
			return err
		}
	}
	if err := c.checkWitnesses(); err != nil {
		return err
	}
	if err := c.checkStore(); err != nil {
		return err
	}
	_, err := c.MinCommitIntervalDuration()
	return err
}

// checkWitnesses refuses a witness without a name, an http(s) URL or a
// cosignature/v1 key, two witnesses with one name or key, and a
// witnesses_needed out of range.
func (c *Config) checkWitnesses() error {
	names := map[string]bool{}
	var keys []*verify.WitnessKey
	for i, w := range c.Witnesses {
		if err := CheckMediatorName(w.Name); err != nil {
			return fmt.Errorf("witnesses[%d]: %w", i, err)
		}
		if names[w.Name] {
			return fmt.Errorf("witnesses[%d]: name %q repeated", i, w.Name)
		}
		names[w.Name] = true
		u, err := url.Parse(w.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return fmt.Errorf("witnesses[%d] (%s): url %q is not an http or https URL (the witness's submission prefix, such as https://witness.example.org)", i, w.Name, w.URL)
		}
		k, err := verify.ParseWitnessKey(w.Key)
		if err != nil {
			return fmt.Errorf("witnesses[%d] (%s): key: %w", i, w.Name, err)
		}
		keys = append(keys, k)
	}
	switch {
	case c.WitnessesNeeded < 0 || c.WitnessesNeeded > len(c.Witnesses):
		return fmt.Errorf("witnesses_needed %d is out of range: from 1 to the number of witnesses (%d), or 0 for all of them", c.WitnessesNeeded, len(c.Witnesses))
	}
	if _, err := verify.NewWitnessPolicy(keys, c.WitnessesNeededCount()); err != nil {
		return fmt.Errorf("witnesses: %w", err)
	}
	_, err := c.WitnessIntervalDuration()
	return err
}

// defaultWitnessInterval is witness_interval's default: the rate of
// submissions when the log signed a checkpoint a second, so that a rate
// declared to a witness's operator then still holds.
const defaultWitnessInterval = time.Second

// WitnessIntervalDuration is WitnessInterval, or its default.
func (c *Config) WitnessIntervalDuration() (time.Duration, error) {
	if c.WitnessInterval == "" {
		return defaultWitnessInterval, nil
	}
	d, err := time.ParseDuration(c.WitnessInterval)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("witness_interval %q is not a positive duration", c.WitnessInterval)
	}
	return d, nil
}

// WitnessesNeededCount is WitnessesNeeded, or its default: every
// witness.
func (c *Config) WitnessesNeededCount() int {
	if c.WitnessesNeeded == 0 {
		return len(c.Witnesses)
	}
	return c.WitnessesNeeded
}

// CheckListen refuses a listen address that is not host:port.
func CheckListen(addr string) error {
	if _, port, err := net.SplitHostPort(addr); err != nil || port == "" {
		return fmt.Errorf("listen %q is not host:port (such as 127.0.0.1:8080, or :8080 for every address)", addr)
	}
	return nil
}

// CheckMediatorName refuses a mediator name that is not an identifier:
// the name is every entry's mediator.
func CheckMediatorName(name string) error {
	if name == "" {
		return errors.New("name is required")
	}
	if err := entry.CheckIdentifier(name); err != nil || !utf8.ValidString(name) {
		return fmt.Errorf("name %q is not an identifier (UTF-8 without control or format characters, docs/entry.md §1.1)", name)
	}
	return nil
}

// IsReader reports whether this bearer token is a reader's, compared in
// constant time with every reader's hash.
func (c *Config) IsReader(token string) bool {
	sum := sha256.Sum256([]byte(token))
	ok := false
	for _, h := range c.ReaderTokensSHA256 {
		want, _ := hex.DecodeString(h)
		if subtle.ConstantTimeCompare(sum[:], want) == 1 {
			ok = true
		}
	}
	return ok
}

// Authenticate returns the mediator whose token this is now, by
// time.Now (the server judges with its credentials' clock).
func (c *Config) Authenticate(token string) (string, bool) {
	name, _ := c.MediatorTokens().Authenticate(token, time.Now())
	return name, name != ""
}

// isTokenHash reports whether h is a SHA-256 in 64 lower-case hex digits.
func isTokenHash(h string) bool {
	b, err := hex.DecodeString(h)
	return err == nil && len(b) == sha256.Size && strings.ToLower(h) == h
}

// checkPrevious checks the mediator's previous token: both members or
// neither, a hash other than its current one, an RFC 3339 UTC time.
func (m Mediator) checkPrevious() error {
	switch {
	case m.PreviousTokenSHA256 == "" && m.PreviousTokenExpires == "":
		return nil
	case m.PreviousTokenSHA256 == "":
		return errors.New("previous_token_expires needs previous_token_sha256")
	case m.PreviousTokenExpires == "":
		return errors.New("previous_token_sha256 needs previous_token_expires: when the previous token stops being valid")
	case !isTokenHash(m.PreviousTokenSHA256):
		return errors.New("previous_token_sha256 is not 64 lower-case hex digits")
	case m.PreviousTokenSHA256 == m.TokenSHA256:
		return errors.New("previous_token_sha256 is its token_sha256: the previous token must be another")
	}
	if _, err := ParsePreviousExpires(m.PreviousTokenExpires); err != nil {
		return err
	}
	return nil
}

// ParsePreviousExpires parses previous_token_expires: RFC 3339, in UTC.
func ParsePreviousExpires(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || !strings.HasSuffix(s, "Z") {
		return time.Time{}, fmt.Errorf("previous_token_expires %q is not an RFC 3339 time in UTC (such as 2026-12-01T15:00:00Z)", s)
	}
	return t, nil
}

// PreviousTokens counts the mediators' previous tokens valid at now and
// names their expiries, "mediator=time" joined by commas; never a hash.
func PreviousTokens(c *Config, now time.Time) (int, string) {
	var list []string
	for _, m := range c.Mediators {
		if m.PreviousTokenSHA256 == "" {
			continue
		}
		if t, err := ParsePreviousExpires(m.PreviousTokenExpires); err == nil && now.Before(t) {
			list = append(list, m.Name+"="+m.PreviousTokenExpires)
		}
	}
	return len(list), strings.Join(list, ",")
}

// mediatorToken is one token hash a mediator is known by: its current
// one (expires zero), or its previous one, valid before expires.
type mediatorToken struct {
	name     string
	sum      [sha256.Size]byte
	previous bool
	expires  time.Time
}

// MediatorTokens are every mediator's token hashes, decoded once.
type MediatorTokens []mediatorToken

// MediatorTokens decodes the checked config's token hashes.
func (c *Config) MediatorTokens() MediatorTokens {
	var ts MediatorTokens
	for _, m := range c.Mediators {
		t := mediatorToken{name: m.Name}
		hex.Decode(t.sum[:], []byte(m.TokenSHA256))
		ts = append(ts, t)
		if m.PreviousTokenSHA256 != "" {
			p := mediatorToken{name: m.Name, previous: true}
			hex.Decode(p.sum[:], []byte(m.PreviousTokenSHA256))
			p.expires, _ = ParsePreviousExpires(m.PreviousTokenExpires)
			ts = append(ts, p)
		}
	}
	return ts
}

// Authenticate returns the mediator whose token this is at now, and
// whether it is the mediator's previous token: a previous token is
// valid before its expiry only (at it, refused). Every hash, expired or
// not, is compared in constant time, so the answer's timing says
// nothing about which one matched.
func (ts MediatorTokens) Authenticate(token string, now time.Time) (name string, previous bool) {
	sum := sha256.Sum256([]byte(token))
	for _, t := range ts {
		match := subtle.ConstantTimeCompare(sum[:], t.sum[:]) == 1
		if match && (!t.previous || now.Before(t.expires)) {
			name, previous = t.name, t.previous
		}
	}
	return name, previous
}
