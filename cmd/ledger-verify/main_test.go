package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/decisionledger/ledger/commit/declare"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/storage/memory"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/decisionledger/ledger/internal/completion"
	"github.com/decisionledger/ledger/internal/shelltest"
	tlog "github.com/transparency-dev/formats/log"
	"golang.org/x/mod/sumdb/note"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		programName:      func() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) },
		"ledger-fixture": func() { os.Exit(makeFixture(os.Args[1:])) },
	})
}

// TestScript runs the CLI scripts in testdata/script (txtar).
func TestScript(t *testing.T) {
	corpus, err := filepath.Abs(declarationsDir())
	if err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: true,
		Cmds:                map[string]func(*testscript.TestScript, bool, []string){"setenv-from": cmdSetenvFrom},
		Condition:           shelltest.Condition,
		Setup: func(env *testscript.Env) error {
			env.Setenv("LEDGER_DECLARATIONS", corpus)
			return nil
		},
	})
}

// makeFixture builds a real ledger of N entries in memory and writes, in
// the current directory: ledger.vkey and other.vkey (an untrusted key),
// half.checkpoint (the checkpoint at N/2), export.ledger (all entries at
// the checkpoint N), tail.ledger (entries N/2..N with a consistency proof
// from N/2), empty.checkpoint (the empty tree's, signed at the ledger's
// first start), bogus-empty.checkpoint (of size 0 with another root,
// signed with the key), entry-7.tlog-proof, and params-<i>.json, the raw parameters of entry i, for i in
// 0..9. "ledger-fixture hostile" writes the files of writeHostile instead,
// "ledger-fixture decisions" those of writeDecisionFixture, "ledger-fixture
// approvals" those of writeApprovalFixture, "ledger-fixture rotated" those
// of writeRotatedFixture.
func makeFixture(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: ledger-fixture N | hostile | decisions | approvals | find | witnessed | rotated | hiding")
		return 2
	}
	if args[0] == "witnessed" {
		if err := writeWitnessFixture(".", 40); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	}
	if args[0] == "hiding" {
		if err := writeHidingFixture("."); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	}
	if args[0] == "rotated" {
		if err := writeRotatedFixture("."); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	}
	if args[0] == "find" {
		if err := writeFindFixture("."); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	}
	if args[0] == "approvals" {
		if err := writeApprovalFixture("."); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	}
	if args[0] == "decisions" {
		if err := writeDecisionFixture("."); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	}
	if args[0] == "hostile" {
		if err := writeHostile("."); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	}
	n, err := strconv.Atoi(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if _, err := fixture(".", n, ""); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// declarationsDir is the reference corpus: from the environment in a
// script (whose work directory is elsewhere), else relative to the package.
func declarationsDir() string {
	if d := os.Getenv("LEDGER_DECLARATIONS"); d != "" {
		return d
	}
	return filepath.Join("..", "..", "testdata", "declarations")
}

// fixture writes the files described at makeFixture into dir, signing with
// skey (a new key if empty), and returns the private key text.
func fixture(dir string, n int, skey string) (string, error) {
	ctx := context.Background()
	var err error
	if skey == "" {
		if skey, _, err = ledger.GenerateKey("ledger.example.com/log"); err != nil {
			return "", err
		}
	}
	key, err := ledger.ParseKey([]byte(skey), ledger.KeyOptions{})
	if err != nil {
		return "", err
	}
	vkey := key.VerifierKey()
	at := func(name string) string { return filepath.Join(dir, name) }
	_, other, _ := ledger.GenerateKey("ledger.example.com/log")
	l, err := ledger.Open(ctx, memory.New(), key, ledger.Options{CheckpointInterval: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return "", err
	}
	defer l.Close()
	// The checkpoint ledgerd signs at its first start: the empty tree's.
	empty, err := l.CheckpointAt(ctx, 0)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(at("empty.checkpoint"), empty, 0o644); err != nil {
		return "", err
	}
	// And one no log signs: of size 0, with another root.
	bogus, err := note.Sign(&note.Note{Text: string(tlog.Checkpoint{Origin: key.Name(), Size: 0, Hash: bytes.Repeat([]byte{7}, 32)}.Marshal())}, key.Signer())
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(at("bogus-empty.checkpoint"), bogus, 0o644); err != nil {
		return "", err
	}
	declFile, err := os.ReadFile(filepath.Join(declarationsDir(), "make_payment.json"))
	if err != nil {
		return "", err
	}
	decl, err := declare.Parse(declFile)
	if err != nil {
		return "", err
	}
	definition, err := decl.Digest()
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(at("make_payment.json"), declFile, 0o644); err != nil {
		return "", err
	}
	allowlists := map[string]map[string]bool{"payees": {}}
	for i := range n {
		payee := fmt.Sprintf("DE%020d", i)
		allowlists["payees"][payee] = true
		params := fmt.Sprintf(`{"amount_minor":%d,"currency":"EUR","memo":"invoice %d","payee":%q}`, 100*i, i, payee)
		// The corpus declaration minimizes the call, as a workload would;
		// even entries record its definition (version 2), odd ones not.
		res, err := decl.Minimize([]byte(params), declare.Options{Allowlists: allowlists})
		if err != nil {
			return "", err
		}
		rec := ledger.Record{
			Mediator: "mediator-1", Principal: "agent-1", Action: "make_payment",
			Decision: entry.Allow, Policies: []string{"payments.limit"},
			Params: res.Params, Tiers: res.Tiers, Attributes: res.Attributes,
		}
		if i%2 == 0 {
			rec.Definition = definition
		}
		if _, err := l.Append(ctx, rec); err != nil {
			return "", err
		}
		if i < 10 {
			if err := os.WriteFile(at(fmt.Sprintf("params-%d.json", i)), []byte(params+"\n"), 0o644); err != nil {
				return "", err
			}
		}
		if i+1 == n/2 {
			half, err := l.Publish(ctx)
			if err != nil {
				return "", err
			}
			if err := os.WriteFile(at("half.checkpoint"), half, 0o644); err != nil {
				return "", err
			}
		}
	}
	if _, err := l.Publish(ctx); err != nil {
		return "", err
	}
	write := func(name string, start, end uint64, opts ledger.ExportOptions) error {
		f, err := os.Create(at(name))
		if err != nil {
			return err
		}
		defer f.Close()
		return l.Export(ctx, f, start, end, opts)
	}
	if err := write("export.ledger", 0, uint64(n), ledger.ExportOptions{}); err != nil {
		return "", err
	}
	if err := write("tail.ledger", uint64(n/2), uint64(n), ledger.ExportOptions{ConsistencyFrom: uint64(n / 2)}); err != nil {
		return "", err
	}
	proof, err := l.TlogProof(ctx, 7, 0)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(at("entry-7.tlog-proof"), proof, 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(at("ledger.vkey"), []byte(vkey+"\n"), 0o644); err != nil {
		return "", err
	}
	return skey, os.WriteFile(at("other.vkey"), []byte(other+"\n"), 0o644)
}

// TestUsageNamesEveryFlag holds every command's usage text (its --help,
// and what completion offers) to the flags the command defines: each
// flag is named, and nothing else is.
func TestUsageNamesEveryFlag(t *testing.T) {
	defer func() { onHelp = nil }()
	for _, c := range commands {
		var fs *flag.FlagSet
		onHelp = func(f *flag.FlagSet) { fs = f }
		var stdout, stderr strings.Builder
		if code := c.run([]string{"--help"}, strings.NewReader(""), &stdout, &stderr); code != exitOK || fs == nil {
			t.Fatalf("%s --help: exit %d, flag set seen %v: %s", c.name, code, fs != nil, stderr.String())
		}
		named := map[string]bool{}
		for _, o := range completion.FromHelp([]string{c.name}, c.usage).Options {
			named[o.Name] = true
			if fs.Lookup(o.Name) == nil {
				t.Errorf("%s: its usage names --%s, which it does not define", c.name, o.Name)
			}
		}
		fs.VisitAll(func(f *flag.Flag) {
			if !named[f.Name] {
				t.Errorf("%s: defines --%s, which its usage does not name", c.name, f.Name)
			}
		})
	}
}
