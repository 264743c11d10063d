package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/decisionledger/ledger/ledger"
)

// check is "ledgerd check": the whole store read and checked, with
// ledgerd stopped (the store's lock refuses a check beside a running
// ledgerd; on PostgreSQL, the sequencer's lease, which the check holds
// while it reads: exclusive). It opens the store as serve does, which may re-index frames
// and erase a write a crash cut short, then reads everything: every frame
// and entry checksum, the index against the frames, badger's table
// checksums (badger.Store.Check), and every entry rehashed into the tree,
// the tiles and the latest checkpoint's root and signature (ledger.Check).
// It signs nothing and appends nothing. Exit 0: no damage; 1: damage or
// an error, named.
func check(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fset := flag.NewFlagSet("check", flag.ContinueOnError)
	var df dataFlags
	df.register(fset)
	if _, code, ok := parseArgs(fset, args, 0, stdout, stderr); !ok {
		return code
	}
	if err := df.check(fset); err != nil {
		return usageError(stderr, "check", "%v", err)
	}
	configPath, err := df.existing()
	if err != nil {
		return fail(stderr, "check: %v", err)
	}
	cfg, err := loadConfig(configPath)
	if err != nil {
		return fail(stderr, "%v", err)
	}
	key, err := ledger.LoadKey(cfg.KeyFile, ledger.KeyOptions{Name: cfg.KeyName})
	if err != nil {
		return fail(stderr, "%v", err)
	}
	start := time.Now()
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	store, err := openStore(ctx, cfg, log)
	if err != nil {
		return fail(stderr, "%v", err)
	}
	defer store.Close()
	release, err := store.exclusive(ctx, cfg, "ledgerd-check")
	if err != nil {
		return fail(stderr, "check: %v", err)
	}
	if store.badger != nil {
		if err := store.badger.Check(ctx); err != nil {
			release()
			return fail(stderr, "%v", err)
		}
	}
	if err := ledger.Check(ctx, store, key, cfg.PreviousKeys...); err != nil {
		release()
		code := fail(stderr, "%v", err)
		rotationHints(stderr, err)
		return code
	}
	st, err := store.State(ctx)
	if err != nil {
		release()
		return fail(stderr, "%v", err)
	}
	if err := release(); err != nil {
		return fail(stderr, "check: %v", err)
	}
	if err := store.Close(); err != nil {
		return fail(stderr, "%v", err)
	}
	fmt.Fprintf(stdout, "ledgerd: check: %s holds %d entries, the latest signed checkpoint is for %d; no damage found (%v)\n",
		store.where, st.Size, st.CheckpointSize, time.Since(start).Round(time.Millisecond))
	return 0
}
