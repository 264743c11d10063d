// Command ledgerd runs the decision ledger as a service: mediators append
// decisions over HTTP, auditors download exports and proofs.
//
// Usage:
//
//	ledgerd [serve] [--config FILE | --data DIR] [--listen ADDR]
//	ledgerd init --name ORIGIN [--config FILE | --data DIR] [--mediator NAME] [--listen ADDR]
//	ledgerd token add NAME [--config FILE | --data DIR]
//	ledgerd token rotate NAME [--overlap DURATION] [--config FILE | --data DIR]
//	ledgerd approver add NAME --actions A,B [--principals P,Q] [--config FILE | --data DIR]
//	ledgerd approver remove NAME [--config FILE | --data DIR]
//	ledgerd config set NAME VALUE [--config FILE | --data DIR]
//	ledgerd config unset NAME [--config FILE | --data DIR]
//	ledgerd config get NAME [--config FILE | --data DIR]
//	ledgerd config show [--json] [--config FILE | --data DIR]
//	ledgerd fsck [--config FILE | --data DIR] [--online] [--signatures] [--max-damage N]
//	ledgerd check [--config FILE | --data DIR]   (fsck's older name)
//	ledgerd keygen --name ORIGIN --out FILE
//	ledgerd key rotate --new-key FILE [--config FILE | --data DIR]
//	ledgerd version
//
// With no config, ledgerd serves on 127.0.0.1:8080 from a local data
// directory (./ledgerd-data), which it creates on first start with a new
// signing key, an empty store and one mediator token, printed once it
// serves. "ledgerd init" creates a data directory for production, "ledgerd
// token" adds mediators and rotates their tokens, "ledgerd config" sets and
// shows the config's scalar members, and docs/config.md is the reference
// of the config file. The usage constant below is the full text.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/decisionledger/ledger/config"
	"github.com/decisionledger/ledger/daemon"
	"github.com/decisionledger/ledger/internal/buildinfo"
	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/storage/badger"
	"github.com/decisionledger/ledger/storage/postgres"
)

