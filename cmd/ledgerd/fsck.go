package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"

	"github.com/decisionledger/ledger/config"
	"github.com/decisionledger/ledger/daemon"
	"github.com/decisionledger/ledger/internal/progress"
	"github.com/decisionledger/ledger/internal/termtext"
	"github.com/decisionledger/ledger/ledger"
)

// fsckCommand is "ledgerd fsck" (and "ledgerd check", its older name):
// the whole store read and checked, with ledgerd stopped (the store's lock
// refuses a check beside a running ledgerd; on PostgreSQL, the
// sequencer's lease, which the check holds while it reads: exclusive). It
// opens the store as serve does, which may re-index frames and erase a
// write a crash cut short, and says what that repaired (not damage: what
// a crash leaves, and serve would repair the same), then reads
// everything: every frame and entry checksum, the index against the
// frames, badger's table checksums (badger.Store.Check), and every entry,
// tile, checkpoint and key as ledger.Fsck checks them. A progress line
// goes to stderr if it is a terminal (internal/progress), the summary to
// stdout, each damage found to stderr. Damage in what opening reads
// (the frames of the latest entries, those a crash left unindexed) stops
// the check there, reported as damage. It signs nothing and appends
// nothing. Exit 0: no damage; 1: damage or an error, named.
func fsckCommand(ctx context.Context, name string, args []string, stdout, stderr io.Writer) int {
	fset := flag.NewFlagSet(name, flag.ContinueOnError)
	var df dataFlags
	df.register(fset)
	signatures := fset.Bool("signatures", false, "")
	maxDamage := fset.Int("max-damage", 100, "")
	online := fset.Bool("online", false, "")
	if _, code, ok := parseArgs(fset, args, 0, stdout, stderr); !ok {
		return code
	}
	if err := df.check(fset); err != nil {
		return usageError(stderr, name, "%v", err)
	}
	if *maxDamage < 1 {
		return usageError(stderr, name, "--max-damage must be at least 1")
	}
	configPath, err := df.existing()
	if err != nil {
		return fail(stderr, "%s: %v", name, err)
	}
	cfg, err := config.Load(configPath)
	if err != nil {
		return fail(stderr, "%v", err)
	}
	key, err := ledger.LoadKey(cfg.KeyFile, ledger.KeyOptions{Name: cfg.KeyName})
	if err != nil {
		return fail(stderr, "%v", err)
	}
	if *online {
		return fsckOnline(ctx, name, cfg, key, ledger.FsckOptions{Signatures: *signatures, MaxDamage: *maxDamage}, stdout, stderr)
	}
	start := time.Now()
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	store, err := daemon.OpenStore(ctx, cfg, log)
	if err != nil {
		if ctx.Err() == nil && errors.Is(err, ledger.ErrCorrupt) && !errors.Is(err, ledger.ErrRotation) {
			// Damage in what opening reads (the frames it replays, and
			// those of the latest entries, whose leaf hashes and keys it
			// indexes again: docs/log.md §5): found, but nothing else can
			// be checked in a store that does not open.
			fmt.Fprintf(stderr, "ledgerd: damage: %v\n", err)
			fmt.Fprintf(stderr, "ledgerd: %s: the store does not open, so nothing else was checked; docs/operations.md \"Damage\" says what to do\n", name)
			return 1
		}
		return fail(stderr, "%v", err)
	}
	defer store.Close()
	release, err := store.Exclusive(ctx, cfg, "ledgerd-"+name)
	if err != nil {
		return fail(stderr, "%s: %v", name, err)
	}
	var repairs []string
	var storeDamage error
	if store.Badger != nil {
		repairs = store.Badger.Repairs()
		fmt.Fprintf(stderr, "ledgerd: %s: checking the frames, the index and badger's tables of %s\n", name, store.Where)
		records, _ := fsckMeter(stderr, name+": the store's records")
		err := store.Badger.CheckProgress(ctx, records.Hook())
		records.Finish()
		if err != nil {
			if ctx.Err() != nil || !errors.Is(err, ledger.ErrCorrupt) {
				release()
				return fail(stderr, "%v", err)
			}
			// Damage: the ledger's checks go on and say more.
			storeDamage = err
			fmt.Fprintf(stderr, "ledgerd: damage: %v\n", err)
		}
	}
	meter, update := fsckMeter(stderr, name+": the ledger's checks")
	rep, err := ledger.Fsck(ctx, store.Store, key, ledger.FsckOptions{
		PreviousKeys: cfg.PreviousKeys, Signatures: *signatures, MaxDamage: *maxDamage, Progress: update,
	})
	meter.Finish()
	if rerr := release(); rerr != nil && err == nil {
		return fail(stderr, "%s: %v", name, rerr)
	}
	if cerr := store.Close(); cerr != nil && err == nil {
		return fail(stderr, "%v", cerr)
	}
	return fsckSummary(stdout, stderr, name, store.Where, repairs, rep, err, storeDamage, time.Since(start), false)
}

