// Command ledger-mcp is an MCP gateway: agents connect to it as their MCP
// server, and every tool call they make is checked against its tool's
// declaration, minimized, decided by ledgerd, approved by a person when
// the policies say so, recorded with its outcome — or refused and never
// forwarded (docs/mcp.md).
//
// Usage:
//
//	ledger-mcp serve --config FILE (--stdio | --http [--listen ADDR])
//	ledger-mcp check --config FILE
//	ledger-mcp declare --config FILE --server NAME --out DIR
//	ledger-mcp token PRINCIPAL
//	ledger-mcp version
//
// Exit status: 0 on success, 1 when check finds a declared tool that is
// not exposed or a command fails, 2 on bad usage.
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
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/decisionledger/ledger/internal/buildinfo"
	"github.com/decisionledger/ledger/internal/cliflag"
	"github.com/decisionledger/ledger/internal/cliusage"
	"github.com/decisionledger/ledger/mcpgate"
)

const usage = `Usage:
    ledger-mcp serve --config FILE (--stdio | --http [--listen ADDR])
    ledger-mcp check --config FILE
    ledger-mcp declare --config FILE --server NAME --out DIR
    ledger-mcp token PRINCIPAL
    ledger-mcp version

Commands:
    serve    Be the agents' MCP server: over stdio (an agent host launches
             ledger-mcp; the config's stdio.principal acts) or streamable
             HTTP at http://ADDR/mcp (agents send a bearer token the config's
             http.agents maps to a principal; /metrics beside it). Every
             tools/call is minimized by its tool's declaration, decided by
             ledgerd and recorded; only declared, reviewed tools whose
             definition matches their pin are listed or forwarded.
    check    Connect to every upstream server and print each tool's status
             (exposed, undeclared, unreviewed, pin_mismatch, ...) with its
             definition digest, one JSON object a line.
    declare  Connect to server NAME and write a draft declaration per tool
             into DIR: every field payload, pinned to the tool's current
             definition, marked unreviewed. Review each, then remove the
             "reviewed": false member to expose the tool.
    token    Make a bearer token for an agent acting as PRINCIPAL: the token
             on stdout, once; the http.agents member to add (its SHA-256
             only) on stderr.
    version  Print the module version and VCS revision.

Logs go to stderr as JSON lines; they never hold an argument or result
value, nor a token. "ledger-mcp COMMAND --help" prints that command's part
of this text.

Options:
    --config FILE    The gateway's config (docs/mcp.md): ledgerd's URL and
                     verifier key, the upstream servers, the declarations,
                     the agents.
    --stdio          (serve) Serve one agent over standard input and output,
                     as the config's stdio.principal.
    --http           (serve) Serve agents over streamable HTTP at /mcp.
    --listen ADDR    (serve --http) The address to listen on. Default: the
                     config's http.listen, else 127.0.0.1:8090.
    --server NAME    (declare) The upstream server, as the config names it.
    --out DIR        (declare) Where the drafts go; an existing file is never
                     overwritten.

Environment:
    GOGC    The Go garbage collector's target percentage, as the Go
            runtime reads it (off for none). Default when unset: 400,
            not Go's 100: the gateway's live heap is a few MiB and each
            call leaves about 600 KiB of garbage (mostly the MCP SDK's
            JSON buffers), so at 100 it collected every few calls, a
            third of its CPU time (docs/performance.md "MCP gateway").
            serve's first log line reports it as go_gc_percent.

Exit status:
    0    Success.
    1    check found a declared tool that is not exposed, or a command
         failed.
    2    Bad usage.

Examples:
    $ ledger-mcp declare --config gateway.json --server files --out declarations
    $ ledger-mcp check --config gateway.json
    $ ledger-mcp serve --config gateway.json --http --listen 127.0.0.1:8090
    $ ledger-mcp token agent:example-1 2>> members.txt > agent.token
`

// usageText is usage, for "ledger-mcp COMMAND --help".
var usageText = cliusage.Text{Program: "ledger-mcp", Usage: usage}

// helpRequest is a command's --help: main prints that command's usage.
type helpRequest string

func (h helpRequest) Error() string { return "help requested for " + string(h) }

type usageError string

func (e usageError) Error() string { return string(e) }

func main() {
	setGCPercent()
	err := run(os.Args[1:], os.Stdout, os.Stderr)
	var ue usageError
	var help helpRequest
	switch {
	case err == nil:
	case errors.As(err, &help):
		fmt.Fprint(os.Stdout, usageText.Command(string(help)))
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(os.Stdout, usage)
	case errors.As(err, &ue):
		fmt.Fprintf(os.Stderr, "ledger-mcp: %v\n\n%s", err, usage)
		os.Exit(2)
	default:
		fmt.Fprintf(os.Stderr, "ledger-mcp: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError("no command")
	}
	cmd, rest := args[0], args[1:]
	if slices.Contains([]string{"serve", "check", "declare", "token", "version"}, cmd) && asksHelp(rest) {
		return helpRequest(cmd)
	}
	switch cmd {
	case "serve":
		return serve(rest, stderr)
	case "check":
		return check(rest, stdout, stderr)
	case "declare":
		return declareCmd(rest, stdout, stderr)
	case "token":
		return token(rest, stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, buildinfo.Line("ledger-mcp"))
		return nil
	case "help", "-h", "--help":
		return flag.ErrHelp
	default:
		return usageError(fmt.Sprintf("unknown command %q", cmd))
	}
}

// asksHelp reports whether a command's arguments ask for its help: -h,
// -help or --help before any "--".
func asksHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help":
			return true
		}
	}
	return false
}

