package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/commit/declare"
	"github.com/decisionledger/ledger/internal/termtext"
)

// maxDeclaration bounds a declaration file, read or fetched.
const maxDeclaration = 1 << 20

// allowFlag is --allow LIST=VALUE, repeated: payee_known's allowlists.
type allowFlag map[string]map[string]bool

func (a allowFlag) String() string { return "" }
func (a allowFlag) Set(v string) error {
	list, value, ok := strings.Cut(v, "=")
	if !ok || list == "" {
		return errors.New("wants LIST=VALUE")
	}
	if a[list] == nil {
		a[list] = map[string]bool{}
	}
	a[list][value] = true
	return nil
}

// policyFlag is --policy ID, repeated: an append's determining policies,
// in the order given. (--policies names a policy directory, in
// ledger-verify and ledger-declare.)
type policyFlag []string

func (p *policyFlag) String() string { return "" }
func (p *policyFlag) Set(v string) error {
	if v == "" {
		return errors.New("wants a policy id")
	}
	*p = append(*p, v)
	return nil
}

// runMinimize computes, from a call's raw parameters and the action's
// declaration, the body of a decide or append request: the commitment to
// the parameters, the applied-tiers digest and the minimized attributes
// (package commit/declare). The raw parameters never leave this process;
// with --hiding their values and openings go to the new --disclosure file
// only, written before the body is printed.
func runMinimize(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := newCommonWithoutKeys("minimize", "minimize (--declaration FILE | --action NAME) [--url URL] [--token-file FILE] [--hiding --disclosure FILE] [--allow LIST=VALUE]... [--principal NAME] [--decision DECISION] [--policy ID]... [--json] PARAMS")
	declFile := c.fs.String("declaration", "", "")
	action := c.fs.String("action", "", "")
	hiding := c.fs.Bool("hiding", false, "")
	disclosureFile := c.fs.String("disclosure", "", "")
	allow := allowFlag{}
	c.fs.Var(allow, "allow", "")
	principal := c.fs.String("principal", "", "")
	decision := c.fs.String("decision", "", "")
	var policyList policyFlag
	c.fs.Var(&policyList, "policy", "")
	pos, code := c.parseArgs(args, stdout, stderr)
	if code >= 0 {
		return code
	}
	if len(pos) != 1 {
		return c.usageError(stderr, "takes exactly one PARAMS file (\"-\" for standard input)")
	}
	if (*declFile == "") == (*action == "") {
		return c.usageError(stderr, "needs one of --declaration FILE and --action NAME")
	}
	if *action != "" && !declare.IsActionName(*action) {
		return c.usageError(stderr, "--action %s is not an action name", termtext.Quote(*action))
	}
	if *hiding != (*disclosureFile != "") {
		return c.usageError(stderr, "--hiding and --disclosure FILE go together: the hiding commitment's openings must be kept")
	}
	if *decision == "" && len(policyList) > 0 {
		return c.usageError(stderr, "--policy needs --decision (an append's body)")
	}
	raw, err := readInput(pos[0], stdin, commit.DefaultMaxBytes)
	if err != nil {
		errorf(stderr, "minimize: %v", err)
		return exitUsage
	}

	var declText []byte
	var from string
	if *declFile != "" {
		if declText, err = readInput(*declFile, stdin, maxDeclaration); err != nil {
			errorf(stderr, "minimize: --declaration: %v", err)
			return exitUsage
		}
		from = termtext.Quote(*declFile)
	} else {
		token, code := c.token(stderr, false)
		if code != exitOK {
			return code
		}
		ctx, cancel, code := c.urlAndContext(stderr)
		if code != exitOK {
			return code
		}
		defer cancel()
		if declText, err = fetchDeclaration(ctx, *c.url, token, *action); errors.As(err, new(*catalogError)) {
			errorf(stderr, "minimize: %v", err)
			return exitFailed
		} else if err != nil {
			return c.failed(stderr, "minimize", err)
		}
		from = "the catalog at " + *c.url
	}
	decl, err := declare.Parse(declText)
	if err != nil {
		errorf(stderr, "minimize: the declaration from %s: %v", from, err)
		return exitFailed
	}
	if *action != "" && decl.Action != *action {
		errorf(stderr, "minimize: the catalog at %s answered the declaration of %s, not of %s", *c.url, termtext.Quote(decl.Action), termtext.Quote(*action))
		return exitFailed
	}
	definition, err := decl.Digest()
	if err != nil {
		errorf(stderr, "minimize: the declaration from %s: %v", from, err)
		return exitFailed
	}
	opts := declare.Options{Allowlists: allow}
	if *hiding {
		opts.Openings = commit.RandomOpenings()
	}
	res, err := decl.Minimize(raw, opts)
	if err != nil { // an *declare.Error names the pointer, never the value
		errorf(stderr, "minimize: %s: %v", termtext.Quote(pos[0]), err)
		return exitFailed
	}
	if res.Disclosure != nil {
		// Kept before the body is printed: a decision recorded without
		// its openings could never be checked.
		if err := writeNewFile(*disclosureFile, res.Disclosure); err != nil {
			errorf(stderr, "minimize: --disclosure: %v", err)
			return exitFailed
		}
	}

	body := map[string]any{
		"action": decl.Action, "params_digest": res.Params.DigestText(), "params_size": res.Params.Size,
		"tiers_digest": res.Tiers.String(), "attributes": json.RawMessage(res.Attributes),
	}
	if *principal != "" {
		body["principal"] = *principal
	}
	if *decision != "" {
		body["decision"] = *decision
		body["policies"] = nonNil([]string(policyList))
	}
	if *c.json {
		v := map[string]any{
			"result": "minimized", "action": decl.Action, "definition_digest": definition.String(),
			"params_digest": res.Params.DigestText(), "params_size": res.Params.Size, "tiers_digest": res.Tiers.String(),
			"attributes": json.RawMessage(res.Attributes), "body": body,
		}
		if res.Disclosure != nil {
			v["disclosure"] = *disclosureFile
		}
		termtext.WriteJSON(stdout, v)
		return exitOK
	}
	b, _ := json.MarshalIndent(body, "", "  ")
	stdout.Write(append(b, '\n'))
	return exitOK
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// readInput reads a named file, or in for "-", refusing more than limit
// bytes.
func readInput(name string, in io.Reader, limit int) ([]byte, error) {
	if name != "-" {
		return readFile(name, limit)
	}
	b, err := io.ReadAll(io.LimitReader(in, int64(limit)+1))
	if err == nil && len(b) > limit {
		err = fmt.Errorf("standard input is longer than %d bytes", limit)
	}
	return b, err
}

// writeNewFile writes v's JSON to a new file, mode 0600, synced; it never
// replaces a file. A failed write removes the file.
func writeNewFile(path string, v json.Marshaler) error {
	b, err := v.MarshalJSON()
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
	}
	return err
}

