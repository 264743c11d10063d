// Package postgres is a ledger.Store on PostgreSQL, through
// github.com/jackc/pgx/v5. It keeps one log per database (or per schema,
// chosen with the URL's search_path parameter).
//
// # Schema
//
// The tables are created and changed only by the versioned migrations in
// migrations/NNNN_name.sql, embedded in the binary. Open applies, in
// order, each one the database lacks, each in its own transaction that
// also records it in schema_migrations (version, name, applied_at); opens
// running at once take turns on an advisory lock, so a migration is
// applied once. A database whose schema_migrations names a version this
// build does not know was migrated by a newer build, and Open refuses it
// (SchemaVersionError) without changing anything.
//
// Version 1 (migrations/0001_initial.sql):
//
//	tree_head   (singleton, size)                  the tree size, one row
//	entries     (idx, leaf_hash, idem_key, data)   idx the primary key;
//	            leaf-hash index on (leaf_hash, idx);
//	            idem_key UNIQUE, NULL when the entry has none
//	tiles       (level, idx, hashes)               the latest version of each tile
//	checkpoints (size, signed)                     every signed checkpoint; the latest is the largest size
//
// Version 2 (migrations/0002_lease.sql) adds the lease: see "Several
// writers" below.
//
// Version 3 (migrations/0003_approval_snapshot.sql) adds the ledger's
// approval snapshot (ledger.SnapshotStore, snapshot.go):
//
//	approval_snapshot (singleton, size, data)      one row, once written
//
// PutSnapshot writes it only while tree_head is at the store's epoch and
// holds at least size entries, reading tree_head FOR KEY SHARE as
// AddCheckpoint does, so a fenced store writes none, and a write in flight
// during a takeover is ordered before it or refused.
//
// Version 4 (migrations/0004_approval_previews_sessions.sql) adds what
// ledgerd keeps for approvals beside the log (approvals.go):
//
//	approval_previews (approval_id, doc, stored_at)    one row per open approval's preview
//	approver_sessions (token_sha256, approver, csrf,   one row per approver session,
//	                   credential, sign_in, used_at)   keyed by its token's SHA-256
//
// Preview writes and deletions are fenced as AddCheckpoint is; session
// writes are not.
//
// Version 5 (migrations/0005_cosignatures.sql) adds the witnesses'
// cosignatures of the checkpoints (cosignatures.go), which ledgerd's
// sequencer keeps and every instance serves:
//
//	cosignatures (size, witness, line)             primary key (size, witness);
//	            index on (witness, size)
//
// PutCosignature writes a row only while tree_head is at the store's
// epoch (read FOR KEY SHARE, as AddCheckpoint does) and a checkpoint of
// that size is stored, and in the same transaction drops the rows of
// sizes older than the CosignatureSizesKept latest, but each witness's
// latest. The lines are stored as the witnesses returned them; readers
// verify them before serving them.
//
// # Writes
//
// Commit is one transaction: it first moves tree_head from the batch's
// Start to its end ("UPDATE tree_head SET size = end WHERE size = start
// AND epoch = <the store's epoch>"; no row updated means the batch does
// not continue the log, ErrConflict, or that the store is fenced,
// ErrFenced: see "Several writers"),
// which also locks the row, so commits through any number of connections
// or processes take turns; then it inserts the entries with their leaf
// hashes and keys in one multi-row INSERT (from arrays, unnest), and
// upserts the batch's tiles in another, INSERT ... ON CONFLICT DO UPDATE.
// BEGIN and these statements go to the server as one simple-protocol
// Query message, one round trip (the statements prepared on the
// connection with SQL PREPARE by its first Commit, in that message, and
// named with EXECUTE; their arguments literals: see "Stalls" for why),
// and COMMIT follows once every result was read: two round trips a
// batch, whatever it holds. A batch that does not continue the log is
// rolled back whatever its later statements did. An idempotency key
// already stored breaks the UNIQUE constraint, and the transaction, so the
// batch is refused (ErrConflict) with nothing written. Readers see a batch
// whole or not at all: they read committed rows only.
//
// AddCheckpoint is another transaction, writing checkpoints alone (it
// reads tree_head FOR KEY SHARE, which a Commit's UPDATE does not wait
// for, and the tree only grows), so that a Commit and an AddCheckpoint
// run at once without waiting for each other.
// It locks checkpoints against other writers (SHARE ROW EXCLUSIVE, which
// readers do not wait for) to check the latest and add the new one as one
// step.
//
// # Durability
//
// Every connection of the store's pool is opened with synchronous_commit
// set to on (a startup parameter, so the URL cannot turn it off), and
// Open refuses a server whose fsync is off. The server's own default may
// be off or local (postgresql.conf, ALTER DATABASE or ALTER ROLE can set
// it): with off, COMMIT returns before the commit record reaches the disk,
// and a crash loses acknowledged batches; with local, it does not wait for
// a synchronous standby, and a failover to that standby loses them. With
// on, COMMIT returns only once the commit is flushed to disk here and, when
// synchronous_standby_names is set, on the synchronous standbys too.
//
// A COMMIT that fails (the connection breaks in flight) leaves the batch's
// fate unknown; the store then refuses every later Commit (ErrBroken)
// until it is reopened, as the Store contract allows, and the reopened
// store reads whichever it was. A COMMIT does not see the caller's
// cancellation, which would make its outcome unknown for no reason;
// before it, a cancelled Commit rolls back and writes nothing.
//
// # Several writers: the sequencer lease and fencing
//
// Any number of stores (in as many processes) may open one database, and
// exactly one at a time may grow the log: the holder of the sequencer
// lease. Version 2 (migrations/0002_lease.sql) adds:
//
//	lease       (singleton, holder, address, epoch, expires_at)   one row;
//	            epoch 0 with an empty holder: never taken
//	tree_head   gains epoch, the epoch under which the log may grow
//
// A version-1 database migrates with its data, at epoch 0, the lease never
// taken.
//
// AcquireLease is one transaction: it locks the lease row (FOR UPDATE, so
// acquisitions take turns and a waiting one then sees the winner's lease),
// refuses a lease that has not expired and is not this store's own
// (ErrLeaseHeld), locks tree_head's row FOR UPDATE, and sets the lease to
// (holder, address, epoch + 1, now() + TTL) and tree_head's epoch to the
// same new epoch. From then on the store writes at that epoch.
//
// Every store writes at the epoch it last saw: the one it read at Open, or
// the one its AcquireLease set. Commit's first statement is
//
//	UPDATE tree_head SET size = end WHERE size = start AND epoch = <the store's epoch>
//
// When it updates no row, the store reads tree_head: another epoch means
// another store took the lease since, and the batch is refused with
// ErrFenced, nothing written; the same epoch and another size is
// ErrConflict, as before. ErrFenced does not wrap ErrConflict: a fenced
// writer must stop, not reread and retry. AddCheckpoint reads tree_head's
// epoch FOR KEY SHARE, a lock Commit's UPDATE does not wait for but
// AcquireLease's FOR UPDATE does, and is refused with ErrFenced the same
// way. A store's epoch changes only through its own AcquireLease, so once
// fenced it stays fenced (a store opened before a takeover too).
//
// Why this is safe whatever the clocks and delays: a takeover and a write
// both take tree_head's row lock, so each write is ordered wholly before
// or wholly after each takeover. One before is in the log the new
// holder reads after its takeover, and continues. One after sees the
// bumped epoch (PostgreSQL re-evaluates the UPDATE's condition on the
// row version the takeover committed) and is refused. A deposed holder
// paused for any length of time, or cut off from the database and
// reconnected, can therefore never write after a takeover; the lease's
// expiry plays no part in this. It gives liveness only: a holder that
// dies stops renewing, its lease expires, and another store takes it.
//
// A holder stopped in the middle of a write (its process frozen or gone,
// its network cut, a proxy hung) may hold tree_head's row lock (or the
// lease row's), which a takeover waits for. What bounds that wait is
// "Stalls", below; with Options.StallTimeout, about that long.
//
// Expiry is set (now() + TTL) and judged (expires_at > now()) by the
// database's clock alone, never an instance's; CurrentLease reports it as
// Lease.Held. RenewLease moves expires_at of this store's lease (matched
// by epoch and holder), an expired one too if nobody took it, and
// otherwise fails with ErrLeaseLost. ReleaseLease sets it to now(), so
// that another store takes the lease at once; it does not move the epoch,
// so the releasing store stops sequencing first.
//
// A sequencer therefore acquires the lease, then reads the state
// (ledger.Open), then sequences, renewing well within the TTL; on
// ErrLeaseLost or ErrFenced it stops sequencing, and should it take the
// lease again, reopens the ledger (what it cached may be stale).
//
// # Stalls
//
// A writer may stop anywhere in a write and never resume: its process
// frozen or killed, its host gone, its network cut, a proxy between it
// and the server hung (still holding its sockets open). Whatever the
// writer's transaction holds (tree_head's row lock, the lease row's, rows
// it inserted, which block the next writer's inserts at the same
// indices and keys) stays held as long as its server session lives. This
// is what ends such a session, and so bounds how long a takeover, and the
// new holder's first commit, can be held off:
//
//   - How writes are sent. Every statement of a write transaction, and
//     every write outside one, goes as one simple-protocol Query message
//     (pgx's QueryExecModeSimpleProtocol, or Commit's own message), never
//     as the extended protocol's Parse, Bind, Execute and Sync, which pgx
//     pipelines. The server reads a Query message whole before it
//     executes any of it, and answers it with ReadyForQuery. With the
//     extended protocol, a statement runs at its Execute and the server
//     then waits for the next message (up to the Sync) in the state
//     "active, ClientRead", where neither idle_in_transaction_session_
//     timeout nor statement_timeout applies: before this, a Commit cut
//     off after its UPDATE's Execute had arrived held tree_head's lock
//     until the TCP connection died (hours, by the server's keepalive
//     defaults, or never behind a hung proxy). Now the server waits for a
//     writer's bytes only between statements (after ReadyForQuery), or
//     inside a message whose statements have not started.
//   - idle_in_transaction_session_timeout (StallTimeout): covers every
//     such wait inside a transaction, including a message that stopped
//     half-way: after StallTimeout the server aborts the transaction,
//     closes the session and releases what it held. Between transactions
//     a session holds nothing; a write outside a transaction is one
//     message, done once it has arrived.
//   - lock_timeout (StallTimeout): a statement of this store that waits
//     for a lock that long fails (the migrations excepted, which wait for
//     each other). A waiting statement whose caller gave up (its context
//     ended, pgx closed the connection) would otherwise keep waiting in
//     the server, holding what its transaction took: an AcquireLease
//     waiting for tree_head holds the lease row, so every later
//     acquisition would queue behind it.
//   - TCP keepalives and TCP_USER_TIMEOUT, on both ends of a TCP
//     connection (tcp_keepalives_idle StallTimeout, _interval a third of
//     it, _count 3, in whole seconds, at least 1; tcp_user_timeout twice
//     StallTimeout; the same on this side's socket, TCP_USER_TIMEOUT on
//     Linux only): a peer that stops answering at the TCP level (its host
//     down, the network cut) ends the connection within about twice
//     StallTimeout (3 s at least), whatever the session is doing, idle,
//     or blocked writing its answer. They do not help while the peer's
//     TCP stack still answers (a frozen process, a hung proxy): the two
//     points above cover those. Over a Unix socket they do not apply.
//   - Commit's deadline: each of its two round trips (taking a connection
//     and the message; COMMIT) gives up after twice StallTimeout, so a
//     Commit returns within about four times StallTimeout even when the
//     server or the network no longer answers, and the ledger above it
//     reports the storage failure (ledgerd then steps down, releasing the
//     lease). A first round trip given up writes nothing (pgx closes the
//     connection; the server aborts the transaction); a COMMIT given up
//     leaves the batch's fate unknown (ErrBroken). Other calls are
//     bounded by their callers' contexts.
//
// So with StallTimeout a stopped writer holds a lock for at most about
// StallTimeout after its last byte reached the server, and a takeover
// waits at most that long for it (a takeover that waits for a lock longer
// than its own lock_timeout fails, and its caller tries again). Nothing
// here bounds the server's own work: a COMMIT waiting for a synchronous
// standby that is gone (synchronous_standby_names) holds its locks until
// the standby returns, and the writer gives up on it after its deadline
// (ErrBroken). Without StallTimeout, only the operating system's TCP
// keepalives end a session whose writer stopped (by Linux's defaults,
// after about two hours and eleven minutes), and never one whose peer's
// TCP stack still answers.
package postgres

