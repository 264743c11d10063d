// Command ledgerctl is a small command-line client of ledgerd for
// mediators and operators who do not write Go: it appends a decision from
// a JSON file, prints an entry, fetches an entry's tlog-proof file and the
// latest checkpoint, and cuts a disclosure file down to the fields an
// auditor is to see. It is built on package client and verifies every
// answer with the ledger's verifier key before printing or writing it;
// after a key rotation, with the set of the ledger's keys (--key,
// --key-file and --trust repeat and combine, as in ledger-verify).
//
// Usage:
//
//	ledgerctl append     [--url URL] (--key VKEY | --key-file FILE | --trust FILE)... [--token-file FILE] [--idempotency-key KEY] [--json] DECISION
//	ledgerctl get        [--url URL] (--key VKEY | --key-file FILE | --trust FILE)... [--token-file FILE] [--json] INDEX
//	ledgerctl proof      [--url URL] (--key VKEY | --key-file FILE | --trust FILE)... [--token-file FILE] --out FILE [--json] INDEX
//	ledgerctl checkpoint [--url URL] (--key VKEY | --key-file FILE | --trust FILE)... [--token-file FILE] [--trusted CHECKPOINT] [--out FILE] [--json]
//	ledgerctl export     [--url URL] (--key VKEY | --key-file FILE | --trust FILE)... [--start INDEX] [--end INDEX] [--trusted CHECKPOINT] --out FILE [--json]
//	ledgerctl disclose   --fields NAME[,NAME...] [--allow-non-integer] --out FILE DISCLOSURE
//	ledgerctl decide     [--url URL] (--key VKEY | --key-file FILE | --trust FILE)... [--token-file FILE] [--idempotency-key KEY] [--principal NAME] [--json] BODY
//	ledgerctl approval   get|wait|consume|outcome ... ID
//	ledgerctl minimize   (--declaration FILE | --action NAME) [--hiding --disclosure FILE] [--allow LIST=VALUE]... [--json] PARAMS
//
// ledgerd's URL is --url, else the LEDGER_URL environment variable, else
// http://127.0.0.1:8080; an error without the server's answer names the
// URL tried. The mediator's token comes from --token-file or the LEDGER_TOKEN
// environment variable, never from a flag's value, so that it does not
// show in process lists and shell history. The usage text (ledgerctl
// --help) describes each command.
//
// Exit status: 0 done and verified, 1 refused by the server, not verified,
// or no answer, 2 bad usage or unreadable input.
package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/decisionledger/ledger/client"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/internal/buildinfo"
	"github.com/decisionledger/ledger/internal/keyflag"
	"github.com/decisionledger/ledger/internal/termtext"
	"github.com/decisionledger/ledger/verify"
	"github.com/transparency-dev/formats/log"
)