const usage = `Usage:
    ledgerd [serve] [--config FILE | --data DIR] [--listen ADDR]
    ledgerd init --name ORIGIN [--config FILE | --data DIR] [--mediator NAME] [--listen ADDR]
    ledgerd token add NAME [--config FILE | --data DIR]
    ledgerd token rotate NAME [--overlap DURATION] [--config FILE | --data DIR]
    ledgerd approver add NAME --actions A,B [--principals P,Q] [--config FILE | --data DIR]
    ledgerd approver remove NAME [--config FILE | --data DIR]
    ledgerd config set NAME VALUE [--config FILE | --data DIR]
    ledgerd config unset NAME [--config FILE | --data DIR]
    ledgerd config get NAME [--config FILE | --data DIR]
    ledgerd config show [--json] [--config FILE | --data DIR]
    ledgerd fsck [--config FILE | --data DIR] [--online] [--signatures] [--max-damage N]
    ledgerd check [--config FILE | --data DIR]   (fsck's older name)
    ledgerd keygen --name ORIGIN --out FILE
    ledgerd key rotate --new-key FILE [--config FILE | --data DIR]
    ledgerd version

Commands:
    serve     Serve the ledger (the default). With --config, everything comes
              from that file (docs/config.md); without it, from the data
              directory's ledgerd.json. On a first start, with no config in
              the data directory, ledgerd creates one as init does (origin
              ledger.localhost/log, mediator "local"), and once it is
              listening prints the mediator's token, shown once and stored
              only as a hash, and two lines to paste into a shell:
              export TOKEN=… and export VKEY=…. A first start that fails
              issues no token: the next one makes it. SIGHUP reads the
              config again and puts its mediators, reader tokens,
              approvers and TLS certificate in force (a config that fails
              its checks is refused and logged, and changes nothing;
              other changed members are named in a warning and need a
              restart: docs/config.md "Reload"). With policy_dir in the
              config ledgerd decides (POST /v1/decide); SIGHUP also
              reloads that directory (an invalid set is refused and
              logged with file:line:col; the set in force stays). With
              store a postgres:// URL, several instances serve one log:
              one sequences, the others forward to it (docs/operations.md
              "Several instances on PostgreSQL").
    init      Create a data directory for production: a signing key for
              ORIGIN (mode 0600), an empty store, a config (FILE, or
              DIR/ledgerd.json; the key and store go beside it) naming one
              mediator, and print that mediator's token once; only its
              SHA-256 is stored. Never overwrites a config, a key or a store.
    token     add: a new mediator NAME; rotate: a new token for mediator NAME,
              whose old token stops working. Prints the new token, alone, on
              stdout, once; stores only its SHA-256 in the config, which it
              rewrites atomically. A running ledgerd takes the change on
              SIGHUP (systemctl reload ledgerd): from then on the old
              token is refused. rotate --overlap DURATION (such as 1h)
              keeps the old token valid beside the new one for DURATION,
              so that clients move without refusals; a later rotate
              replaces that previous token (docs/operations.md).
    approver  add: a new approver NAME of the approver's page (docs/approvals.md),
              who may approve the actions A,B ("*": every action), of the
              principals P,Q only if given; the password is read from stdin,
              one line, and only its argon2id hash is stored. Creates the
              config's approvals member if there is none; refuses a name
              that exists. remove: removes approver NAME. Rewrites the
              config atomically. A running ledgerd takes the change on
              SIGHUP (a removed approver's sessions end); turning
              approvals on needs a restart.
    config    The config's top-level scalar members (listen, catalog_dir,
              policy_dir, checkpoint_interval, max_body_bytes, ...:
              docs/config.md), by name. set: NAME's value becomes VALUE (an
              integer in decimal, else text; a relative path is from the
              working directory); unset: NAME goes, and has its default.
              The changed config must pass every check ledgerd makes at
              start, or nothing is written; an unknown NAME is refused
              with the nearest known one. Rewrites the config atomically,
              keeping its other members, their order, its owner and mode,
              and says whether a running ledgerd takes the change on
              SIGHUP or needs a restart. get: prints NAME's value, as the
              file writes it, or its default if the file does not set it.
              show: every scalar member, its value or its default. A
              store URL's password is never printed. key_file changes
              only with key rotate; lists and objects (mediators,
              approvals, tls, ...) have their commands or are edited by
              hand.
    fsck      Read the whole store and check it, with ledgerd stopped: every
              frame and entry checksum, the index and badger's tables; every
              entry rehashed into the tree and the tiles, each tile compared
              with the stored one; every entry's chain (its index, its prev
              the hash of the entry before, its time not before that
              entry's, its key id the key signing there); the latest
              checkpoint's root and signature, and the key rotations. With
              --signatures every entry is also parsed strictly and its
              signature verified (under 20,000 entries/s on two cores
              instead of hundreds of thousands). A progress line goes to
              stderr (rewritten in place on a terminal, one every 5 s
              otherwise), then each damage found, naming the entry, tile or
              checkpoint and what differs (at most --max-damage, default
              100), and a summary with the rate. It opens the store as
              serve does, which repairs what a crash leaves (a torn write
              erased, the index brought up to date): it says each repair
              before the summary. It signs nothing. On PostgreSQL it
              takes the sequencer's lease, refused while an instance
              holds it: stop every instance first. With --online,
              ledgerd keeps running: the ledgerd serving the data
              directory checks the log up to its latest signed
              checkpoint, on one core, while it appends, and streams the
              progress back (through the unix socket fsck.sock in the
              store directory, mode 0600: the operator's, as the files
              are); one at a time. On PostgreSQL, --online
              checks from this process, without the lease, up to the
              latest checkpoint. Exit 0 if no damage is found, 1 if any
              is.
    check     The older name of fsck, kept for scripts: the same command.
    keygen    Write a new signing key to FILE (mode 0600) and print its
              verifier key.
    key       rotate: make the key in FILE (made by keygen with the log's
              name) the log's signing key, with ledgerd stopped: signs a
              checkpoint of the whole tree with the old and the new key
              (the rotation checkpoint), then sets the config's key_file to
              FILE and adds the old verifier key to previous_keys. Entries
              appended afterwards carry the new key's id. Give auditors the
              new verifier key, and destroy the old private key: it must
              never sign again (docs/operations.md). On PostgreSQL it takes
              the sequencer's lease, as check does; give every instance the
              new key and config afterwards.
    version   Print ledgerd's module version and VCS revision (also
              ledgerd --version).

Options:
    --config FILE     The config file (docs/config.md). Excludes --data.
    --data DIR        The data directory; its config is DIR/ledgerd.json.
                      Default ./ledgerd-data.
    --listen ADDR     serve: serve on ADDR (host:port) instead of the
                      config's listen; a first start does not write it
                      in the config it creates. init: the listen address
                      to write (without it, none is written: the default
                      127.0.0.1:8080).
    --name ORIGIN     The log's name, in every checkpoint, such as
                      ledger.example.com/log. It cannot change later.
    --mediator NAME   init: the mediator to create. Default "local".
    --out FILE        keygen: the key file to create.
    --new-key FILE    key rotate: the new signing key.
    --overlap DURATION  token rotate: how long the old token stays valid
                      beside the new one (such as 1h). Default 0: refused
                      from the next SIGHUP on.
    --actions A,B     approver add: the actions the approver may approve.
    --principals P,Q  approver add: the only principals whose requests the
                      approver may approve. Default: any.
    --online          fsck: check while ledgerd runs, up to its latest
                      signed checkpoint.
    --signatures      fsck: also verify every entry's signature.
    --max-damage N    fsck: report at most N problems (default 100).
    --json            config show: one JSON object instead: "members", each
                      scalar member by name, in the config's order, as
                      {"value": …, "default": true|false} (a number for an
                      integer member, else a string; no value but
                      "means" for a default that is none), and
                      "also_set", the other members' names.

Environment:
    GOMEMLIMIT        The Go memory limit, as the Go runtime reads it (such
                      as 256MiB; off for none). Default when unset: 48MiB,
                      the limit ledgerd's memory was measured with (peak
                      RSS at most 96 MiB under load, docs/performance.md).
                      The start's log line reports it as go_memory_limit.
                      Set it higher for a large store or many connections.
    LEDGER_PROGRESS   fsck's progress line on stderr, drawn only when
                      stderr is a terminal (never on a pipe or a file):
                      auto or unset, after the run's first second and at
                      most four times a second; off, never; now, from
                      the first entry (docs/operations.md, "Progress").

Exit status:
    0 success, 1 failure (fsck: damage found), 2 bad usage.

Examples:
    $ ledgerd
    $ ledgerd init --data /var/lib/ledgerd --name ledger.example.com/log
    $ ledgerd token add billing --data /var/lib/ledgerd > billing.token
    $ ledgerd approver add alice --actions send_email,refund --data /var/lib/ledgerd < alice.password
    $ ledgerd config set catalog_dir /etc/ledgerd/declarations --data /var/lib/ledgerd
    $ ledgerd config get listen --data /var/lib/ledgerd
    $ ledgerd config show --data /var/lib/ledgerd
    $ ledgerd serve --config /var/lib/ledgerd/ledgerd.json
    $ ledgerd fsck --config /var/lib/ledgerd/ledgerd.json
    $ ledgerd fsck --online --data /var/lib/ledgerd
    $ ledgerd keygen --name ledger.example.com/log --out ledger.key
    $ ledgerd keygen --name ledger.example.com/log --out ledger-2027.key
    $ ledgerd key rotate --new-key ledger-2027.key --data /var/lib/ledgerd
`