import (
	"bytes"
	"context"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/decisionledger/ledger/internal/pgurl"
	"github.com/decisionledger/ledger/ledger"
)

var (
	// ErrClosed: the store was used after Close.
	ErrClosed = errors.New("postgres: store is closed")
	// ErrBroken: a COMMIT failed with its outcome unknown; the store
	// refuses writes until it is reopened.
	ErrBroken = errors.New("postgres: a commit's outcome is unknown; reopen the store")
	// ErrNotDurable: the server or the connection would acknowledge
	// commits before they are durable.
	ErrNotDurable = errors.New("postgres: commits would not be durable")

	errEmptyCheckpoint = errors.New("postgres: empty signed checkpoint")
)

// SchemaVersionError refuses a database migrated by a newer build: its
// schema_migrations holds versions up to Found, this build knows up to
// Known.
type SchemaVersionError struct {
	Found, Known int
}

func (e *SchemaVersionError) Error() string {
	return fmt.Sprintf("postgres: the database schema is at version %d, and this build knows versions up to %d: "+
		"a newer build migrated it; run that build (or a later one), never an older one", e.Found, e.Known)
}

// Options configures Open. The zero value means the defaults.
type Options struct {
	// MaxConns bounds the store's connections. Optional; 0 means pgxpool's
	// default (4, or the number of CPUs if more).
	MaxConns int32
	// StallTimeout, if positive, bounds how long a write of this store
	// that stops half-way (its process frozen or gone, its network cut,
	// a proxy hung) can hold off another store's takeover, and how long
	// a Commit waits for the database. On every connection it sets
	// idle_in_transaction_session_timeout and lock_timeout to it (whole
	// milliseconds), the server's TCP keepalives and tcp_user_timeout,
	// and the same on this side of the connection; and it bounds each
	// of Commit's two round trips to twice its value. See the package
	// doc, "Stalls", for what each covers. Optional; 0 leaves the
	// server's settings (by default, no limits) and the operating
	// system's keepalives, and a Commit waits as long as its context
	// lets it (and its COMMIT up to a minute).
	StallTimeout time.Duration
}