const usage = `Usage:
    ledgerctl append [--url URL] (--key VKEY | --key-file FILE | --trust FILE)...
                     [--token-file FILE] [--idempotency-key KEY]
                     [--principal NAME] [--decision DECISION] [--policy ID]...
                     [--json] DECISION
    ledgerctl decide [--url URL] (--key VKEY | --key-file FILE | --trust FILE)...
                     [--token-file FILE] [--idempotency-key KEY] [--principal NAME]
                     [--json] BODY
    ledgerctl get [--url URL] (--key VKEY | --key-file FILE | --trust FILE)...
                  [--token-file FILE] [--json] INDEX
    ledgerctl proof [--url URL] (--key VKEY | --key-file FILE | --trust FILE)...
                    [--token-file FILE] --out FILE [--json] INDEX
    ledgerctl checkpoint [--url URL] (--key VKEY | --key-file FILE | --trust FILE)...
                         [--token-file FILE] [--trusted CHECKPOINT]
                         [--out FILE] [--json]
    ledgerctl export [--url URL] (--key VKEY | --key-file FILE | --trust FILE)...
                     [--token-file FILE] [--start INDEX] [--end INDEX]
                     [--trusted CHECKPOINT] --out FILE [--json]
    ledgerctl disclose --fields NAME[,NAME...] [--allow-non-integer] --out FILE DISCLOSURE
    ledgerctl approval get [--url URL] (--key VKEY | --key-file FILE | --trust FILE)...
                           [--token-file FILE] [--json] ID
    ledgerctl approval wait [--url URL] (--key VKEY | --key-file FILE | --trust FILE)...
                            [--token-file FILE] [--timeout DURATION] [--poll DURATION]
                            [--json] ID
    ledgerctl approval consume [--url URL] (--key VKEY | --key-file FILE | --trust FILE)...
                               [--token-file FILE] [--idempotency-key KEY]
                               [--principal NAME] [--json] ID BODY
    ledgerctl approval outcome [--url URL] (--key VKEY | --key-file FILE | --trust FILE)...
                               [--token-file FILE] [--idempotency-key KEY]
                               --consumption INDEX --result RESULT
                               [--operation-id ID] [--json] ID
    ledgerctl minimize (--declaration FILE | --action NAME [--url URL] [--token-file FILE])
                       [--hiding --disclosure FILE] [--allow LIST=VALUE]...
                       [--principal NAME] [--decision DECISION [--policy ID]...]
                       [--json] PARAMS
    ledgerctl completion (bash | zsh)
    ledgerctl version

Commands:
    append      Append the decision in the JSON file DECISION ("-" reads
                standard input): the body of POST /v1/entries (docs/api.md),
                {"principal", "action", "decision", "policies",
                "params_digest", "params_size", "tiers_digest",
                "attributes"}, and "preview" for a needs_approval decision
                (the document the approver is shown). --principal,
                --decision and --policy give the members ledgerctl
                minimize left out. Retries on overload and network errors
                with one idempotency key, then verifies the receipt: the
                entry is signed by the ledger's key and records exactly
                this decision. Needs a mediator token.
    decide      Ask ledgerd to decide the request in the JSON file BODY
                ("-" reads standard input; ledgerctl minimize prints one)
                and record its decision: the body of POST /v1/decide,
                {"principal", "action", "params_digest", "params_size",
                "tiers_digest", "attributes"}, and optionally "preview".
                --principal gives the principal if the body has none.
                Retries as append does, then verifies the receipt: the
                entry is the ledger's signed decision on exactly this
                request. Prints the decision, its policies and policy set,
                and for needs_approval the approval it opened and its
                page. Exit 0 whatever the decision: act only on allow.
                Needs a mediator token.
    get         Print the entry at INDEX after checking its encoding,
                signature and index.
    proof       Write the C2SP tlog-proof@v1 file of the entry at INDEX, at
                the latest checkpoint, to FILE ("-" for standard output),
                after verifying it as "ledger-verify proof" does: the
                checkpoint's signature, the entry's signature, and its
                inclusion in the checkpoint's tree.
    checkpoint  Print the latest checkpoint after checking its signature; with
                --trusted, also prove that its tree extends the tree of that
                earlier checkpoint; with --out, write the signed checkpoint.
    export      Write to FILE ("-" for standard output) the export file
                (docs/export.md) of entries [--start, --end) (default: the
                whole log) at the latest checkpoint, after verifying it as
                "ledger-verify export" does: the checkpoint's signature,
                every entry's signature and prev link, and that they are
                the tree's leaves; with --trusted, that the tree extends
                that earlier checkpoint's. It is downloaded to FILE.partial
                and named FILE only once verified. An interrupted download
                (a dropped connection, --timeout, the process killed)
                leaves FILE.partial: the same command again (the same
                --start, and --end if given) verifies its entries again,
                asks only for the rest, at the latest checkpoint, and joins
                them: the bytes of a one-shot export. A FILE.partial that
                is not the start of this export is refused, naming the
                entry, and left alone; a joined file that does not verify
                is removed with FILE.partial.
    disclose    Write to FILE (new, mode 0600) the part of the disclosure file
                DISCLOSURE (docs/commitment.md §7.4) that opens only the
                fields named, every other field's commitment kept: what to
                hand an auditor who is to see those fields and no others.
                Offline: reads and writes files only.
    approval get
                Print ledgerd's account of the approval ID (GET
                /v1/approvals/ID, docs/approvals.md) after verifying the
                entries it names: the request, whose entry hash is ID, on
                the account's terms; the verdict, the consumption and the
                outcome, where there are. The state and the deadlines are
                ledgerd's judgement, not signed.
    approval wait
                Wait for a verdict on ID (polling every --poll, default 1s,
                until --timeout), verify it as approval get does, and print
                the account: approved, denied, expired. Exit 1 if there is
                no verdict within --timeout. Act only on approved.
    approval consume
                Spend the approved approval ID before acting, on the terms
                of the request that opened it: BODY ("-" reads standard
                input) is that decide request (as minimize printed it,
                --principal as for decide). Prints the verified receipt of
                the consumption: then act, once. Retries as append does.
                Needs a mediator token.
    approval outcome
                Report what the act a consumption permitted did: --result
                succeeded, failed or unknown (unknown may be followed by
                another), of the consumption entry at --consumption, with
                the downstream --operation-id if any. Prints the verified
                receipt. Needs a mediator token.
    minimize    Print the body of a decide or append request for the call
                whose raw parameters are the JSON file PARAMS ("-" reads
                standard input), minimized under the action's declaration
                (docs/declarations.md): the commitment to all the
                parameters (params_digest, params_size), the applied-tiers
                digest and the attributes the declaration lets cross. The
                declaration is the file --declaration names, or the one
                ledgerd's catalog serves for --action (GET
                /v1/actions/NAME), refused unless its digests are those GET
                /v1/actions lists. The parameters are never sent anywhere.
                --principal, --decision and --policy fill in the rest of
                the body; without them, decide --principal or append
                --principal, --decision and --policy do. With --hiding,
                the commitment is the hiding one (docs/commitment.md §7):
                the new file --disclosure names (mode 0600, never replaced)
                receives every field's value and opening before the body
                is printed; keep it, for without it the entry can never be
                checked against the parameters. --json prints the digests,
                the attributes and the body as one object.
    completion  Print the completion script for bash or zsh, made from
                every command's --help: source <(ledgerctl completion
                bash) in .bashrc, or source <(ledgerctl completion zsh) in
                .zshrc. Commands complete, then their options, then
                files (and directories after an option that takes one).
    version     Print ledgerctl's module version and VCS revision (also
                --version).

Options:
    --url URL               ledgerd's base URL. Default: the LEDGER_URL
                            environment variable, else http://127.0.0.1:8080.
    --key VKEY              The ledger's note verifier key, name+hash+base64.
    --key-file FILE         A file holding the verifier key.
    --trust FILE            A trust file: one verifier key a line, blank lines
                            and lines starting with # skipped.
                            --key, --key-file and --trust repeat and combine:
                            after a key rotation, give the old key and the new
                            one (docs/operations.md, Key rotation). Each entry
                            is checked with the key its key_id names, and an
                            old key that signs again after the new key is
                            refused.
    --token-file FILE       A file holding the mediator's (or a reader's) bearer
                            token. Default: the LEDGER_TOKEN environment
                            variable. Reads send it if there is one.
    --idempotency-key KEY   (append, decide, approval consume and outcome) 1 to 128 printable ASCII
                            characters, no spaces: sending the same request
                            again with the same key records nothing and prints
                            the first entry. Default: a new random key.
    --out FILE              (proof, checkpoint, export) Write the verified
                            file here.
                            (disclose) The new file, mode 0600.
    --fields NAME[,NAME...] (disclose) The fields to open; every other
                            field's commitment is kept.
    --allow-non-integer     (disclose) Accept non-integer numbers in the
                            disclosure's values (commit.Domain).
    --poll DURATION         (approval wait) How often to ask (default 1s).
    --consumption INDEX     (approval outcome) The consumption entry's index.
    --result RESULT         (approval outcome) succeeded, failed or unknown.
    --operation-id ID       (approval outcome) The act's downstream
                            identifier, if any.
    --declaration FILE      (minimize) The action's declaration file.
    --action NAME           (minimize) Fetch the declaration of NAME from
                            ledgerd's catalog.
    --hiding                (minimize) Commit with the hiding commitment.
    --disclosure FILE       (minimize) With --hiding, the new file for the
                            values and openings (mode 0600).
    --allow LIST=VALUE      (minimize) Put VALUE on payee_known's allowlist
                            LIST; repeats.
    --principal NAME        (minimize, append, decide) The body's principal:
                            the agent or person the call is made for; append
                            and decide take it only if the body has none.
    --decision DECISION     (minimize, append) The body's decision, for
                            append: allow, deny or needs_approval.
    --policy ID             (minimize, append) One of the body's determining
                            policies, for append; repeat it for several, in
                            order.
    --trusted CHECKPOINT    (checkpoint, export) A signed checkpoint verified
                            before.
    --start INDEX           (export) The first entry (default 0).
    --end INDEX             (export) The entry after the last (default: the
                            latest checkpoint's tree size).
    --timeout DURATION      Give up after this long (default 30s).
    --json                  Machine-readable output on standard output.

Environment:
    LEDGER_URL              ledgerd's base URL, when --url is not given.
    LEDGER_TOKEN            The bearer token, when --token-file is not given.
    LEDGER_PROGRESS         export's progress line (the download, then the
                            verification) on stderr, drawn only when stderr
                            is a terminal (never on a pipe or a file): auto
                            or unset, after the run's first second; off,
                            never; now, from the start (docs/operations.md,
                            "Progress").

Exit status: 0 done and verified, 1 refused by the server, not verified or
no answer, 2 bad usage or unreadable input.

Examples:
    $ export LEDGER_TOKEN=$(cat mediator.token)
    $ ledgerctl append --key-file ledger.vkey --idempotency-key order-4711 decision.json
    appended: entry 17 of ledger.example.com/log (receipt verified)
      entry hash sha256:...
    $ ledgerctl proof --key-file ledger.vkey --out entry-17.tlog-proof 17
    wrote entry-17.tlog-proof: entry 17 in the tree of size 18 (verified)
    $ ledger-verify proof --key-file ledger.vkey --params params.json entry-17.tlog-proof
    $ export LEDGER_URL=https://ledger.example.com
    $ ledgerctl minimize --action send_email --principal agent:example-1 mail.json |
        ledgerctl decide --key-file ledger.vkey -
    decided: needs_approval, entry 18 of ledger.example.com/log (receipt verified)
      ...
    $ ledgerctl approval wait --key-file ledger.vkey --timeout 10m sha256:...
`