func flags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	rest, err := cliflag.Parse(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, usageError(err.Error())
	}
	return rest, nil
}

func loadGateway(path string, log *slog.Logger) (*mcpgate.Gateway, *mcpgate.Config, error) {
	if path == "" {
		return nil, nil, usageError("--config is required")
	}
	cfg, err := mcpgate.LoadConfig(path)
	if err != nil {
		return nil, nil, err
	}
	g, err := mcpgate.New(cfg, mcpgate.Options{Logger: log})
	if err != nil {
		return nil, nil, err
	}
	return g, cfg, nil
}

func serve(args []string, stderr io.Writer) error {
	fs := flags("serve")
	config := fs.String("config", "", "")
	stdio := fs.Bool("stdio", false, "")
	httpMode := fs.Bool("http", false, "")
	listen := fs.String("listen", "", "")
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(rest) != 0:
		return usageError("serve takes no arguments")
	case *stdio == *httpMode:
		return usageError("serve needs exactly one of --stdio and --http")
	case *listen != "" && !*httpMode:
		return usageError("--listen is for --http")
	}
	if path := os.Getenv("LEDGER_MCP_CPUPROFILE"); path != "" {
		// Hidden, for docs/performance.md: a CPU profile of the whole
		// serve, written when it ends.
		stop, err := cpuProfile(path)
		if err != nil {
			return err
		}
		defer stop()
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	log.Info("ledger-mcp starting", "version", mcpgate.Version, "go_gc_percent", gcPercent())
	g, cfg, err := loadGateway(*config, log)
	if err != nil {
		return err
	}
	defer g.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if *stdio {
		if cfg.Stdio == nil {
			return errors.New("config: serve --stdio needs a stdio member (its principal)")
		}
		g.Start(ctx)
		log.Info("serving over stdio", "principal", cfg.Stdio.Principal)
		err := g.Server().Run(ctx, &mcp.StdioTransport{})
		if err != nil && ctx.Err() == nil && !errors.Is(err, io.EOF) && !errors.Is(err, mcp.ErrConnectionClosed) {
			return err
		}
		return nil
	}
	if cfg.HTTP == nil {
		return errors.New("config: serve --http needs an http member (its agents)")
	}
	addr := *listen
	if addr == "" {
		addr = cfg.HTTP.Listen
	}
	if addr == "" {
		addr = "127.0.0.1:8090"
	}
	if err := cfg.CheckListen(addr); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	if host, _, err := net.SplitHostPort(ln.Addr().String()); err == nil {
		if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
			log.Warn("serving plain HTTP on a non-loopback address: agents' bearer tokens cross the network in the clear; put a TLS-terminating proxy in front", "addr", ln.Addr().String())
		}
	}
	g.Start(ctx)
	srv := &http.Server{Handler: g.Handler(), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stderr, "ledger-mcp: serving on http://%s/mcp\n", ln.Addr())
	go func() {
		<-ctx.Done()
		// Calls in flight finish (and queue their outcomes); agents'
		// event streams, which never end by themselves, are then cut.
		if !g.Drain(30 * time.Second) {
			log.Warn("calls still in flight after 30 s; stopping")
		}
		srv.Close()
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// defaultGCPercent is the garbage collector's target unless GOGC sets
// one (the usage text says why).
const defaultGCPercent = 400

// setGCPercent sets defaultGCPercent unless GOGC is set and not empty.
func setGCPercent() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGCPercent)
	}
}

// gcPercent is the garbage collector's target in force (-1: off).
func gcPercent() int {
	p := debug.SetGCPercent(-1)
	debug.SetGCPercent(p)
	return p
}

// cpuProfile starts a CPU profile into path; stop ends and writes it.
func cpuProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("LEDGER_MCP_CPUPROFILE: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("LEDGER_MCP_CPUPROFILE: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

func check(args []string, stdout, stderr io.Writer) error {
	fs := flags("check")
	config := fs.String("config", "", "")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	g, _, err := loadGateway(*config, slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	if err != nil {
		return err
	}
	defer g.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	g.SyncAll(ctx)
	enc := json.NewEncoder(stdout)
	hidden := 0
	for _, r := range g.Tools() {
		enc.Encode(r)
		if r.Status != mcpgate.Exposed && r.Status != mcpgate.Undeclared {
			hidden++
		}
	}
	if hidden > 0 {
		return fmt.Errorf("%d declared tools are not exposed", hidden)
	}
	return nil
}

func declareCmd(args []string, stdout, stderr io.Writer) error {
	fs := flags("declare")
	config := fs.String("config", "", "")
	server := fs.String("server", "", "")
	out := fs.String("out", "", "")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	if *server == "" || *out == "" {
		return usageError("declare needs --server and --out")
	}
	g, _, err := loadGateway(*config, slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	if err != nil {
		return err
	}
	defer g.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	written, err := g.WriteDrafts(ctx, *server, *out)
	for _, w := range written {
		fmt.Fprintln(stdout, w)
	}
	return err
}

func token(args []string, stdout, stderr io.Writer) error {
	args, err := parse(flags("token"), args)
	if err != nil {
		return err
	}
	if len(args) != 1 || args[0] == "" {
		return usageError("token takes one PRINCIPAL")
	}
	b := make([]byte, 32)
	rand.Read(b)
	tok := hex.EncodeToString(b)
	sum := sha256.Sum256([]byte(tok))
	member, _ := json.Marshal(mcpgate.Agent{Principal: args[0], TokenSHA256: hex.EncodeToString(sum[:])})
	fmt.Fprintln(stdout, tok)
	fmt.Fprintf(stderr, "add to http.agents: %s\n", member)
	return nil
}