// Store is a ledger.Store on PostgreSQL. It is safe for concurrent use.
type Store struct {
	pool   *pgxpool.Pool
	closed atomic.Bool

	// epoch is the lease epoch this store writes at: read at Open, set
	// by AcquireLease. Commit and AddCheckpoint are conditional on it.
	epoch atomic.Int64

	// roundTrip bounds each of Commit's round trips (0: no bound but the
	// caller's context, and a minute for COMMIT).
	roundTrip time.Duration

	// cosignaturesKept is PutCosignature's bound, CosignatureSizesKept
	// (a test may lower it: export_test.go).
	cosignaturesKept int

	mu     sync.Mutex
	broken error     // set when a COMMIT's outcome is unknown
	held   heldLease // the lease this store took, if any
	// prepared holds the connections on which Commit's statements are
	// prepared (commitSQL); a connection leaves it when the pool closes it.
	prepared map[*pgconn.PgConn]struct{}

	// hook, set by tests only, is called at named points where a
	// transaction holds tree_head's row lock, so that a test can hold it
	// there while another store acts.
	hook func(point string)
}

var _ ledger.Store = (*Store)(nil)

// Open connects to the database at connURL (a postgres:// URL or a
// key=value connection string, as libpq takes), applies the migrations it
// lacks, checks that commits will be durable, and returns the store.
func Open(ctx context.Context, connURL string, opts Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(connURL)
	if err != nil {
		// pgx's message repeats the connection string (redacted); give
		// ours alone, with what was wrong.
		why := errors.Unwrap(err)
		if why == nil {
			why = errors.New("malformed")
		}
		return nil, fmt.Errorf("postgres: parsing the connection URL %s: %w", RedactURL(connURL), why)
	}
	if cfg.ConnConfig.RuntimeParams == nil {
		cfg.ConnConfig.RuntimeParams = map[string]string{}
	}
	// Set at connection startup, before any statement: see the package doc.
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "on"
	// What pgx's simple protocol (writes, see simple) requires.
	cfg.ConnConfig.RuntimeParams["standard_conforming_strings"] = "on"
	cfg.ConnConfig.RuntimeParams["client_encoding"] = "UTF8"
	if opts.StallTimeout > 0 {
		for k, v := range stallParams(opts.StallTimeout) {
			cfg.ConnConfig.RuntimeParams[k] = v
		}
		cfg.ConnConfig.DialFunc = stallDialer(opts.StallTimeout).DialContext
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	s := &Store{roundTrip: 2 * opts.StallTimeout, cosignaturesKept: CosignatureSizesKept, prepared: map[*pgconn.PgConn]struct{}{}}
	cfg.BeforeClose = func(c *pgx.Conn) {
		s.mu.Lock()
		delete(s.prepared, c.PgConn())
		s.mu.Unlock()
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %s: %w", RedactURL(connURL), err)
	}
	s.pool = pool
	if err := s.checkDurable(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: %s: %w", RedactURL(connURL), err)
	}
	if err := migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: %s: %w", RedactURL(connURL), err)
	}
	var epoch int64
	if err := pool.QueryRow(ctx, "SELECT epoch FROM tree_head").Scan(&epoch); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: %s: reading the lease epoch: %w", RedactURL(connURL), err)
	}
	s.epoch.Store(epoch)
	return s, nil
}

