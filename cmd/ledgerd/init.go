package main

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/decisionledger/ledger/config"
	"github.com/decisionledger/ledger/internal/atomicfile"
	"github.com/decisionledger/ledger/ledger"
)

const (
	// localOrigin and localMediator are a first start's log origin and
	// mediator.
	localOrigin   = "ledger.localhost/log"
	localMediator = "local"
	// keyName and storeName are a new data directory's key file and
	// store, beside its config.
	keyName   = "ledger.key"
	storeName = "store"
)

// initCommand is "ledgerd init": a data directory for production.
func initCommand(args []string, stdout, stderr io.Writer) int {
	fset := flag.NewFlagSet("init", flag.ContinueOnError)
	var df dataFlags
	df.register(fset)
	origin := fset.String("name", "", "")
	mediator := fset.String("mediator", localMediator, "")
	listen := fset.String("listen", "", "")
	if _, code, ok := parseArgs(fset, args, 0, stdout, stderr); !ok {
		return code
	}
	listenSet := false
	fset.Visit(func(f *flag.Flag) { listenSet = listenSet || f.Name == "listen" })
	if err := df.check(fset); err != nil {
		return usageError(stderr, "init", "%v", err)
	}
	if *origin == "" {
		return usageError(stderr, "init", "init needs --name ORIGIN, the log's name in every checkpoint, such as ledger.example.com/log")
	}
	if err := config.CheckMediatorName(*mediator); err != nil {
		return usageError(stderr, "init", "--mediator: %v", err)
	}
	if listenSet {
		if err := config.CheckListen(*listen); err != nil {
			return usageError(stderr, "init", "--listen: %v", err)
		}
	}
	res, err := createDataDir(newDataDir{config: df.path(), origin: *origin, mediator: *mediator, listen: *listen})
	if err != nil {
		return fail(stderr, "init: %v", err)
	}
	dir := filepath.Dir(df.path())
	fmt.Fprintf(stdout, "created %s: signing key %s (mode 0600), an empty store %s, config %s\n",
		dir, filepath.Join(dir, keyName), filepath.Join(dir, storeName), df.path())
	fmt.Fprintf(stdout, "mediator %q token (shown once, stored only as a hash): %s\n", *mediator, res.token)
	fmt.Fprintf(stdout, "verifier key: %s\n", res.vkey)
	fmt.Fprintf(stdout, "start it with: ledgerd serve --config %s\n", shellQuote(df.path()))
	return 0
}

// newDataDir is a data directory to create: a config, and a key and a
// store beside it.
type newDataDir struct {
	config   string // the config file's path
	origin   string // the key's name, the log's origin
	mediator string // the config's one mediator
	listen   string // the listen member to write; "" for none (the default)
	// reuseKey keeps a key already there, which an earlier first start
	// that failed left (the config is what marks a data directory as
	// made). Without it an existing key, or a store that is not empty,
	// is refused.
	reuseKey bool
}

type createdDataDir struct {
	token string // the mediator's token, whose hash the config holds
	vkey  string // the key's verifier key
}

// createDataDir creates n's directory (mode 0700) if needed, then the key
// (mode 0600), the store directory and, last, the config naming them and
// the mediator with a new random token, stored only as its SHA-256, and
// nothing else but n.listen if set (config.NewFile). It
// never overwrites a file: an existing config is refused, and so is an
// existing key or a store that is not empty unless n.reuseKey.
func createDataDir(n newDataDir) (createdDataDir, error) {
	dir := filepath.Dir(n.config)
	keyPath, storePath := filepath.Join(dir, keyName), filepath.Join(dir, storeName)
	if _, err := os.Lstat(n.config); err == nil {
		return createdDataDir{}, fmt.Errorf("%s exists: ledgerd never overwrites a config (\"ledgerd token add\" adds a mediator)", n.config)
	}
	if !n.reuseKey {
		if _, err := os.Lstat(keyPath); err == nil {
			return createdDataDir{}, fmt.Errorf("%s exists: ledgerd never overwrites a key", keyPath)
		}
		if entries, err := os.ReadDir(storePath); err == nil && len(entries) > 0 {
			return createdDataDir{}, fmt.Errorf("%s exists and is not empty: ledgerd never reuses a store", storePath)
		} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return createdDataDir{}, err
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return createdDataDir{}, err
	}
	vkey, err := writeKey(keyPath, n.origin)
	if errors.Is(err, fs.ErrExist) && n.reuseKey {
		var key *ledger.Key
		if key, err = ledger.LoadKey(keyPath, ledger.KeyOptions{}); err == nil {
			vkey = key.VerifierKey()
		}
	}
	if err != nil {
		return createdDataDir{}, err
	}
	if err := os.Mkdir(storePath, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return createdDataDir{}, err
	}
	token, hash := newToken()
	text := config.NewFile(n.listen, keyName, storeName, config.Mediator{Name: n.mediator, TokenSHA256: hash})
	if err := writeConfig(n.config, text, false); err != nil {
		return createdDataDir{}, err
	}
	return createdDataDir{token: token, vkey: vkey}, nil
}

// newToken returns a new random bearer token (32 bytes, in hex) and the
// lower-case hex of its SHA-256, which is all a config stores.
func newToken() (token, sha256Hex string) {
	raw := make([]byte, 32)
	rand.Read(raw) // never fails (crypto/rand)
	token = hex.EncodeToString(raw)
	sum := sha256.Sum256([]byte(token))
	return token, hex.EncodeToString(sum[:])
}

// writeConfig writes a config file atomically, mode 0600
// (internal/atomicfile): replacing path (replace) or failing if it exists
// (!replace).
func writeConfig(path string, data []byte, replace bool) error {
	return atomicfile.Write(path, data, atomicfile.Options{Exclusive: !replace})
}