func main() {
	// Before anything is created: the store's files must be owner-only
	// whatever the umask (restrictUmask says why).
	restrictUmask()
	// Before the store is opened: the default memory limit
	// (badger.MemoryLimit) unless GOMEMLIMIT sets one.
	badger.SetMemoryLimit()
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		return serve(ctx, args, stdout, stderr)
	}
	switch cmd, rest := args[0], args[1:]; cmd {
	case "serve":
		return serve(ctx, rest, stdout, stderr)
	case "init":
		return initCommand(rest, stdout, stderr)
	case "token":
		return token(rest, stdout, stderr)
	case "approver":
		return approverCommand(rest, stdout, stderr)
	case "config":
		return configCommand(rest, stdout, stderr)
	case "fsck", "check":
		return fsckCommand(ctx, cmd, rest, stdout, stderr)
	case "keygen":
		return keygen(rest, stdout, stderr)
	case "key":
		return keyCommand(ctx, rest, stdout, stderr)
	case "version", "-version", "--version":
		if len(rest) == 1 && slices.Contains([]string{"-h", "-help", "--help"}, rest[0]) {
			fmt.Fprint(stdout, commandUsage("version"))
			return 0
		}
		if len(rest) != 0 {
			return usageError(stderr, cmd, "unexpected argument %q", rest[0])
		}
		fmt.Fprintln(stdout, buildinfo.Line("ledgerd"))
		return 0
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		if strings.HasPrefix(cmd, "-") {
			return serve(ctx, args, stdout, stderr)
		}
		return usageError(stderr, "", "unknown command %q", cmd)
	}
}