// Exit statuses.
const (
	exitOK      = 0
	exitFailed  = 1
	exitUsage   = 2
	programName = "ledgerctl"
)

// defaultURL is where a ledgerd started without a config listens.
const defaultURL = "http://127.0.0.1:8080"

// tokenEnv names the environment variable holding the bearer token.
const tokenEnv = "LEDGER_TOKEN"

// urlEnv names the environment variable holding ledgerd's base URL, used
// when --url is not given.
const urlEnv = "LEDGER_URL"

// ledgerURL returns ledgerd's base URL when --url is not given, and where
// it came from: LEDGER_URL if set, else defaultURL.
func ledgerURL() (string, string) {
	if u := strings.TrimSpace(os.Getenv(urlEnv)); u != "" {
		return u, urlEnv
	}
	return defaultURL, "the default URL"
}

// maxDecisionFile bounds a decision file: an append body is at most
// 256 KiB by default.
const maxDecisionFile = 1 << 20

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "append":
		return runAppend(args[1:], stdin, stdout, stderr)
	case "get":
		return runGet(args[1:], stdout, stderr)
	case "proof":
		return runProof(args[1:], stdout, stderr)
	case "checkpoint":
		return runCheckpoint(args[1:], stdout, stderr)
	case "disclose":
		return runDisclose(args[1:], stdout, stderr)
	case "decide":
		return runDecide(args[1:], stdin, stdout, stderr)
	case "export":
		return runExport(args[1:], stdout, stderr)
	case "approval":
		return runApproval(args[1:], stdin, stdout, stderr)
	case "minimize":
		return runMinimize(args[1:], stdin, stdout, stderr)
	case "completion":
		return runCompletion(args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return exitOK
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, buildinfo.Line(programName))
		return exitOK
	}
	errorf(stderr, "unknown command %s", termtext.Quote(args[0]))
	hintf(stderr, "run %s --help for the list of commands", programName)
	return exitUsage
}

