package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

var (
	// ErrLeaseHeld: another acquisition's lease has not expired by the
	// database's clock.
	ErrLeaseHeld = errors.New("postgres: the sequencer lease is held")
	// ErrLeaseLost: the lease this store took was taken by another
	// acquisition (or released, or never taken by this store).
	ErrLeaseLost = errors.New("postgres: the sequencer lease was lost")
	// ErrFenced: the log's epoch moved past the one this store writes at
	// (another store took the lease), so Commit and AddCheckpoint are
	// refused, with nothing written. It does not wrap ledger.ErrConflict:
	// a fenced writer must stop, not reread and retry.
	ErrFenced = errors.New("postgres: fenced: another store took the sequencer lease")
)

// Lease is the sequencer lease as the database holds it.
type Lease struct {
	// Holder and Address name the holder and where it takes appends, as
	// given to AcquireLease. Empty when the lease was never taken.
	Holder, Address string
	// Epoch counts acquisitions: 0 when never taken, 1 after the first.
	Epoch uint64
	// Expires is the expiry by the database's clock; compare it with no
	// other clock (use Held).
	Expires time.Time
	// Held reports whether the lease was unexpired by the database's
	// clock when it was read. Always true in what AcquireLease and
	// RenewLease return.
	Held bool
}

// heldLease is the lease a Store took: its epoch (0: none) and holder.
type heldLease struct {
	epoch  uint64
	holder string
}

// leaseColumns reads a lease row, with Held judged by the database clock.
const leaseColumns = "holder, address, epoch, expires_at, expires_at > now()"

func scanLease(row pgx.Row) (Lease, error) {
	var l Lease
	var epoch int64
	if err := row.Scan(&l.Holder, &l.Address, &epoch, &l.Expires, &l.Held); err != nil {
		return Lease{}, err
	}
	if epoch == 0 {
		return Lease{}, nil
	}
	l.Epoch = uint64(epoch)
	return l, nil
}

func (l Lease) String() string {
	if l.Epoch == 0 {
		return "never taken"
	}
	state := "expired"
	if l.Held {
		state = "expires"
	}
	return fmt.Sprintf("held by %q (%s) at epoch %d, %s %s by the database clock",
		l.Holder, l.Address, l.Epoch, state, l.Expires.UTC().Format(time.RFC3339Nano))
}

// ttlMicros checks a TTL and returns it in microseconds, the database's
// resolution.
func ttlMicros(ttl time.Duration) (int64, error) {
	if ttl.Microseconds() <= 0 {
		return 0, fmt.Errorf("postgres: lease TTL %v: must be at least 1µs", ttl)
	}
	return ttl.Microseconds(), nil
}

// AcquireLease takes the sequencer lease for holder (a name unique to the
// instance) and address (where it takes appends, for others to forward
// to), for ttl by the database's clock, when it was never taken, has
// expired, or is this store's own. In one transaction it bumps the lease
// epoch and tree_head's epoch to the same new value, so that from then
// on the log grows only through this store: every other store's Commit
// and AddCheckpoint are refused with ErrFenced. Taking tree_head's row
// lock orders the takeover after any commit or checkpoint in flight.
//
// A lease another acquisition holds is refused with an error wrapping
// ErrLeaseHeld, returned with that lease.
//
// Take the lease before reading the state to sequence from (ledger.Open):
// the state read after it is final until the lease is lost.
func (s *Store) AcquireLease(ctx context.Context, holder, address string, ttl time.Duration) (Lease, error) {
	if err := s.check(); err != nil {
		return Lease{}, err
	}
	if holder == "" {
		return Lease{}, errors.New("postgres: acquiring the lease: empty holder name")
	}
	us, err := ttlMicros(ttl)
	if err != nil {
		return Lease{}, err
	}
	s.mu.Lock()
	mine := s.held
	s.mu.Unlock()
	var l Lease
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// The lease row's lock makes acquisitions take turns; a waiting
		// one then reads the winner's lease, held.
		cur, err := scanLease(tx.QueryRow(ctx, "SELECT "+leaseColumns+" FROM lease FOR UPDATE", simple))
		if err != nil {
			return fmt.Errorf("reading the lease: %w", err)
		}
		if cur.Held && (mine.epoch == 0 || cur.Epoch != mine.epoch || cur.Holder != mine.holder) {
			l = cur
			return fmt.Errorf("%w: %s", ErrLeaseHeld, cur)
		}
		// FOR UPDATE, not the UPDATE's weaker lock: it also waits for
		// AddCheckpoint's FOR KEY SHARE, which Commit's UPDATE does not.
		if _, err := tx.Exec(ctx, "SELECT 1 FROM tree_head FOR UPDATE"); err != nil {
			return fmt.Errorf("locking tree_head: %w", err)
		}
		l, err = scanLease(tx.QueryRow(ctx, `UPDATE lease SET holder = $1, address = $2, epoch = epoch + 1,
			expires_at = now() + $3 * interval '1 microsecond' RETURNING `+leaseColumns, simple, holder, address, us))
		if err != nil {
			return fmt.Errorf("updating the lease: %w", err)
		}
		if _, err := tx.Exec(ctx, "UPDATE tree_head SET epoch = $1", simple, int64(l.Epoch)); err != nil {
			return fmt.Errorf("moving tree_head to epoch %d: %w", l.Epoch, err)
		}
		s.at("acquire")
		return nil
	})
	if err != nil {
		if errors.Is(err, ErrLeaseHeld) {
			return l, fmt.Errorf("postgres: acquiring the lease for %q: %w", holder, err)
		}
		// If a failed COMMIT did commit, the log is at an epoch no store
		// writes at until the lease expires and is taken again: safe.
		return Lease{}, fmt.Errorf("postgres: acquiring the lease for %q: %w", holder, err)
	}
	s.mu.Lock()
	s.held = heldLease{epoch: l.Epoch, holder: l.Holder}
	s.epoch.Store(int64(l.Epoch))
	s.mu.Unlock()
	return l, nil
}