// checkDurable refuses a server with fsync off, or a connection without
// synchronous_commit on.
func (s *Store) checkDurable(ctx context.Context) error {
	var fsync, syncCommit string
	err := s.pool.QueryRow(ctx, "SELECT current_setting('fsync'), current_setting('synchronous_commit')").Scan(&fsync, &syncCommit)
	if err != nil {
		return fmt.Errorf("postgres: reading the durability settings: %w", err)
	}
	if fsync != "on" {
		return fmt.Errorf("%w: the server runs with fsync=%s", ErrNotDurable, fsync)
	}
	if syncCommit != "on" {
		return fmt.Errorf("%w: synchronous_commit is %s on the connection, not on", ErrNotDurable, syncCommit)
	}
	return nil
}

// simple makes pgx send a statement as one simple-protocol Query message,
// its arguments written into the text, instead of the extended
// protocol's Parse, Bind, Execute and Sync. Every statement of a write
// transaction, and every write outside one, goes this way: the server
// reads the whole message before it executes any of it, and answers
// with ReadyForQuery, so that it never waits for the rest of the
// client's bytes while the statement holds a lock or a row, where no
// timeout applies (the package doc, "Stalls"). Reads keep the extended
// protocol, with binary results.
const simple = pgx.QueryExecModeSimpleProtocol

// migrationsFS holds the schema migrations, NNNN_name.sql.
//
//go:embed migrations/*.sql
var migrationsFS embed.FS

type migration struct {
	version int
	name    string
	sql     string
}

var migrationName = regexp.MustCompile(`^([0-9]{4})_([a-z0-9_]+)\.sql$`)

// migrations returns the embedded migrations, which must be numbered 1,
// 2, ... without gaps.
func migrations() ([]migration, error) {
	files, err := fs.Glob(migrationsFS, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	slices.Sort(files)
	var ms []migration
	for i, f := range files {
		base := strings.TrimPrefix(f, "migrations/")
		m := migrationName.FindStringSubmatch(base)
		if m == nil {
			return nil, fmt.Errorf("postgres: migration file %s is not named NNNN_name.sql", base)
		}
		v, _ := strconv.Atoi(m[1])
		if v != i+1 {
			return nil, fmt.Errorf("postgres: migration file %s: want version %d", base, i+1)
		}
		b, err := migrationsFS.ReadFile(f)
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: m[2], sql: string(b)})
	}
	return ms, nil
}

// migrationLock is the advisory lock (the two-int form, with the schema's
// name hashed as the second) that opens hold while they migrate.
const migrationLock = 0x6c656467 // "ledg"

// migrate applies the migrations the database lacks, each in its own
// transaction, and refuses a schema newer than this build's.
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	for _, m := range ms {
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			// Opens wait for each other's migrations however long they
			// take, whatever lock_timeout Options.StallTimeout set.
			if _, err := tx.Exec(ctx, "SET LOCAL lock_timeout = 0"); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1, hashtext(current_schema()))", simple, migrationLock); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
				version    integer     PRIMARY KEY,
				name       text        NOT NULL,
				applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
				return err
			}
			var latest int
			if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM schema_migrations", simple).Scan(&latest); err != nil {
				return err
			}
			if latest > len(ms) {
				return &SchemaVersionError{Found: latest, Known: len(ms)}
			}
			if latest >= m.version {
				return nil
			}
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return fmt.Errorf("migration %d (%s): %w", m.version, m.name, err)
			}
			_, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", simple, m.version, m.name)
			return err
		})
		if err != nil {
			var sv *SchemaVersionError
			if errors.As(err, &sv) {
				return err
			}
			return fmt.Errorf("postgres: migrating the schema to version %d: %w", m.version, err)
		}
	}
	return nil
}

// RedactURL returns connURL with any password replaced by xxxxx, for
// messages and logs (pgurl.Redact).
func RedactURL(connURL string) string { return pgurl.Redact(connURL) }

func (s *Store) check() error {
	if s.closed.Load() {
		return ErrClosed
	}
	return nil
}

// Close closes the store's connections. Closing twice is safe.
func (s *Store) Close() error {
	if s.closed.CompareAndSwap(false, true) {
		s.pool.Close()
	}
	return nil
}

// State implements ledger.Store, reading the size and the latest
// checkpoint in one statement (one snapshot).
func (s *Store) State(ctx context.Context) (ledger.State, error) {
	if err := s.check(); err != nil {
		return ledger.State{}, err
	}
	var size int64
	var cpSize *int64
	var cp []byte
	err := s.pool.QueryRow(ctx, `SELECT t.size, c.size, c.signed FROM tree_head t
		LEFT JOIN LATERAL (SELECT size, signed FROM checkpoints ORDER BY size DESC LIMIT 1) c ON true`).Scan(&size, &cpSize, &cp)
	if err != nil {
		return ledger.State{}, fmt.Errorf("postgres: reading the state: %w", err)
	}
	st := ledger.State{Size: uint64(size)}
	if cpSize != nil {
		st.Checkpoint, st.CheckpointSize = cp, uint64(*cpSize)
	}
	return st, nil
}