func fail(stderr io.Writer, format string, args ...any) int {
	fmt.Fprintf(stderr, "ledgerd: error: %s\n", fmt.Sprintf(format, args...))
	return 1
}

// damageHints says what to do about a start refused for damage
// (ledger.ErrCorrupt but for the keys' errors, which rotationHints
// covers); configPath is the config, for the fsck command.
func damageHints(stderr io.Writer, err error, configPath string) {
	if !errors.Is(err, ledger.ErrCorrupt) || errors.Is(err, ledger.ErrRotation) {
		return
	}
	hint(stderr, "ledgerd fsck --config %s names the damage; docs/operations.md \"Damage\" says what to do (restore from a backup, keep the damaged copy, never edit a store by hand)", shellQuote(configPath))
}

func hint(stderr io.Writer, format string, args ...any) {
	fmt.Fprintf(stderr, "ledgerd: hint: %s\n", fmt.Sprintf(format, args...))
}

// usageError reports bad usage of command cmd ("" for none) with the usage
// text, and returns exit status 2.
func usageError(stderr io.Writer, cmd, format string, args ...any) int {
	if cmd != "" {
		format = cmd + ": " + format
	}
	fmt.Fprintf(stderr, "ledgerd: error: %s\n%s", fmt.Sprintf(format, args...), usage)
	return 2
}

// parseArgs parses a command's flags, which may come before, between and
// after its operands, and returns exactly n operands. Otherwise ok is
// false and code the exit status: 0 after -h or --help (the command's
// part of the usage is printed to stdout), 2 after bad usage (reported
// on stderr).
func parseArgs(fset *flag.FlagSet, args []string, n int, stdout, stderr io.Writer) (operands []string, code int, ok bool) {
	fset.SetOutput(io.Discard)
	for {
		if err := fset.Parse(args); errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, commandUsage(fset.Name()))
			return nil, 0, false
		} else if err != nil {
			return nil, usageError(stderr, fset.Name(), "%v", err), false
		}
		rest := fset.Args()
		if len(rest) == 0 {
			break
		}
		if i := len(args) - len(rest); i > 0 && args[i-1] == "--" { // all after it
			operands = append(operands, rest...)
			break
		}
		operands, args = append(operands, rest[0]), rest[1:]
	}
	if len(operands) > n {
		return nil, usageError(stderr, fset.Name(), "unexpected argument %q", operands[n]), false
	}
	if len(operands) < n {
		return nil, usageError(stderr, fset.Name(), "missing argument"), false
	}
	return operands, 0, true
}

const (
	defaultDataDir = "ledgerd-data"
	configName     = "ledgerd.json" // a data directory's config
)

// dataFlags are the --config and --data options of serve, init, token and
// check: where the config is.
type dataFlags struct {
	config, data string
	dataSet      bool
}

func (d *dataFlags) register(fset *flag.FlagSet) {
	fset.StringVar(&d.config, "config", "", "")
	fset.StringVar(&d.data, "data", defaultDataDir, "")
}

// check refuses --config with --data, and empty values, after parsing.
func (d *dataFlags) check(fset *flag.FlagSet) error {
	configSet := false
	fset.Visit(func(f *flag.Flag) {
		configSet = configSet || f.Name == "config"
		d.dataSet = d.dataSet || f.Name == "data"
	})
	switch {
	case configSet && d.dataSet:
		return errors.New("--config and --data exclude each other: a config file names its own key and store (a data directory's config is DIR/" + configName + ")")
	case configSet && d.config == "":
		return errors.New("--config needs a file")
	case d.data == "":
		return errors.New("--data needs a directory")
	}
	return nil
}