// catalogError is an answer of ledgerd's catalog that is not the
// declaration asked for: no such action, a list or a file that does not
// parse, digests that differ. Its message is err's.
type catalogError struct{ err error }

func (e *catalogError) Error() string { return e.err.Error() }
func (e *catalogError) Unwrap() error { return e.err }

func catalogErrorf(format string, args ...any) error {
	return &catalogError{fmt.Errorf(format, args...)}
}

// fetchDeclaration fetches the declaration of action from ledgerd's
// catalog (GET /v1/actions/{action}, the file byte for byte) and checks
// that its digests are those the catalog's list names (GET /v1/actions):
// both answers are unsigned, but a declaration that is not the one the
// list and the ledger's entries name is refused. An error without the
// server's answer names the URL tried.
func fetchDeclaration(ctx context.Context, baseURL, token, action string) ([]byte, error) {
	base := strings.TrimSuffix(baseURL, "/")
	listBody, err := httpGet(ctx, base+"/v1/actions", token)
	if err != nil {
		return nil, err
	}
	var list struct {
		Actions []struct {
			Action           string `json:"action"`
			TiersDigest      string `json:"tiers_digest"`
			DefinitionDigest string `json:"definition_digest"`
		} `json:"actions"`
	}
	if err := json.Unmarshal(listBody, &list); err != nil {
		return nil, catalogErrorf("%s/v1/actions: not a list of actions", base)
	}
	var tiers, definition string
	for _, a := range list.Actions {
		if a.Action == action {
			tiers, definition = a.TiersDigest, a.DefinitionDigest
		}
	}
	if definition == "" {
		return nil, catalogErrorf("the catalog at %s has no action %s", base, termtext.Quote(action))
	}
	file, err := httpGet(ctx, base+"/v1/actions/"+action, token)
	if err != nil {
		return nil, err
	}
	decl, err := declare.Parse(file)
	if err != nil {
		return nil, catalogErrorf("%s/v1/actions/%s: %w", base, action, err)
	}
	gotDef, err1 := decl.Digest()
	gotTiers, err2 := decl.TiersDigest()
	if err := errors.Join(err1, err2); err != nil {
		return nil, catalogErrorf("%s/v1/actions/%s: %w", base, action, err)
	}
	if gotDef.String() != definition || gotTiers.String() != tiers {
		return nil, catalogErrorf("the declaration %s/v1/actions/%s does not have the digests GET /v1/actions names (definition %s, tiers %s)", base, action, definition, tiers)
	}
	return file, nil
}

// httpGet GETs url with the bearer token if any and returns the body of a
// 200, at most maxDeclaration bytes; another status is a *client.Error.
func httpGet(ctx context.Context, url, token string) ([]byte, error) {
	body, err := httpOpen(ctx, url, token)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	b, err := io.ReadAll(io.LimitReader(body, maxDeclaration+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", url, err)
	}
	if len(b) > maxDeclaration {
		return nil, fmt.Errorf("%s: the answer is longer than %d bytes", url, maxDeclaration)
	}
	return b, nil
}