func errorf(w io.Writer, format string, args ...any) {
	termtext.PrintLine(w, "%s: error: %s", programName, fmt.Sprintf(format, args...))
}

func hintf(w io.Writer, format string, args ...any) {
	termtext.PrintLine(w, "%s: hint: %s", programName, fmt.Sprintf(format, args...))
}

// common are the options every command takes.
type common struct {
	fs        *flag.FlagSet
	url       *string
	keys      keyflag.Flags
	tokenFile *string
	timeout   *time.Duration
	json      *bool
	synopsis  string
	key       *verify.Key // the trusted keys, set by setup
}

func newCommon(name, synopsis string) *common {
	c := newCommonWithoutKeys(name, synopsis)
	c.keys.Register(c.fs)
	return c
}

// newCommonWithoutKeys is newCommon for a command that verifies nothing:
// no --key, --key-file or --trust.
func newCommonWithoutKeys(name, synopsis string) *common {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c := &common{
		fs:        fs,
		url:       fs.String("url", "", ""),
		tokenFile: fs.String("token-file", "", ""),
		timeout:   fs.Duration("timeout", 30*time.Second, ""),
		json:      fs.Bool("json", false, ""),
		synopsis:  synopsis,
	}
	return c
}

// usageError reports bad usage of one command and returns exitUsage.
func (c *common) usageError(stderr io.Writer, format string, args ...any) int {
	errorf(stderr, "%s: %s", c.fs.Name(), fmt.Sprintf(format, args...))
	hintf(stderr, "usage: %s %s", programName, c.synopsis)
	return exitUsage
}