// path is the config file: --config, or the data directory's.
func (d *dataFlags) path() string {
	if d.config != "" {
		return d.config
	}
	return filepath.Join(d.data, configName)
}

// existing is path, or an error naming the flags when the data directory
// has no config.
func (d *dataFlags) existing() (string, error) {
	p := d.path()
	if d.config == "" {
		if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("%s has no %s: name the data directory with --data, or the config with --config", d.data, configName)
		}
	}
	return p, nil
}

func keygen(args []string, stdout, stderr io.Writer) int {
	fset := flag.NewFlagSet("keygen", flag.ContinueOnError)
	name := fset.String("name", "", "")
	out := fset.String("out", "", "")
	if _, code, ok := parseArgs(fset, args, 0, stdout, stderr); !ok {
		return code
	}
	if *name == "" || *out == "" {
		return usageError(stderr, "keygen", "keygen needs --name ORIGIN and --out FILE")
	}
	vkey, err := writeKey(*out, *name)
	if err != nil {
		return fail(stderr, "%v", err)
	}
	fmt.Fprintln(stdout, vkey)
	return 0
}

// writeKey creates a new key file (mode 0600, never overwriting), syncs
// it, and returns its verifier key.
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
	if err := f.Sync(); err != nil {
		f.Close()
		return "", err
	}
	return vkey, f.Close()
}

func serve(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fset := flag.NewFlagSet("serve", flag.ContinueOnError)
	var df dataFlags
	df.register(fset)
	listen := fset.String("listen", "", "")
	if _, code, ok := parseArgs(fset, args, 0, stdout, stderr); !ok {
		return code
	}
	if err := df.check(fset); err != nil {
		return usageError(stderr, "serve", "%v", err)
	}
	if *listen != "" {
		if err := config.CheckListen(*listen); err != nil {
			return usageError(stderr, "serve", "--listen: %v", err)
		}
	}
	configPath := df.path()
	// A first start creates the data directory and a mediator token, and
	// shows the token once it listens. Until then a failure removes the
	// config it wrote (the only record of the token), so that the next
	// start makes a token and shows it: a start that fails, on a busy
	// port say, must not use up the only copy.
	var firstToken, created string
	if df.config == "" {
		if _, err := os.Stat(configPath); errors.Is(err, fs.ErrNotExist) {
			// No listen: --listen is this start's, not a choice to pin
			// in the file; later starts listen on the default.
			res, err := createDataDir(newDataDir{config: configPath, origin: localOrigin, mediator: localMediator, reuseKey: true})
			if err != nil {
				return fail(stderr, "%v", err)
			}
			firstToken, created = res.token, configPath
		}
	}
	failStart := func(format string, args ...any) int {
		fail(stderr, format, args...)
		if created != "" {
			if err := os.Remove(created); err != nil {
				hint(stderr, "the token in %s was never shown: make a new one with \"ledgerd token rotate %s --data %s\"", created, localMediator, shellQuote(df.data))
			} else {
				hint(stderr, "no mediator token was issued: the next start with the data directory %s issues one and shows it", df.data)
			}
		}
		return 1
	}
	cfg, err := config.Load(configPath)
	if err != nil {
		return failStart("%v", err)
	}
	// A reload compares the file with the file at start, not with the
	// config that --listen changed.
	start := *cfg
	if *listen != "" {
		cfg.Listen = *listen
	}
	files, err := daemon.LoadFiles(cfg)
	if err != nil {
		return failStart("%v", err)
	}
	// Listen before opening the store, which may take minutes to check a
	// large one: a busy port fails at once.
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		code := failStart("%v", err)
		if errors.Is(err, syscall.EADDRINUSE) {
			hint(stderr, "another process listens on %s: stop it, or give ledgerd another address with --listen (such as --listen 127.0.0.1:8081)", cfg.Listen)
		}
		return code
	}
	defer ln.Close()
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	// SIGHUP is caught from before the start, so that one sent as soon as
	// the serving line is printed (or earlier) is a reload once the daemon
	// runs, never the signal's default: the end of the process.
	hup, stopHUP := catchSIGHUP()
	defer stopHUP()
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	d, err := daemon.Start(ctx, daemon.Options{Config: cfg, ConfigPath: configPath, FileConfig: &start, Files: files, Listener: ln, Logger: log})
	if err != nil {
		code := failStart("%v", err)
		if oe := (*daemon.OpenError)(nil); errors.As(err, &oe) {
			if oe.Ledger {
				rotationHints(stderr, err)
			}
			damageHints(stderr, err, configPath)
		}
		return code
	}
	key := files.Key
	if firstToken != "" {
		fmt.Fprintf(stdout, "created %s with a new key and store\nmediator %q token (shown once, stored only as a hash): %s\n", df.data, localMediator, firstToken)
	} else {
		fmt.Fprintf(stdout, "using %s (mediator tokens are stored there as hashes only; \"ledgerd token rotate NAME\" makes a new one)\n", configPath)
	}
	fmt.Fprintf(stdout, "ledgerd: serving %s on %s\nverifier key: %s\n", key.Name(), d.URL(), key.VerifierKey())
	if d.Instance() != "" {
		fmt.Fprintf(stdout, "ledgerd: instance %s of the instances on %s, reached by them at %s\n", d.Instance(), postgres.RedactURL(cfg.Store), d.AdvertiseURL())
	} else {
		fmt.Fprintf(stdout, "try: curl %s/v1/checkpoint\n", d.URL())
	}
	if firstToken != "" {
		fmt.Fprintf(stdout, "paste these lines into a second terminal:\nexport TOKEN=%s\nexport VKEY=%s\n", shellQuote(firstToken), shellQuote(key.VerifierKey()))
	} else {
		fmt.Fprintf(stdout, "paste this line into a second terminal:\nexport VKEY=%s\n", shellQuote(key.VerifierKey()))
	}
	// SIGHUP reloads the config's credentials, then the policy set, one
	// reload at a time. A refused config or set is logged by the daemon;
	// the credentials and the set in force stay.
	reloads := onSIGHUP(ctx, hup, func(ctx context.Context) { d.Reload(ctx) })
	select {
	case <-ctx.Done():
	case <-d.Done():
		stop()
	}
	<-reloads
	// Finish requests in flight (their entries become durable and are
	// acknowledged), then stop the ledger, which signs a final checkpoint.
	shutdown, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := d.Shutdown(shutdown); err != nil {
		if d.Instance() != "" {
			return 1 // the term's close failed, which the log says
		}
		return fail(stderr, "%v", err)
	}
	return 0
}