// fsckOnline is "ledgerd fsck --online": the check made by the ledgerd
// serving a badger store (daemon.FsckOnline asks it), or, on PostgreSQL,
// by this process beside the instances, without the lease, up to the
// latest checkpoint.
func fsckOnline(ctx context.Context, name string, cfg *config.Config, key *ledger.Key, req ledger.FsckOptions, stdout, stderr io.Writer) int {
	start := time.Now()
	meter, update := fsckMeter(stderr, name)
	if cfg.Store != "" {
		store, err := daemon.OpenStore(ctx, cfg, nil)
		if err != nil {
			return fail(stderr, "%v", err)
		}
		defer store.Close()
		st, err := store.Store.State(ctx)
		if err != nil {
			return fail(stderr, "%v", err)
		}
		rep, err := ledger.Fsck(ctx, store.Store, key, ledger.FsckOptions{PreviousKeys: cfg.PreviousKeys, Online: true, Size: st.CheckpointSize,
			Signatures: req.Signatures, MaxDamage: req.MaxDamage, Progress: update})
		meter.Finish()
		return fsckSummary(stdout, stderr, name, store.Where, nil, rep, err, nil, time.Since(start), true)
	}
	rep, err := daemon.FsckOnline(ctx, cfg.StoreDir, ledger.FsckOptions{Signatures: req.Signatures, MaxDamage: req.MaxDamage, Progress: update})
	meter.Finish()
	if err != nil {
		code := fail(stderr, "%s --online: %v", name, err)
		if errors.As(err, new(*daemon.NotServedError)) {
			hint(stderr, "with ledgerd stopped, run ledgerd %s without --online", name)
		}
		return code
	}
	return fsckSummary(stdout, stderr, name, cfg.StoreDir, nil, rep, rep.Err(), nil, time.Since(start), true)
}

// fsckSummary prints what fsck found, and returns the exit status:
// repairs are what opening the store repaired, said where the summary
// goes (stdout, or stderr with damage). online says the check was of the
// tree at a checkpoint while ledgerd appended.
func fsckSummary(stdout, stderr io.Writer, name, where string, repairs []string, rep *ledger.FsckReport, err, storeDamage error, took time.Duration, online bool) int {
	state := fmt.Sprintf("%s holds %s, the latest signed checkpoint is for %d", where, termtext.Count(rep.StoreSize, "entry", "entries"), rep.CheckpointSize)
	if online {
		state = fmt.Sprintf("%s held %s, checked online up to the signed checkpoint for %d", where, termtext.Count(rep.StoreSize, "entry", "entries"), rep.CheckpointSize)
	}
	for _, d := range rep.Damage {
		fmt.Fprintf(stderr, "ledgerd: damage: %v\n", d)
	}
	if rep.More > 0 {
		fmt.Fprintf(stderr, "ledgerd: damage: and %d more problems (--max-damage)\n", rep.More)
	}
	what := "without entry signatures (--signatures adds them)"
	if rep.Signatures {
		what = "with every entry's signature"
	}
	stats := fmt.Sprintf("%s and %s checked %s in %v, %s entries/s",
		termtext.Count(rep.Checked, "entry", "entries"), termtext.Count(rep.Tiles, "tile", "tiles"), what, rep.Elapsed.Round(time.Millisecond), rate(rep.Checked, rep.Elapsed))
	said := stdout
	if err != nil || storeDamage != nil {
		said = stderr
	}
	for _, r := range repairs {
		fmt.Fprintf(said, "ledgerd: %s: repaired when the store was opened (as serve would): %s\n", name, r)
	}
	if err != nil || storeDamage != nil {
		found := len(rep.Damage) + rep.More
		if storeDamage != nil {
			found++
		}
		if found == 0 { // the check did not finish
			code := fail(stderr, "%s: %v", name, err)
			rotationHints(stderr, err)
			return code
		}
		fmt.Fprintf(stderr, "ledgerd: error: %s: %s; %s found (%s; %v in all)\n",
			name, state, termtext.Count(found, "problem", "problems"), stats, took.Round(time.Millisecond))
		rotationHints(stderr, err)
		return 1
	}
	after := ""
	if len(repairs) > 0 {
		after = " after the repairs above"
	}
	fmt.Fprintf(stdout, "ledgerd: %s: %s; no damage found%s (%s; %v in all)\n",
		name, state, after, stats, took.Round(time.Millisecond))
	if n := rep.StoreSize - rep.CheckpointSize; !online && rep.StoreSize > rep.CheckpointSize {
		// Not damage: a ledgerd that stopped before signing (a crash)
		// leaves them, and signs a checkpoint for them when it starts.
		fmt.Fprintf(stdout, "ledgerd: %s: the last %s durable and checked but not yet covered by a signed checkpoint: ledgerd signs one when it starts\n", name, termtext.Count(n, "entry is", "entries are"))
	}
	return 0
}

// rate formats n per d, a whole number.
func rate(n uint64, d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return strconv.FormatFloat(float64(n)/d.Seconds(), 'f', 0, 64)
}

// fsckMeter is the progress line of one part of fsck on stderr, if a
// terminal (internal/progress), and the hook ledger.Fsck calls with it.
func fsckMeter(stderr io.Writer, label string) (*progress.Meter, func(ledger.FsckProgress)) {
	m := progress.New(stderr, "ledgerd: "+label, "entries")
	if m == nil {
		return nil, nil
	}
	return m, func(p ledger.FsckProgress) { m.Update(p.Checked, p.Total) }
}