// parse parses flags and positional arguments in any order (flag stops at
// the first argument that is not a flag; "--" ends the flags) and returns
// the positional arguments.
func (c *common) parse(args []string) ([]string, error) {
	var positional []string
	for {
		if err := c.fs.Parse(args); err != nil {
			return nil, err
		}
		rest := c.fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(positional, rest...), nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// parseArgs is parse, with bad usage reported and --help answered with
// the command's usage on stdout: it returns the positional arguments and
// -1, or the exit status to return at once.
func (c *common) parseArgs(args []string, stdout, stderr io.Writer) ([]string, int) {
	pos, err := c.parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, commandUsage(c.fs))
		return nil, exitOK
	}
	if err != nil {
		return nil, c.usageError(stderr, "%v", err)
	}
	return pos, -1
}

// setup checks the common options and returns a client and a context
// bounded by --timeout. needToken makes a missing token bad usage.
func (c *common) setup(stderr io.Writer, needToken bool) (*client.Client, context.Context, context.CancelFunc, int) {
	fail := func(code int) (*client.Client, context.Context, context.CancelFunc, int) {
		return nil, nil, nil, code
	}
	key, code := c.verifierKeys(stderr)
	if code != exitOK {
		return fail(code)
	}
	token, code := c.token(stderr, needToken)
	if code != exitOK {
		return fail(code)
	}
	ctx, cancel, code := c.urlAndContext(stderr)
	if code != exitOK {
		return fail(code)
	}
	c.key = key
	cl, err := client.NewWithKeys(*c.url, token, key)
	if err != nil {
		cancel()
		errorf(stderr, "%s: the verifier key: %v", c.fs.Name(), err)
		return fail(exitUsage)
	}
	return cl, ctx, cancel, exitOK
}

// urlAndContext checks ledgerd's URL (--url, else LEDGER_URL, else
// defaultURL) and --timeout, and returns a context bounded by --timeout.
func (c *common) urlAndContext(stderr io.Writer) (context.Context, context.CancelFunc, int) {
	urlFrom := "--url"
	if *c.url == "" {
		*c.url, urlFrom = ledgerURL()
	}
	if !strings.HasPrefix(*c.url, "http://") && !strings.HasPrefix(*c.url, "https://") {
		return nil, nil, c.usageError(stderr, "%s %s is not an http or https URL", urlFrom, termtext.Quote(*c.url))
	}
	if *c.timeout <= 0 {
		return nil, nil, c.usageError(stderr, "--timeout must be positive")
	}
	ctx, cancel := context.WithTimeout(context.Background(), *c.timeout)
	return ctx, cancel, exitOK
}

// verifierKeys returns the set of the keys --key, --key-file and --trust
// give (internal/keyflag): the ledger's key, and after a rotation the keys
// it rotated out, which signed the entries before.
func (c *common) verifierKeys(stderr io.Writer) (*verify.Key, int) {
	if !c.keys.Given() {
		code := c.usageError(stderr, "needs the ledger's verifier key (--key VKEY, --key-file FILE or --trust FILE)")
		hintf(stderr, "ledgerd prints it when it starts (\"verifier key: ...\"); %s verifies every answer with it", programName)
		return nil, code
	}
	key, err := c.keys.Load()
	if err != nil {
		errorf(stderr, "%s: the verifier key: %v", c.fs.Name(), err)
		return nil, exitUsage
	}
	return key, exitOK
}

// token reads the bearer token from --token-file, else from LEDGER_TOKEN.
func (c *common) token(stderr io.Writer, need bool) (string, int) {
	if *c.tokenFile != "" {
		b, err := readFile(*c.tokenFile, 4<<10)
		if err != nil {
			errorf(stderr, "%s: --token-file: %v", c.fs.Name(), err)
			return "", exitUsage
		}
		token := strings.TrimSpace(string(b))
		if token == "" {
			errorf(stderr, "%s: --token-file %s is empty", c.fs.Name(), termtext.Quote(*c.tokenFile))
			return "", exitUsage
		}
		return token, exitOK
	}
	token := strings.TrimSpace(os.Getenv(tokenEnv))
	if token == "" && need {
		code := c.usageError(stderr, "needs the mediator's token: --token-file FILE or the %s environment variable", tokenEnv)
		hintf(stderr, "a token is never taken from a flag's value, which other users could read in the process list")
		return "", code
	}
	return token, exitOK
}