// Commit implements ledger.Store: one transaction, see the package doc.
func (s *Store) Commit(ctx context.Context, b ledger.Batch) error {
	if err := s.check(); err != nil {
		return err
	}
	if err := b.Check(); err != nil {
		return err
	}
	s.mu.Lock()
	broken := s.broken
	s.mu.Unlock()
	if broken != nil {
		return fmt.Errorf("postgres: batch at %d: %w (%w)", b.Start, ErrBroken, broken)
	}
	end := b.Start + uint64(len(b.Entries))
	if end > math.MaxInt64 || end < b.Start {
		return fmt.Errorf("postgres: batch at %d of %d entries: beyond the largest index: %w", b.Start, len(b.Entries), ledger.ErrConflict)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("postgres: batch at %d: %w", b.Start, err)
	}

	// Checked before anything is sent: a tile index beyond the largest.
	levels, tileIdxs, hashes, err := latestTiles(b)
	if err != nil {
		return err
	}
	// Each round trip is bounded (see the package doc, "Stalls").
	pctx := ctx
	if s.roundTrip > 0 {
		var cancel context.CancelFunc
		pctx, cancel = context.WithTimeout(ctx, s.roundTrip)
		defer cancel()
	}
	conn, err := s.pool.Acquire(pctx)
	if err != nil {
		return fmt.Errorf("postgres: batch at %d: acquiring a connection: %w", b.Start, err)
	}
	// Release closes a connection left broken or inside a transaction.
	defer conn.Release()
	committed := false
	defer func() {
		if !committed {
			// Rollback even if ctx is done; a broken connection is closed
			// by pgx, and the server then aborts the transaction.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.rollbackTimeout())
			conn.Exec(rctx, "ROLLBACK")
			cancel()
		}
	}()

	// Everything before COMMIT is one round trip, and one message: BEGIN,
	// the tree size's move, the entries, the tiles, as one simple query
	// (see the package doc, "Stalls"). A round trip costs a wake-up of the
	// server and of this goroutine, which on a busy machine is more than
	// the statement; COMMIT stays separate, so that no batch is committed
	// before all its results were read.
	pg := conn.Conn().PgConn()
	if pg.ParameterStatus("standard_conforming_strings") != "on" || pg.ParameterStatus("client_encoding") != "UTF8" {
		// Set at startup (Open), and this store's statements never change them.
		return fmt.Errorf("postgres: batch at %d: the connection has standard_conforming_strings %q and client_encoding %q, not on and UTF8",
			b.Start, pg.ParameterStatus("standard_conforming_strings"), pg.ParameterStatus("client_encoding"))
	}
	s.mu.Lock()
	_, ready := s.prepared[pg]
	s.mu.Unlock()
	epoch := s.epoch.Load()
	sql := commitSQL(b, end, epoch, levels, tileIdxs, hashes, !ready, pg.ParameterStatus("server_encoding") == "UTF8")
	moved, prepared, err := sendCommit(pctx, conn.Conn(), sql, b, !ready, len(levels) > 0)
	if prepared {
		s.mu.Lock()
		s.prepared[pg] = struct{}{}
		s.mu.Unlock()
	}
	if err != nil {
		return err
	}
	if !moved {
		// Rolled back first: the later statements may have failed and
		// aborted the transaction. The size and epoch read afterwards
		// explain the refusal; the epoch only grows, so one still ours
		// now was ours at the UPDATE.
		// Through the pool: a ROLLBACK that fails closes conn, and the
		// server aborts the transaction all the same.
		committed = true // no ROLLBACK twice
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.rollbackTimeout())
		conn.Exec(rctx, "ROLLBACK")
		cancel()
		var size, current int64
		if err := s.pool.QueryRow(pctx, "SELECT size, epoch FROM tree_head").Scan(&size, &current); err != nil {
			return fmt.Errorf("postgres: batch at %d: reading the tree size: %w", b.Start, err)
		}
		if current != epoch {
			// Not ErrConflict: a fenced store must stop, not retry.
			return fmt.Errorf("postgres: batch at %d: %w (the log is at epoch %d, this store writes at %d)", b.Start, ErrFenced, current, epoch)
		}
		return fmt.Errorf("postgres: batch at %d: stored size is %d: %w", b.Start, size, ledger.ErrConflict)
	}
	s.at("commit")

	// Everything is written; a cancellation now would only make the
	// outcome unknown.
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("postgres: batch at %d: %w", b.Start, err)
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.commitTimeout())
	defer cancel()
	committed = true
	tag, err := conn.Exec(cctx, "COMMIT")
	if err == nil && tag.String() != "COMMIT" {
		// The server ended the transaction without committing it (it
		// answers ROLLBACK to the COMMIT of an aborted transaction).
		return fmt.Errorf("postgres: batch at %d: the server rolled back its transaction (%s)", b.Start, tag)
	}
	if err != nil {
		// The server may or may not have committed.
		err = fmt.Errorf("postgres: batch at %d: COMMIT failed, the batch may or may not be stored: %w", b.Start, err)
		s.mu.Lock()
		s.broken = err
		s.mu.Unlock()
		return err
	}
	return nil
}

// commitTimeout bounds COMMIT, which does not see the caller's
// cancellation: the store's round-trip bound, or a minute.
func (s *Store) commitTimeout() time.Duration {
	if s.roundTrip > 0 {
		return s.roundTrip
	}
	return time.Minute
}

