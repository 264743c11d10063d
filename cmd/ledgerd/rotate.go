package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/decisionledger/ledger/config"
	"github.com/decisionledger/ledger/daemon"
	"github.com/decisionledger/ledger/ledger"
	"github.com/transparency-dev/formats/log"
	"golang.org/x/mod/sumdb/note"
)

// keyCommand is "ledgerd key rotate --new-key FILE": the log's signing key
// replaced by the key in FILE, with ledgerd stopped (docs/operations.md).
//
// Why offline, with both private keys at hand once: the rotation
// checkpoint must be signed by the old key, which vouches for the new one
// over the whole tree it hands over, and no entry may be appended between
// that signature and the switch (entries after the rotation checkpoint
// carry the new key's id). A stopped ledgerd (the store's lock refuses the
// command beside a running one; on PostgreSQL, the sequencer's lease,
// which the command holds while it rotates) makes both certain; a config naming the
// old key for a first start would keep the old private key configured,
// and so on the server, longer than the one command needs it.
func keyCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if _, code, ok := subcommand(args, "key", []string{"rotate"}, stdout, stderr); !ok {
		return code
	}
	fset := flag.NewFlagSet("key rotate", flag.ContinueOnError)
	var df dataFlags
	df.register(fset)
	newKeyPath := fset.String("new-key", "", "")
	if _, code, ok := parseArgs(fset, args[1:], 0, stdout, stderr); !ok {
		return code
	}
	if err := df.check(fset); err != nil {
		return usageError(stderr, "key rotate", "%v", err)
	}
	if *newKeyPath == "" {
		return usageError(stderr, "key rotate", "--new-key FILE is required: the new signing key (ledgerd keygen --name ORIGIN --out FILE makes one)")
	}
	path, err := df.existing()
	if err != nil {
		return fail(stderr, "key rotate: %v", err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		return fail(stderr, "%v", err)
	}
	old, err := ledger.LoadKey(cfg.KeyFile, ledger.KeyOptions{Name: cfg.KeyName})
	if err != nil {
		return fail(stderr, "key rotate: the current key: %v", err)
	}
	newAbs, err := filepath.Abs(*newKeyPath)
	if err != nil {
		return fail(stderr, "key rotate: %v", err)
	}
	newKey, err := ledger.LoadKey(newAbs, ledger.KeyOptions{Name: old.Name()})
	if err != nil {
		code := fail(stderr, "key rotate: the new key: %v", err)
		hint(stderr, "the new key must have the log's name, %s, the origin every entry and checkpoint carries: make it with ledgerd keygen --name %s --out FILE", old.Name(), shellQuote(old.Name()))
		return code
	}
	if newKey.ID() == old.ID() {
		fmt.Fprintf(stderr, "ledgerd: %s already signs with the key in %s (%s): nothing to do\n", path, *newKeyPath, newKey.ID())
		return 0
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	store, err := daemon.OpenStore(ctx, cfg, log)
	if err != nil {
		return fail(stderr, "%v", err)
	}
	defer store.Close()
	release, err := store.Exclusive(ctx, cfg, "ledgerd-key-rotate")
	if err != nil {
		return fail(stderr, "key rotate: %v", err)
	}
	signed, err := ledger.Rotate(ctx, store.Store, old, newKey, ledger.Options{Logger: log, PreviousKeys: cfg.PreviousKeys})
	if err != nil {
		release()
		code := fail(stderr, "key rotate: %v", err)
		rotationHints(stderr, err)
		return code
	}
	st, err := store.Store.State(ctx)
	if err != nil {
		release()
		return fail(stderr, "%v", err)
	}
	if err := release(); err != nil {
		// The rotation checkpoint was stored under the lease: fenced
		// writes are refused, so a stored one stands.
		log.Warn("key rotate: releasing the lease", "error", err)
	}
	if err := store.Close(); err != nil {
		return fail(stderr, "%v", err)
	}
	if err := editConfig(path, func(text []byte) ([]byte, error) { return config.RotateKey(text, path, newAbs, old.VerifierKey()) }); err != nil {
		code := fail(stderr, "key rotate: the rotation checkpoint is stored, but the config was not changed: %v", err)
		hint(stderr, "run the same command again: it finds the rotation made and changes the config; or set key_file to %s and add %s to previous_keys by hand", newAbs, old.VerifierKey())
		return code
	}
	fmt.Fprintf(stdout, "ledgerd: rotated the key of %s at tree size %d\nold key: %s\nnew key: %s\n", old.Name(), st.CheckpointSize, old.VerifierKey(), newKey.VerifierKey())
	fmt.Fprintf(stdout, "rotation checkpoint (signed by both keys; served at tree size %d):\n%s", st.CheckpointSize, signed)
	fmt.Fprintf(stderr, "ledgerd: %s now names the new key (key_file) and lists the old one in previous_keys; start ledgerd to append with the new key\n", path)
	if size, ok := rotationSize(signed, old); ok {
		fmt.Fprintf(stdout, "trust file lines for auditors (the old key's line replaces the one they have):\n%s retired-at %d\n%s\n", old.VerifierKey(), size, newKey.VerifierKey())
		fmt.Fprintf(stderr, "ledgerd: give auditors the two trust file lines above (ledger-verify --trust FILE, docs/operations.md): the new verifier key, and the old one retired at tree size %d, so that nothing the old key signs after the rotation verifies\n", size)
	} else {
		// Run again after ledgerd appended with the new key: the latest
		// checkpoint is no longer the rotation checkpoint.
		fmt.Fprintf(stderr, "ledgerd: give auditors the new verifier key, and the old one with \"retired-at N\", N the tree size of the rotation checkpoint (the checkpoint signed by both keys; docs/operations.md)\n")
	}
	fmt.Fprintf(stderr, "ledgerd: destroy the old private key %s once the new key serves (docs/operations.md): it must never sign again\n", cfg.KeyFile)
	return 0
}

// rotationSize returns the tree size of the rotation checkpoint signed,
// if it is one: signed by the old key (and the new one).
func rotationSize(signed []byte, old *ledger.Key) (uint64, bool) {
	v, err := note.NewVerifier(old.VerifierKey())
	if err != nil {
		return 0, false
	}
	n, err := note.Open(signed, note.VerifierList(v))
	if err != nil {
		return 0, false
	}
	var cp log.Checkpoint
	if _, err := cp.Unmarshal([]byte(n.Text)); err != nil {
		return 0, false
	}
	return cp.Size, true
}

// rotationHints says what to do about a refusal that concerns the log's
// keys (ledger.ErrRotation).
func rotationHints(stderr io.Writer, err error) {
	if !errors.Is(err, ledger.ErrRotation) {
		return
	}
	var uk *ledger.UnknownKeyError
	if errors.As(err, &uk) {
		unknown := strings.Join(uk.Signers, ", ")
		if strings.HasPrefix(uk.What, "the latest checkpoint") {
			// The newest thing the log signed: its signer signs the log
			// now, and the configured key, if the log's, is an old one.
			hint(stderr, "the log is signed now by %s, which the config does not name: if the log's key was rotated to it (ledgerd key rotate), configure its private key file as key_file and list the configured key %s in previous_keys (docs/operations.md); running ledgerd key rotate --new-key FILE again, FILE that key's file, changes the config so", unknown, uk.Configured)
			return
		}
		// An entry: the key that signed it may be older than the
		// configured one, or newer (the log's last entries).
		hint(stderr, "%s is signed by %s, which the config names neither as key_file (%s) nor in previous_keys: if it is an earlier key of the log, list its verifier key in previous_keys; if the log's key was rotated to it, configure its private key file as key_file and list %s in previous_keys (docs/operations.md)", uk.What, unknown, uk.Configured, uk.Configured)
		return
	}
	hint(stderr, "docs/operations.md describes key rotation: ledgerd key rotate --new-key FILE, with ledgerd stopped, signs the rotation checkpoint with both keys and changes the config")
}