// readFile reads a named file, or standard input for "-", refusing more
// than limit bytes.
func readFile(name string, limit int) ([]byte, error) {
	var r io.Reader = os.Stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return nil, err
	}
	if len(b) > limit {
		return nil, fmt.Errorf("%s is longer than %d bytes", termtext.Quote(name), limit)
	}
	return b, nil
}

// parseIndex reads an entry index in its one decimal spelling.
func parseIndex(s string) (uint64, bool) {
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil && strconv.FormatUint(n, 10) == s
}

// failed reports an error from the client and returns exitFailed, with a
// hint for the usual causes. An error without the server's answer (no
// connection, no answer in time) names the URL tried.
func (c *common) failed(stderr io.Writer, cmd string, err error) int {
	var apiErr *client.Error
	if !errors.As(err, &apiErr) && !errors.Is(err, client.ErrUnverified) && !strings.Contains(err.Error(), *c.url) {
		err = fmt.Errorf("ledgerd at %s: %w", *c.url, err)
	}
	errorf(stderr, "%s: %v", cmd, err)
	switch {
	case errors.Is(err, client.ErrUnverified):
		hintf(stderr, "the answer does not verify under the keys given: check --key, --key-file or --trust (after a key rotation, trust the old key and the new one), or do not trust this server's answer")
	case errors.As(err, &apiErr) && apiErr.Status == 401:
		hintf(stderr, "the server wants a valid bearer token (--token-file or %s)", tokenEnv)
	case errors.Is(err, context.DeadlineExceeded):
		hintf(stderr, "no answer within --timeout; is ledgerd running at %s? (--url, or the %s environment variable)", *c.url, urlEnv)
	case !errors.As(err, &apiErr):
		hintf(stderr, "is ledgerd running at %s? (--url, or the %s environment variable)", *c.url, urlEnv)
	}
	return exitFailed
}

func runAppend(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := newCommon("append", "append [--url URL] (--key VKEY | --key-file FILE | --trust FILE)... [--token-file FILE] [--idempotency-key KEY] [--principal NAME] [--decision DECISION] [--policy ID]... [--json] DECISION")
	idempotencyKey := c.fs.String("idempotency-key", "", "")
	fill := registerFill(c.fs, false)
	pos, code := c.parseArgs(args, stdout, stderr)
	if code >= 0 {
		return code
	}
	if len(pos) != 1 {
		return c.usageError(stderr, "takes exactly one DECISION file (\"-\" for standard input)")
	}
	if *idempotencyKey != "" && !validIdempotencyKey(*idempotencyKey) {
		return c.usageError(stderr, "--idempotency-key is not 1 to %d printable ASCII characters without spaces", client.MaxIdempotencyKey)
	}
	name := pos[0]
	raw, err := readInput(name, stdin, maxDecisionFile)
	if err != nil {
		errorf(stderr, "append: %v", err)
		return exitUsage
	}
	d, err := parseBody(raw, false, fill)
	if err != nil {
		errorf(stderr, "append: %s: not a decision: %v", termtext.Quote(name), err)
		hintf(stderr, "a decision file is the body of POST /v1/entries (docs/api.md)")
		return exitFailed
	}
	cl, ctx, cancel, code := c.setup(stderr, true)
	if code != exitOK {
		return code
	}
	defer cancel()
	var r *client.Receipt
	if *idempotencyKey != "" {
		r, err = cl.AppendIdempotent(ctx, *idempotencyKey, d)
	} else {
		r, err = cl.Append(ctx, d)
	}
	if err != nil {
		return c.failed(stderr, "append", err)
	}
	hash, err := r.Entry.Hash()
	if err != nil { // the entry verified, so it encodes
		return c.failed(stderr, "append", err)
	}
	result := "appended"
	if r.Replayed {
		result = "replayed"
	}
	if *c.json {
		termtext.WriteJSON(stdout, map[string]any{"result": result, "index": r.Index, "entry_hash": hash, "entry": json.RawMessage(r.Raw)})
		return exitOK
	}
	if r.Replayed {
		termtext.PrintLine(stdout, "replayed: entry %d of %s was appended before with this idempotency key; nothing new was appended (receipt verified)", r.Index, termtext.Quote(r.Entry.Origin))
	} else {
		termtext.PrintLine(stdout, "appended: entry %d of %s (receipt verified)", r.Index, termtext.Quote(r.Entry.Origin))
	}
	termtext.PrintLine(stdout, "  entry hash %s", hash)
	return exitOK
}