// rollbackTimeout bounds the ROLLBACK of a Commit that wrote nothing:
// 10 s, or the store's round-trip bound if shorter (a ROLLBACK that
// fails closes the connection, and the server aborts the transaction).
func (s *Store) rollbackTimeout() time.Duration {
	if s.roundTrip > 0 {
		return min(s.roundTrip, 10*time.Second)
	}
	return 10 * time.Second
}

// The statements of a Commit, prepared (SQL PREPARE) on each connection
// by its first Commit, in the same message: the commit's message then
// names them with EXECUTE, and the server neither parses nor plans them
// again. Their arguments are literals (see commitSQL).
const (
	prepareMove = `PREPARE ledger_move(bigint, bigint, bigint) AS
	UPDATE tree_head SET size = $1 WHERE size = $2 AND epoch = $3`
	// ledger_entries(start, n, leaf hashes concatenated, keys, entries,
	// hex): keys and entries each end with the terminator (',' and
	// U+001F), so that n empty ones are n+1 elements; a key in hex,
	// empty for none; an entry as its UTF-8 text, or in hex when hex.
	prepareEntries = `PREPARE ledger_entries(bigint, bigint, bytea, text, text, boolean) AS
	INSERT INTO entries (idx, leaf_hash, idem_key, data)
	SELECT $1 + u.n - 1, substring($3 from u.n::integer * 32 - 31 for 32), decode(nullif(u.k, ''), 'hex'),
		CASE WHEN $6 THEN decode(u.e, 'hex') ELSE convert_to(u.e, 'UTF8') END
	FROM unnest(string_to_array($5, E'\x1f'), string_to_array($4, ',')) WITH ORDINALITY AS u(e, k, n)
	WHERE u.n <= $2`
	// ledger_tiles(levels, indices, hashes in hex, each ending with ',').
	prepareTiles = `PREPARE ledger_tiles(smallint[], bigint[], text) AS
	INSERT INTO tiles (level, idx, hashes)
	SELECT l, i, decode(h, 'hex') FROM unnest($1, $2, string_to_array($3, ',')) AS t(l, i, h) WHERE l IS NOT NULL
	ON CONFLICT (level, idx) DO UPDATE SET hashes = EXCLUDED.hashes`
)

// commitSQL is the text of a Commit's one message: the statements'
// PREPAREs if prepare, then BEGIN, the tree_head update, the entries, the
// tiles if any. Only the entries go as text (a quote doubled), when they
// are all valid UTF-8 without U+0000 or U+001F (a ledger's entries are
// JSON) and the database's encoding is UTF-8 (utf8DB); everything else is
// digits, hex digits, braces and commas. The connection must have
// standard_conforming_strings on and client_encoding UTF8 (checked
// before).
func commitSQL(b ledger.Batch, end uint64, epoch int64, levels []int16, tileIdxs []int64, hashes [][]byte, prepare, utf8DB bool) string {
	text := utf8DB
	n := 0
	for i, e := range b.Entries {
		n += len(e) + 2*ledger.HashSize + 2
		if len(b.Keys) > 0 {
			n += 2*len(b.Keys[i]) + 1
		}
		if text && (!utf8.Valid(e) || bytes.IndexByte(e, 0) >= 0 || bytes.IndexByte(e, 0x1f) >= 0) {
			text = false
		}
	}
	if !text {
		n *= 2
	}
	for _, h := range hashes {
		n += 2*len(h) + 32
	}
	var q strings.Builder
	q.Grow(n + 1024)
	if prepare {
		q.WriteString(prepareMove + ";\n" + prepareEntries + ";\n" + prepareTiles + ";\n")
	}
	fmt.Fprintf(&q, "BEGIN;\nEXECUTE ledger_move(%d, %d, %d);\n", end, b.Start, epoch)
	fmt.Fprintf(&q, "EXECUTE ledger_entries(%d, %d, '\\x", b.Start, len(b.Entries))
	var buf []byte
	for _, h := range b.LeafHashes {
		buf = hex.AppendEncode(buf[:0], h[:])
		q.Write(buf)
	}
	q.WriteString("', '")
	for i := range b.Entries {
		if len(b.Keys) > 0 {
			buf = hex.AppendEncode(buf[:0], b.Keys[i])
			q.Write(buf)
		}
		q.WriteByte(',')
	}
	q.WriteString("', '")
	for _, e := range b.Entries {
		if text {
			for len(e) > 0 {
				i := bytes.IndexByte(e, '\'')
				if i < 0 {
					q.Write(e)
					break
				}
				q.Write(e[:i+1])
				q.WriteByte('\'')
				e = e[i+1:]
			}
		} else {
			buf = hex.AppendEncode(buf[:0], e)
			q.Write(buf)
		}
		q.WriteByte(0x1f)
	}
	fmt.Fprintf(&q, "', %t)", !text)
	if len(levels) > 0 {
		q.WriteString(";\nEXECUTE ledger_tiles('{")
		for i, l := range levels {
			if i > 0 {
				q.WriteByte(',')
			}
			q.WriteString(strconv.Itoa(int(l)))
		}
		q.WriteString("}', '{")
		for i, x := range tileIdxs {
			if i > 0 {
				q.WriteByte(',')
			}
			q.WriteString(strconv.FormatInt(x, 10))
		}
		q.WriteString("}', '")
		for _, h := range hashes {
			buf = hex.AppendEncode(buf[:0], h)
			q.Write(buf)
			q.WriteByte(',')
		}
		q.WriteString("')")
	}
	return q.String()
}