// RenewLease extends this store's lease to ttl from now by the database's
// clock. It is refused with an error wrapping ErrLeaseLost once another
// acquisition took the lease (returned with that lease), after
// ReleaseLease, or if this store never took it. A lease that expired but
// that nobody took is still this store's (its epoch did not move), and
// renewing it is fine.
func (s *Store) RenewLease(ctx context.Context, ttl time.Duration) (Lease, error) {
	if err := s.check(); err != nil {
		return Lease{}, err
	}
	us, err := ttlMicros(ttl)
	if err != nil {
		return Lease{}, err
	}
	s.mu.Lock()
	mine := s.held
	s.mu.Unlock()
	if mine.epoch == 0 {
		return Lease{}, fmt.Errorf("postgres: renewing the lease: %w (this store holds none)", ErrLeaseLost)
	}
	l, err := scanLease(s.pool.QueryRow(ctx, `UPDATE lease SET expires_at = now() + $1 * interval '1 microsecond'
		WHERE epoch = $2 AND holder = $3 RETURNING `+leaseColumns, simple, us, int64(mine.epoch), mine.holder))
	if errors.Is(err, pgx.ErrNoRows) {
		cur, err := s.CurrentLease(ctx)
		if err != nil {
			return Lease{}, fmt.Errorf("postgres: renewing the lease of epoch %d: %w (%w)", mine.epoch, ErrLeaseLost, err)
		}
		return cur, fmt.Errorf("postgres: renewing the lease of epoch %d: %w: now %s", mine.epoch, ErrLeaseLost, cur)
	}
	if err != nil {
		return Lease{}, fmt.Errorf("postgres: renewing the lease of epoch %d: %w", mine.epoch, err)
	}
	return l, nil
}

// ReleaseLease expires this store's lease now, if it is still this
// store's, so that another can take it at once (a clean shutdown). It does
// not move the epoch: until another store takes the lease, this one's
// writes still succeed, so stop sequencing before releasing. Releasing
// when this store never took the lease does nothing; once another
// acquisition took it, the error wraps ErrLeaseLost.
func (s *Store) ReleaseLease(ctx context.Context) error {
	if err := s.check(); err != nil {
		return err
	}
	s.mu.Lock()
	mine := s.held
	s.mu.Unlock()
	if mine.epoch == 0 {
		return nil
	}
	tag, err := s.pool.Exec(ctx, "UPDATE lease SET expires_at = least(expires_at, now()) WHERE epoch = $1 AND holder = $2",
		simple, int64(mine.epoch), mine.holder)
	if err != nil {
		return fmt.Errorf("postgres: releasing the lease of epoch %d: %w", mine.epoch, err)
	}
	s.mu.Lock()
	if s.held == mine {
		s.held = heldLease{}
	}
	s.mu.Unlock()
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("postgres: releasing the lease of epoch %d: %w", mine.epoch, ErrLeaseLost)
	}
	return nil
}

// CurrentLease returns the lease as the database holds it (Held judged by
// its clock), or the zero Lease if it was never taken: followers forward
// appends to its Address while it is Held.
func (s *Store) CurrentLease(ctx context.Context) (Lease, error) {
	if err := s.check(); err != nil {
		return Lease{}, err
	}
	l, err := scanLease(s.pool.QueryRow(ctx, "SELECT "+leaseColumns+" FROM lease"))
	if err != nil {
		return Lease{}, fmt.Errorf("postgres: reading the lease: %w", err)
	}
	return l, nil
}

// at calls the test hook, if any, at a named point.
func (s *Store) at(point string) {
	if s.hook != nil {
		s.hook(point)
	}
}
