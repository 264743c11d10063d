// "ledgerd fsck --online": the client of the fsck socket of the ledgerd
// serving a badger store (package daemon serves it and defines its
// protocol), or, on PostgreSQL, a check by this process beside the
// instances, without the lease, up to the latest checkpoint.

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"path/filepath"
	"time"

	"github.com/decisionledger/ledger/config"
	"github.com/decisionledger/ledger/daemon"
	"github.com/decisionledger/ledger/ledger"
)

// fsckOnline is "ledgerd fsck --online": the check made by the ledgerd
// serving a badger store, or, on PostgreSQL, by this process beside the
// instances.
func fsckOnline(ctx context.Context, name string, cfg *config.Config, key *ledger.Key, req daemon.FsckRequest, stdout, stderr io.Writer) int {
	start := time.Now()
	p := newProgress(stderr, name)
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
			Signatures: req.Signatures, MaxDamage: req.MaxDamage, Progress: p.update})
		p.done()
		return fsckSummary(stdout, stderr, name, store.Where, nil, rep, err, nil, time.Since(start), true)
	}
	path := filepath.Join(cfg.StoreDir, daemon.FsckSocket)
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		code := fail(stderr, "%s --online: no ledgerd serves %s (%v)", name, cfg.StoreDir, err)
		hint(stderr, "with ledgerd stopped, run ledgerd %s without --online", name)
		return code
	}
	defer c.Close()
	go func() {
		<-ctx.Done()
		c.Close()
	}()
	if err := json.NewEncoder(c).Encode(req); err != nil {
		return fail(stderr, "%s --online: %v", name, err)
	}
	dec := json.NewDecoder(bufio.NewReader(c))
	for {
		var m daemon.FsckMessage
		if err := dec.Decode(&m); err != nil {
			p.done()
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			return fail(stderr, "%s --online: the answer of the ledgerd serving %s ended: %v", name, cfg.StoreDir, err)
		}
		if m.Progress != nil {
			p.update(ledger.FsckProgress{Checked: m.Progress.Checked, Total: m.Progress.Total, Elapsed: time.Duration(m.Progress.ElapsedNS)})
			continue
		}
		if m.Done == nil {
			continue
		}
		p.done()
		done := m.Done
		if done.Error != "" && len(done.Damage) == 0 {
			return fail(stderr, "%s --online: %s", name, done.Error)
		}
		rep := &ledger.FsckReport{StoreSize: done.StoreSize, Checked: done.Checked, CheckpointSize: done.CheckpointSize, Tiles: done.Tiles,
			Signatures: done.Signatures, Elapsed: time.Duration(done.ElapsedNS), More: done.More}
		for _, s := range done.Damage {
			rep.Damage = append(rep.Damage, errors.New(s))
		}
		return fsckSummary(stdout, stderr, name, cfg.StoreDir, nil, rep, rep.Err(), nil, time.Since(start), true)
	}
}