// sendCommit sends a Commit's message (commitSQL, with the PREPAREs if
// prepare) and reads its results; moved reports whether the update moved
// the tree size, prepared whether the PREPAREs succeeded. The transaction
// stays open.
func sendCommit(ctx context.Context, conn *pgx.Conn, sql string, b ledger.Batch, prepare, tiles bool) (moved, prepared bool, err error) {
	start := b.Start
	mrr := conn.PgConn().Exec(ctx, sql)
	defer mrr.Close()
	// next returns the next statement's command tag, or why it failed.
	next := func() (pgconn.CommandTag, error) {
		if !mrr.NextResult() {
			if err := mrr.Close(); err != nil {
				return pgconn.CommandTag{}, err
			}
			return pgconn.CommandTag{}, errors.New("the server answered fewer statements than were sent")
		}
		return mrr.ResultReader().Close()
	}
	if prepare {
		for range 3 {
			if _, err := next(); err != nil {
				return false, false, fmt.Errorf("postgres: batch at %d: preparing its statements: %w", start, err)
			}
		}
	}
	prepared = prepare
	if _, err := next(); err != nil {
		return false, prepared, fmt.Errorf("postgres: batch at %d: beginning its transaction: %w", start, err)
	}
	tag, err := next()
	if err != nil {
		return false, prepared, fmt.Errorf("postgres: batch at %d: updating the tree size: %w", start, err)
	}
	if tag.RowsAffected() != 1 {
		// Before the entries' result: a batch that does not continue
		// the log may also collide with stored entries.
		return false, prepared, nil
	}
	tag, err = next()
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == "entries_idem_key_unique" {
			// Not pgErr itself: its detail repeats the key.
			return false, prepared, fmt.Errorf("postgres: batch at %d: an idempotency key is already stored: %w", start, ledger.ErrConflict)
		}
		return false, prepared, fmt.Errorf("postgres: batch at %d: writing its entries: %w", start, err)
	}
	if tag.RowsAffected() != int64(len(b.Entries)) {
		return false, prepared, fmt.Errorf("postgres: batch at %d: %d of its %d entries written", start, tag.RowsAffected(), len(b.Entries))
	}
	if tiles {
		if _, err := next(); err != nil {
			return false, prepared, fmt.Errorf("postgres: batch at %d: writing its tiles: %w", start, err)
		}
	}
	if err := mrr.Close(); err != nil {
		return false, prepared, fmt.Errorf("postgres: batch at %d: %w", start, err)
	}
	return true, prepared, nil
}

// latestTiles returns b's tiles as columns, keeping only the last of each
// (level, index): a later tile replaces an earlier one in the batch too,
// and one INSERT may not update a row twice.
func latestTiles(b ledger.Batch) (levels []int16, idxs []int64, hashes [][]byte, err error) {
	last := make(map[[2]uint64]int, len(b.Tiles))
	for i, t := range b.Tiles {
		last[[2]uint64{uint64(t.Level), t.Index}] = i
	}
	for i, t := range b.Tiles {
		if last[[2]uint64{uint64(t.Level), t.Index}] != i {
			continue
		}
		if t.Index > math.MaxInt64 {
			return nil, nil, nil, fmt.Errorf("postgres: batch at %d: tile %d/%d: index beyond the largest: %w", b.Start, t.Level, t.Index, ledger.ErrConflict)
		}
		levels, idxs, hashes = append(levels, int16(t.Level)), append(idxs, int64(t.Index)), append(hashes, t.Hashes)
	}
	return levels, idxs, hashes, nil
}

// Entry implements ledger.Store.
func (s *Store) Entry(ctx context.Context, index uint64) ([]byte, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if index > math.MaxInt64 {
		return nil, fmt.Errorf("postgres: entry %d: %w", index, ledger.ErrNotFound)
	}
	// The tree size in the same statement, so in the same snapshot: an
	// entry below it that is not stored was lost.
	var size int64
	var e []byte
	err := s.pool.QueryRow(ctx, "SELECT t.size, e.data FROM tree_head t LEFT JOIN entries e ON e.idx = $1", int64(index)).Scan(&size, &e)
	switch {
	case err != nil:
		return nil, fmt.Errorf("postgres: entry %d: %w", index, err)
	case e == nil && index < uint64(size):
		return nil, fmt.Errorf("%w: entry %d is missing below the tree size %d", ledger.ErrCorrupt, index, size)
	case e == nil:
		return nil, fmt.Errorf("postgres: entry %d: %w", index, ledger.ErrNotFound)
	}
	return e, nil
}

// readChunk is how many entries ReadEntries reads per query: fn runs
// between queries, holding no connection, so it may call the store.
const readChunk = 512

// ReadEntries implements ledger.Store.
func (s *Store) ReadEntries(ctx context.Context, start, end uint64, fn func(index uint64, entry []byte) error) error {
	if err := s.check(); err != nil {
		return err
	}
	var size int64
	if err := s.pool.QueryRow(ctx, "SELECT size FROM tree_head").Scan(&size); err != nil {
		return fmt.Errorf("postgres: entries [%d, %d): reading the tree size: %w", start, end, err)
	}
	if start > end || end > uint64(size) {
		return fmt.Errorf("postgres: entries [%d, %d) of %d: %w", start, end, size, ledger.ErrNotFound)
	}
	chunk := make([][]byte, 0, readChunk)
	for from := start; from < end; {
		to := min(end, from+readChunk)
		chunk = chunk[:0]
		rows, err := s.pool.Query(ctx, "SELECT idx, data FROM entries WHERE idx >= $1 AND idx < $2 ORDER BY idx", int64(from), int64(to))
		if err != nil {
			return fmt.Errorf("postgres: entries [%d, %d): %w", from, to, err)
		}
		next := from
		for rows.Next() {
			var idx int64
			var e []byte
			if err := rows.Scan(&idx, &e); err != nil {
				rows.Close()
				return fmt.Errorf("postgres: entries [%d, %d): %w", from, to, err)
			}
			if uint64(idx) != next {
				rows.Close()
				return fmt.Errorf("%w: entries [%d, %d): entry %d is missing below the tree size %d", ledger.ErrCorrupt, from, to, next, size)
			}
			chunk = append(chunk, e)
			next++
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("postgres: entries [%d, %d): %w", from, to, err)
		}
		if next != to {
			return fmt.Errorf("%w: entries [%d, %d): entry %d is missing below the tree size %d", ledger.ErrCorrupt, from, to, next, size)
		}
		for i, e := range chunk {
			if err := fn(from+uint64(i), e); err != nil {
				return err
			}
		}
		from = to
	}
	return nil
}

