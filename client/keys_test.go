package client_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/decisionledger/ledger/client"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/verify"
)

// rotated is a fake ledger whose key was rotated after entry 0: entry 0
// carries the old key's id, entries from 1 on the new key's. forged is
// the same history signed on by the old key after the rotation, as one
// who kept the old key could sign it. Appends are answered from log, or
// from forged when forge is set.
type rotated struct {
	*fakeLedger
	forged         *fakeLedger
	oldKey, newKey string
	oldID          string
	forge          bool
}

func newRotated(t *testing.T) *rotated {
	f := newFake(t)
	f.add(request())
	r := &rotated{fakeLedger: f, oldKey: f.log.VerifierKey, forged: &fakeLedger{t: t, log: f.log.Copy(1)}}
	e0, err := entry.Parse(f.log.Entry(0))
	if err != nil {
		t.Fatal(err)
	}
	r.oldID = e0.KeyID
	if err := f.log.Rotate(); err != nil {
		t.Fatal(err)
	}
	r.newKey = f.log.VerifierKey
	f.add(request()) // entry 1, by the new key
	r.forged.add(request())
	f.answer = func(req *http.Request, body []byte) (int, string) {
		if req.URL.Path != "/v1/entries" {
			return http.StatusNotFound, `{"error":{"code":"not_found"}}`
		}
		if r.forge {
			i, _ := r.forged.add(request())
			return http.StatusCreated, r.forged.receipt(i)
		}
		i, _ := f.add(request())
		return http.StatusCreated, f.receipt(i)
	}
	return r
}

func (r *rotated) clientOf(vkeys ...string) *client.Client {
	r.t.Helper()
	keys, err := verify.ParseKeys(vkeys...)
	if err != nil {
		r.t.Fatal(err)
	}
	c, err := client.NewWithKeys(r.url, "token-of-mediator-1", keys)
	if err != nil {
		r.t.Fatal(err)
	}
	c.MaxAttempts, c.Backoff = 1, time.Millisecond
	return c
}

// A client trusting the old and the new key verifies the entries before
// the rotation and the receipts after it; one trusting the new key alone
// refuses the old entries, naming the old key.
func TestKeyRotation(t *testing.T) {
	ctx := context.Background()
	r := newRotated(t)

	both := r.clientOf(r.oldKey, r.newKey)
	if e, _, err := both.Entry(ctx, 0); err != nil || e.KeyID != r.oldID {
		t.Fatalf("entry 0 by the old key, trusting both: %v", err)
	}
	rc, err := both.Append(ctx, decision(request()))
	if err != nil {
		t.Fatalf("a receipt by the new key, trusting both: %v", err)
	}
	if rc.Index != 2 || rc.Entry.KeyID == r.oldID {
		t.Errorf("receipt of entry %d by %s", rc.Index, rc.Entry.KeyID)
	}

	newOnly := r.clientOf(r.newKey)
	_, _, err = newOnly.Entry(ctx, 0)
	var untrusted *verify.UntrustedKeyError
	if !errors.Is(err, client.ErrUnverified) || !errors.As(err, &untrusted) || untrusted.KeyID != r.oldID ||
		!strings.Contains(err.Error(), r.oldID) {
		t.Errorf("entry 0 by the old key, trusting the new key alone: %v; want it refused naming %s", err, r.oldID)
	}
	if _, err := newOnly.Append(ctx, decision(request())); err != nil {
		t.Errorf("a receipt by the new key, trusting it alone: %v", err)
	}

	// New is NewWithKeys with one key: the old key alone refuses the new
	// entries.
	old, err := client.New(r.url, "token-of-mediator-1", r.oldKey)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := old.Entry(ctx, 1); !errors.As(err, &untrusted) {
		t.Errorf("entry 1 by the new key, trusting the old key alone: %v", err)
	}
	if _, err := client.NewWithKeys(r.url, "", nil); err == nil {
		t.Errorf("NewWithKeys without keys: no error")
	}
}

// Once a client has verified an entry by the new key after one by the
// old key, a receipt of a fresh append signed by the old key is refused:
// the old key must never sign again (verify.ErrRetiredKey).
func TestRetiredKeyReceipt(t *testing.T) {
	ctx := context.Background()
	r := newRotated(t)
	c := r.clientOf(r.oldKey, r.newKey)
	for i := range uint64(2) {
		if _, _, err := c.Entry(ctx, i); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
	}
	r.forge = true
	_, err := c.Append(ctx, decision(request()))
	if !errors.Is(err, client.ErrUnverified) || !errors.Is(err, verify.ErrRetiredKey) ||
		!strings.Contains(err.Error(), "entry 2 is signed by key "+r.oldID) {
		t.Errorf("a fresh receipt by the old key after the new key's entry: %v; want ErrRetiredKey", err)
	}
	// The refused receipt taught the client nothing: the new key's
	// receipts still verify.
	r.forge = false
	if _, err := c.Append(ctx, decision(request())); err != nil {
		t.Errorf("a receipt by the new key after a refused one: %v", err)
	}
}

// The rule holds whatever order the client sees the entries in: a client
// that saw the new key's entry 1 and then a receipt of entry 2 by the old
// key (it cannot yet tell which key is the newer) refuses the old key's
// entry 0 that shows the old key signing on both sides of the new one.
func TestRetiredKeyLearned(t *testing.T) {
	ctx := context.Background()
	r := newRotated(t)
	c := r.clientOf(r.oldKey, r.newKey)
	if _, _, err := c.Entry(ctx, 1); err != nil {
		t.Fatal(err)
	}
	r.forge = true
	if _, err := c.Append(ctx, decision(request())); err != nil {
		t.Fatalf("a receipt by a key seen after no other: %v", err)
	}
	_, _, err := c.Entry(ctx, 0)
	if !errors.Is(err, verify.ErrRetiredKey) || !strings.Contains(err.Error(), "between them") {
		t.Errorf("the old key on both sides of the new one: %v; want ErrRetiredKey", err)
	}
}