var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_./+=:@%,-]+$`)

// shellQuote quotes s for a POSIX shell, if it needs quoting.
func shellQuote(s string) string {
	if shellSafe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// subcommand reads the operation of a command with operations (ledgerd
// token add|rotate, approver add|remove, key rotate) from args[0]: one of
// ops, or help, which prints the usage. It answers a missing or unknown
// operation and help itself, and then returns false with the exit code.
func subcommand(args []string, cmd string, ops []string, stdout, stderr io.Writer) (op string, code int, ok bool) {
	list := strings.Join(ops, " or ")
	if len(args) == 0 {
		return "", usageError(stderr, cmd, "%s?", list), false
	}
	switch op = args[0]; {
	case op == "-h" || op == "-help" || op == "--help":
		fmt.Fprint(stdout, usage)
		return "", 0, false
	case !slices.Contains(ops, op):
		return "", usageError(stderr, cmd, "unknown command %q: %s", op, list), false
	}
	return op, 0, true
}

// catchSIGHUP catches SIGHUP from now on, into hup (one held while none
// is being handled), until stop is called (at the caller's return), so
// that one arriving during the start or the shutdown does not end the
// process.
func catchSIGHUP() (hup <-chan os.Signal, stop func()) {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGHUP)
	return c, func() { signal.Stop(c) }
}

// onSIGHUP calls reload for each SIGHUP caught in hup, one at a time,
// until ctx ends; done is closed once it stopped.
func onSIGHUP(ctx context.Context, hup <-chan os.Signal, reload func(context.Context)) (done <-chan struct{}) {
	c := make(chan struct{})
	go func() {
		defer close(c)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				reload(ctx)
			}
		}
	}()
	return c
}