func validIdempotencyKey(k string) bool {
	return k != "" && len(k) <= client.MaxIdempotencyKey &&
		strings.IndexFunc(k, func(r rune) bool { return r < 0x21 || r > 0x7e }) < 0
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// onePositionalIndex checks that pos is one entry index.
func (c *common) onePositionalIndex(stderr io.Writer, pos []string) (uint64, int) {
	if len(pos) != 1 {
		return 0, c.usageError(stderr, "takes exactly one INDEX")
	}
	index, ok := parseIndex(pos[0])
	if !ok {
		return 0, c.usageError(stderr, "INDEX %s is not a decimal entry index", termtext.Quote(pos[0]))
	}
	return index, exitOK
}

func runGet(args []string, stdout, stderr io.Writer) int {
	c := newCommon("get", "get [--url URL] (--key VKEY | --key-file FILE | --trust FILE)... [--token-file FILE] [--json] INDEX")
	pos, code := c.parseArgs(args, stdout, stderr)
	if code >= 0 {
		return code
	}
	index, code := c.onePositionalIndex(stderr, pos)
	if code != exitOK {
		return code
	}
	cl, ctx, cancel, code := c.setup(stderr, false)
	if code != exitOK {
		return code
	}
	defer cancel()
	e, raw, err := cl.Entry(ctx, index)
	if err != nil {
		return c.failed(stderr, "get", err)
	}
	hash, err := e.Hash()
	if err != nil {
		return c.failed(stderr, "get", err)
	}
	if *c.json {
		termtext.WriteJSON(stdout, map[string]any{"result": "verified", "index": e.Index, "entry_hash": hash, "entry": json.RawMessage(raw)})
		return exitOK
	}
	termtext.PrintLine(stdout, "entry %d of %s (signature verified; not proved to be in the log's tree: use proof for that)", e.Index, termtext.Quote(e.Origin))
	termtext.PrintLine(stdout, "  version     %d", e.Version())
	termtext.PrintLine(stdout, "  time        %s", e.Time.Format(entry.TimeLayout))
	termtext.PrintLine(stdout, "  mediator    %s", termtext.Quote(e.Mediator))
	termtext.PrintLine(stdout, "  principal   %s", termtext.Quote(e.Principal))
	termtext.PrintLine(stdout, "  action      %s", termtext.Quote(e.Action))
	termtext.PrintLine(stdout, "  decision    %s", termtext.Quote(string(e.Decision)))
	policies := make([]string, len(e.Policies))
	for i, p := range e.Policies {
		policies[i] = termtext.Quote(p)
	}
	termtext.PrintLine(stdout, "  policies    %s", strings.Join(policies, " "))
	termtext.PrintLine(stdout, "  params      %s (%d bytes)", e.Params.DigestText(), e.Params.Size)
	termtext.PrintLine(stdout, "  tiers       %s", e.Tiers)
	if e.Version() >= entry.Version2 {
		termtext.PrintLine(stdout, "  definition  %s", e.Definition)
	}
	termtext.PrintLine(stdout, "  attributes  %s", e.Attributes)
	termtext.PrintLine(stdout, "  prev        %s", e.Prev)
	termtext.PrintLine(stdout, "  entry hash  %s", hash)
	return exitOK
}

func runProof(args []string, stdout, stderr io.Writer) int {
	c := newCommon("proof", "proof [--url URL] (--key VKEY | --key-file FILE | --trust FILE)... [--token-file FILE] --out FILE [--json] INDEX")
	out := c.fs.String("out", "", "")
	pos, code := c.parseArgs(args, stdout, stderr)
	if code >= 0 {
		return code
	}
	index, code := c.onePositionalIndex(stderr, pos)
	if code != exitOK {
		return code
	}
	if *out == "" {
		return c.usageError(stderr, "needs --out FILE (\"-\" for standard output)")
	}
	if *out == "-" && *c.json {
		return c.usageError(stderr, "--out - and --json exclude each other")
	}
	cl, ctx, cancel, code := c.setup(stderr, false)
	if code != exitOK {
		return code
	}
	defer cancel()
	b, e, cp, err := cl.TlogProof(ctx, index)
	if err != nil {
		return c.failed(stderr, "proof", err)
	}
	if *out == "-" {
		stdout.Write(b)
		return exitOK
	}
	if err := os.WriteFile(*out, b, 0o644); err != nil {
		errorf(stderr, "proof: %v", err)
		return exitFailed
	}
	if *c.json {
		termtext.WriteJSON(stdout, map[string]any{"result": "verified", "index": e.Index, "tree_size": cp.Size, "file": *out})
		return exitOK
	}
	termtext.PrintLine(stdout, "wrote %s: entry %d in the tree of size %d (verified)", termtext.Quote(*out), e.Index, cp.Size)
	return exitOK
}

func runCheckpoint(args []string, stdout, stderr io.Writer) int {
	c := newCommon("checkpoint", "checkpoint [--url URL] (--key VKEY | --key-file FILE | --trust FILE)... [--token-file FILE] [--trusted CHECKPOINT] [--out FILE] [--json]")
	out := c.fs.String("out", "", "")
	trustedFile := c.fs.String("trusted", "", "")
	pos, code := c.parseArgs(args, stdout, stderr)
	if code >= 0 {
		return code
	}
	if len(pos) != 0 {
		return c.usageError(stderr, "takes no arguments")
	}
	trustedText, code := readTrusted(stderr, "checkpoint", *trustedFile)
	if code != exitOK {
		return code
	}
	cl, ctx, cancel, code := c.setup(stderr, false)
	if code != exitOK {
		return code
	}
	defer cancel()
	trusted, code := c.trustedCheckpoint(stderr, "checkpoint", *trustedFile, trustedText)
	if code != exitOK {
		return code
	}
	cp, signed, err := cl.Checkpoint(ctx)
	if err != nil {
		return c.failed(stderr, "checkpoint", err)
	}
	if trusted != nil {
		if cp.Size < trusted.Size {
			errorf(stderr, "checkpoint: the latest tree (size %d) is smaller than the trusted one (size %d)", cp.Size, trusted.Size)
			return exitFailed
		}
		if err := cl.VerifyConsistency(ctx, trusted, cp); err != nil {
			return c.failed(stderr, "checkpoint: consistency with --trusted", err)
		}
	}
	if *out != "" {
		if err := os.WriteFile(*out, signed, 0o644); err != nil {
			errorf(stderr, "checkpoint: %v", err)
			return exitFailed
		}
	}
	if *c.json {
		v := map[string]any{"result": "verified", "origin": cp.Origin, "tree_size": cp.Size, "root_hash": cp.Hash, "checkpoint": string(signed)}
		if trusted != nil {
			v["consistent_with"] = trusted.Size
		}
		termtext.WriteJSON(stdout, v)
		return exitOK
	}
	termtext.PrintLine(stdout, "checkpoint of %s: tree size %d (signature verified)", termtext.Quote(cp.Origin), cp.Size)
	termtext.PrintLine(stdout, "  root hash %s", base64.StdEncoding.EncodeToString(cp.Hash))
	if trusted != nil {
		termtext.PrintLine(stdout, "  extends the trusted tree of size %d (consistency proof verified)", trusted.Size)
	}
	if *out != "" {
		termtext.PrintLine(stdout, "  written to %s", termtext.Quote(*out))
	}
	return exitOK
}

// readTrusted reads the --trusted checkpoint file, if one is given; an
// unreadable one is bad usage. It is verified once the key is loaded
// (trustedCheckpoint).
func readTrusted(stderr io.Writer, cmd, file string) ([]byte, int) {
	if file == "" {
		return nil, exitOK
	}
	text, err := readFile(file, 64<<10)
	if err != nil {
		errorf(stderr, "%s: --trusted: %v", cmd, err)
		return nil, exitUsage
	}
	return text, exitOK
}

// trustedCheckpoint verifies the --trusted checkpoint text with the
// ledger's key; nil when none was given.
func (c *common) trustedCheckpoint(stderr io.Writer, cmd, file string, text []byte) (*log.Checkpoint, int) {
	if text == nil {
		return nil, exitOK
	}
	cp, err := c.key.Checkpoint(text)
	if err != nil {
		errorf(stderr, "%s: --trusted %s does not verify: %v", cmd, termtext.Quote(file), err)
		return nil, exitFailed
	}
	return cp, exitOK
}
