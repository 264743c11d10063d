// Command ledgerd runs the decision ledger as a service: mediators append
// decisions over HTTP, auditors download exports and proofs.
//
// Usage:
//
//	ledgerd [serve] [--config FILE] [--data DIR] [--listen ADDR]
//	ledgerd keygen --name ORIGIN --out FILE
//	ledgerd check [--config FILE] [--data DIR]
//
// With no config, ledgerd serves on 127.0.0.1:8080 from a local data
// directory (./ledgerd-data), which it creates on first start with a new
// signing key, an empty store and one mediator token, printed once.
package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/decisionledger/ledger/ledger"
)

const usage = `Usage:
    ledgerd [serve] [--config FILE] [--data DIR] [--listen ADDR]
    ledgerd keygen --name ORIGIN --out FILE
    ledgerd check [--config FILE] [--data DIR]

Commands:
    serve     Serve the ledger (the default). With --config, everything comes
              from that file (see the Config type in cmd/ledgerd/config.go);
              without it, from the data directory --data (default
              ./ledgerd-data), created on first start with a signing key,
              an empty store, a config file and one mediator token, which is
              printed once and stored only as a hash.
    keygen    Write a new signing key to FILE (mode 0600) and print its
              verifier key.
    check     Read the whole store and check it, with ledgerd stopped: every
              frame and entry checksum, the index, every entry rehashed into
              the tree and the tiles, the latest checkpoint's root and
              signature. It opens the store as serve does (a crash's torn
              write is erased then) and signs nothing. Exit 0 if no damage
              is found, 1 naming the first damage.

Examples:
    $ ledgerd
    $ ledgerd keygen --name ledger.example.com/log --out ledger.key
    $ ledgerd serve --config /etc/ledgerd/ledgerd.json
    $ ledgerd check --config /etc/ledgerd/ledgerd.json
`

func main() {
	// Before anything is created: the store's files must be owner-only
	// whatever the umask (restrictUmask says why).
	restrictUmask()
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := "serve"
	if len(args) > 0 && (args[0] == "serve" || args[0] == "keygen" || args[0] == "check" || args[0] == "help" || args[0] == "--help" || args[0] == "-h") {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "keygen":
		return keygen(args, stdout, stderr)
	case "check":
		return check(ctx, args, stdout, stderr)
	case "serve":
		return serve(ctx, args, stdout, stderr)
	}
	fmt.Fprint(stdout, usage)
	return 0
}

func fail(stderr io.Writer, format string, args ...any) int {
	fmt.Fprintf(stderr, "ledgerd: error: %s\n", fmt.Sprintf(format, args...))
	return 1
}