// IndexOf implements ledger.Store.
func (s *Store) IndexOf(ctx context.Context, leafHash [ledger.HashSize]byte) (uint64, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	var idx int64
	err := s.pool.QueryRow(ctx, "SELECT idx FROM entries WHERE leaf_hash = $1 ORDER BY idx LIMIT 1", leafHash[:]).Scan(&idx)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("postgres: leaf hash %x: %w", leafHash, ledger.ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("postgres: leaf hash %x: %w", leafHash, err)
	}
	return uint64(idx), nil
}

// IndexOfKey implements ledger.Store.
func (s *Store) IndexOfKey(ctx context.Context, key []byte) (uint64, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	if len(key) == 0 {
		return 0, fmt.Errorf("postgres: idempotency key: %w", ledger.ErrNotFound)
	}
	var idx int64
	err := s.pool.QueryRow(ctx, "SELECT idx FROM entries WHERE idem_key = $1", key).Scan(&idx)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("postgres: idempotency key: %w", ledger.ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("postgres: idempotency key: %w", err)
	}
	return uint64(idx), nil
}

// Tile implements ledger.Store.
func (s *Store) Tile(ctx context.Context, level uint8, index uint64) ([]byte, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if index > math.MaxInt64 {
		return nil, fmt.Errorf("postgres: tile %d/%d: %w", level, index, ledger.ErrNotFound)
	}
	// The tree size in the same statement, so in the same snapshot: a
	// tile of the tree that is not stored was lost.
	var size int64
	var h []byte
	err := s.pool.QueryRow(ctx, "SELECT t.size, x.hashes FROM tree_head t LEFT JOIN tiles x ON x.level = $1 AND x.idx = $2",
		int16(level), int64(index)).Scan(&size, &h)
	switch {
	case err != nil:
		return nil, fmt.Errorf("postgres: tile %d/%d: %w", level, index, err)
	case h == nil && ledger.TileInTree(uint64(size), level, index):
		return nil, fmt.Errorf("%w: tile %d/%d of the tree of %d entries is missing", ledger.ErrCorrupt, level, index, size)
	case h == nil:
		return nil, fmt.Errorf("postgres: tile %d/%d: %w", level, index, ledger.ErrNotFound)
	}
	return h, nil
}

// AddCheckpoint implements ledger.Store: one transaction on checkpoints,
// see the package doc.
func (s *Store) AddCheckpoint(ctx context.Context, size uint64, signed []byte) error {
	if err := s.check(); err != nil {
		return err
	}
	if len(signed) == 0 {
		return errEmptyCheckpoint
	}
	epoch := s.epoch.Load()
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "LOCK TABLE checkpoints IN SHARE ROW EXCLUSIVE MODE"); err != nil {
			return err
		}
		var treeSize, current int64
		var latestSize *int64
		var latest []byte
		// FOR KEY SHARE: Commit's UPDATE does not wait for it, but
		// AcquireLease's FOR UPDATE does (and it for AcquireLease).
		err := tx.QueryRow(ctx, `SELECT t.size, t.epoch, c.size, c.signed FROM tree_head t
			LEFT JOIN LATERAL (SELECT size, signed FROM checkpoints ORDER BY size DESC LIMIT 1) c ON true
			FOR KEY SHARE OF t`, simple).Scan(&treeSize, &current, &latestSize, &latest)
		if err != nil {
			return err
		}
		if current != epoch {
			return fmt.Errorf("%w (the log is at epoch %d, this store writes at %d)", ErrFenced, current, epoch)
		}
		s.at("checkpoint")
		replace := false
		switch {
		case latestSize != nil && size < uint64(*latestSize),
			latestSize != nil && size == uint64(*latestSize) && !ledger.AddsSignatures(latest, signed):
			return fmt.Errorf("latest is for size %d: %w", *latestSize, ledger.ErrConflict)
		case size > uint64(treeSize):
			return fmt.Errorf("tree size is %d: %w", treeSize, ledger.ErrConflict)
		case latestSize != nil && size == uint64(*latestSize):
			replace = true
		}
		if replace {
			_, err = tx.Exec(ctx, "UPDATE checkpoints SET signed = $2 WHERE size = $1", simple, int64(size), signed)
		} else {
			_, err = tx.Exec(ctx, "INSERT INTO checkpoints (size, signed) VALUES ($1, $2)", simple, int64(size), signed)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("postgres: checkpoint for size %d: %w", size, err)
	}
	return nil
}

// Checkpoint implements ledger.Store.
func (s *Store) Checkpoint(ctx context.Context, size uint64) ([]byte, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if size > math.MaxInt64 {
		return nil, fmt.Errorf("postgres: checkpoint for size %d: %w", size, ledger.ErrNotFound)
	}
	var cp []byte
	err := s.pool.QueryRow(ctx, "SELECT signed FROM checkpoints WHERE size = $1", int64(size)).Scan(&cp)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("postgres: checkpoint for size %d: %w", size, ledger.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: checkpoint for size %d: %w", size, err)
	}
	return cp, nil
}