func keygen(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("keygen", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	name := fs.String("name", "", "")
	out := fs.String("out", "", "")
	if err := fs.Parse(args); err != nil || *name == "" || *out == "" || fs.NArg() != 0 {
		fmt.Fprint(stderr, "ledgerd: error: keygen needs --name ORIGIN and --out FILE\n")
		return 2
	}
	vkey, err := writeKey(*out, *name)
	if err != nil {
		return fail(stderr, "%v", err)
	}
	fmt.Fprintln(stdout, vkey)
	return 0
}

// writeKey creates a new key file (mode 0600, never overwriting) and
// returns its verifier key.
func writeKey(path, name string) (string, error) {
	skey, vkey, err := ledger.GenerateKey(name)
	if err != nil {
		return "", err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("creating key file: %w", err)
	}
	if _, err := f.WriteString(skey + "\n"); err != nil {
		f.Close()
		return "", err
	}
	return vkey, f.Close()
}

func serve(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	configPath := fs.String("config", "", "")
	dataDir := fs.String("data", "ledgerd-data", "")
	listen := fs.String("listen", "", "")
	if err := fs.Parse(args); err != nil || fs.NArg() != 0 {
		fmt.Fprintf(stderr, "ledgerd: error: %v\n%s", err, usage)
		return 2
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	if *configPath == "" {
		path, token, err := initDataDir(*dataDir)
		if err != nil {
			return fail(stderr, "%v", err)
		}
		*configPath = path
		if token != "" {
			fmt.Fprintf(stdout, "created %s with a new key and store\nmediator \"local\" token (shown once, stored only as a hash): %s\n", *dataDir, token)
		} else {
			fmt.Fprintf(stdout, "using %s (mediator tokens are stored there as hashes only)\n", path)
		}
	}
	cfg, err := loadConfig(*configPath)
	if err != nil {
		return fail(stderr, "%v", err)
	}
	if *listen != "" {
		cfg.Listen = *listen
	}
	interval, _ := cfg.checkpointInterval()
	commitInterval, _ := cfg.minCommitInterval()
	key, err := ledger.LoadKey(cfg.KeyFile, ledger.KeyOptions{Name: cfg.KeyName})
	if err != nil {
		return fail(stderr, "%v", err)
	}
	var cat catalog
	if cfg.CatalogDir != "" {
		if cat, err = loadCatalog(cfg.CatalogDir); err != nil {
			return fail(stderr, "%v", err)
		}
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	store, err := ledger.OpenBadger(ctx, cfg.StoreDir, ledger.BadgerOptions{Logger: log})
	if err != nil {
		return fail(stderr, "%v", err)
	}
	defer store.Close()
	m := newMetrics()
	l, err := ledger.Open(ctx, store, key, ledger.Options{
		CheckpointInterval: interval, MinCommitInterval: commitInterval, Logger: log, OnBatch: m.observeBatch,
	})
	if err != nil {
		return fail(stderr, "%v", err)
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		l.Close()
		return fail(stderr, "%v", err)
	}
	srv, limited, err := newHTTPServer(&server{cfg: cfg, l: l, log: log, m: m, cat: cat}, ln)
	if err != nil {
		ln.Close()
		l.Close()
		return fail(stderr, "%v", err)
	}
	ln = limited
	scheme := "http"
	if cfg.TLS != nil {
		scheme = "https"
	}
	fmt.Fprintf(stdout, "ledgerd: serving %s on %s://%s\nverifier key: %s\n", key.Name(), scheme, ln.Addr(), key.VerifierKey())
	fmt.Fprintf(stdout, "try: curl %s://%s/v1/checkpoint\n", scheme, ln.Addr())
	log.Info("ledgerd started", "config", cfg)
	errc := make(chan error, 1)
	if cfg.TLS != nil {
		if srv.TLSConfig, err = cfg.TLS.tlsConfig(); err != nil {
			l.Close()
			return fail(stderr, "%v", err)
		}
		go func() { errc <- srv.ServeTLS(ln, "", "") }()
	} else {
		go func() { errc <- srv.Serve(ln) }()
	}
	select {
	case <-ctx.Done():
	case err := <-errc:
		log.Error("serving stopped", "error", err)
	}
	// Finish requests in flight (their entries become durable and are
	// acknowledged), then stop the ledger, which signs a final checkpoint.
	shutdown, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv.Shutdown(shutdown)
	if err := l.Close(); err != nil {
		return fail(stderr, "closing the ledger: %v", err)
	}
	return 0
}

// initDataDir creates the default data directory on first use: a signing
// key, an empty store, and a config naming one mediator "local" whose
// token is returned (and stored only as a hash). On later starts it
// returns the existing config and no token.
func initDataDir(dir string) (configPath, token string, err error) {
	configPath = filepath.Join(dir, "ledgerd.json")
	if _, err := os.Stat(configPath); err == nil {
		return configPath, "", nil
	}
	if err := os.MkdirAll(filepath.Join(dir, "store"), 0o700); err != nil {
		return "", "", err
	}
	keyPath := filepath.Join(dir, "ledger.key")
	if _, err := writeKey(keyPath, "ledger.localhost/log"); err != nil && !errors.Is(err, os.ErrExist) {
		return "", "", err
	}
	raw := make([]byte, 32)
	rand.Read(raw)
	token = hex.EncodeToString(raw)
	sum := sha256.Sum256([]byte(token))
	cfg := Config{
		Listen: defaultListen, KeyFile: "ledger.key", StoreDir: "store",
		Mediators: []Mediator{{Name: "local", TokenSHA256: hex.EncodeToString(sum[:])}},
	}
	b, _ := json.MarshalIndent(cfg, "", "  ")
	if err := os.WriteFile(configPath, append(b, '\n'), 0o600); err != nil {
		return "", "", err
	}
	return configPath, token, nil
}
