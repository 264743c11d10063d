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
// holds at least size entries, so a fenced store writes none.
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
// BEGIN and these statements go to the server as one pipeline, one round
// trip, and COMMIT follows once every result was read: two round trips a
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
// A holder stopped in the middle of a write (its process frozen, its
// network cut) keeps its transaction open, and with it tree_head's row
// lock, which a takeover waits for: as long as the holder is stopped, no
// other store could take over. With Options.StallTimeout the server
// aborts a transaction whose client sends nothing for that long
// (idle_in_transaction_session_timeout) and closes its connection, which
// releases the lock: the stopped write is lost, unacknowledged, and the
// takeover goes ahead. A sequencer sets it to about its lease's TTL.
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
package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

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
	// StallTimeout, if positive, is how long the server waits for the
	// next statement of a transaction in progress before it aborts the
	// transaction and closes the connection
	// (idle_in_transaction_session_timeout, in whole milliseconds), so
	// that a writer stopped mid-transaction cannot hold off a takeover
	// for longer (see the package doc). Optional; 0 leaves the server's
	// setting (by default, no limit).
	StallTimeout time.Duration
}

// Store is a ledger.Store on PostgreSQL. It is safe for concurrent use.
type Store struct {
	pool   *pgxpool.Pool
	closed atomic.Bool

	// epoch is the lease epoch this store writes at: read at Open, set
	// by AcquireLease. Commit and AddCheckpoint are conditional on it.
	epoch atomic.Int64

	mu     sync.Mutex
	broken error     // set when a COMMIT's outcome is unknown
	held   heldLease // the lease this store took, if any

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
	if opts.StallTimeout > 0 {
		cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = strconv.FormatInt(max(1, opts.StallTimeout.Milliseconds()), 10)
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %s: %w", RedactURL(connURL), err)
	}
	s := &Store{pool: pool}
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
			if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1, hashtext(current_schema()))", migrationLock); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
				version    integer     PRIMARY KEY,
				name       text        NOT NULL,
				applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
				return err
			}
			var latest int
			if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM schema_migrations").Scan(&latest); err != nil {
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
			_, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", m.version, m.name)
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
// messages and logs.
func RedactURL(connURL string) string {
	if u, err := url.Parse(connURL); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		if q := u.Query(); q.Has("password") {
			q.Set("password", "xxxxx")
			u.RawQuery = q.Encode()
		}
		return u.Redacted()
	}
	if strings.Contains(connURL, "://") {
		// Not a URL we can parse: show only its scheme.
		return connURL[:strings.Index(connURL, "://")] + "://(unparsable URL)"
	}
	// key=value form.
	connURL = regexp.MustCompile(`password\s*=\s*'(?:[^'\\]|\\.)*'`).ReplaceAllLiteralString(connURL, "password=xxxxx")
	return regexp.MustCompile(`password\s*=\s*[^'\s][^\s]*`).ReplaceAllLiteralString(connURL, "password=xxxxx")
}

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
	conn, err := s.pool.Acquire(ctx)
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
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			conn.Exec(rctx, "ROLLBACK")
			cancel()
		}
	}()

	// Everything before COMMIT is one round trip (a pipeline): BEGIN, the
	// tree size's move, the entries, the tiles. A round trip costs a
	// wake-up of the server and of this goroutine, which on a busy machine
	// is more than the statement; COMMIT stays separate, so that no batch
	// is committed before all its results were read.
	idxs := make([]int64, len(b.Entries))
	leaves := make([][]byte, len(b.Entries))
	keys := make([][]byte, len(b.Entries)) // nil (NULL) where the entry has none
	for i := range b.Entries {
		idxs[i], leaves[i] = int64(b.Start)+int64(i), b.LeafHashes[i][:]
		if len(b.Keys) > 0 && len(b.Keys[i]) > 0 {
			keys[i] = b.Keys[i]
		}
	}
	var batch pgx.Batch
	batch.Queue("BEGIN")
	epoch := s.epoch.Load()
	batch.Queue("UPDATE tree_head SET size = $1 WHERE size = $2 AND epoch = $3", int64(end), int64(b.Start), epoch)
	batch.Queue(`INSERT INTO entries (idx, leaf_hash, idem_key, data)
		SELECT * FROM unnest($1::bigint[], $2::bytea[], $3::bytea[], $4::bytea[])`, idxs, leaves, keys, b.Entries)
	if len(levels) > 0 {
		batch.Queue(`INSERT INTO tiles (level, idx, hashes)
			SELECT * FROM unnest($1::smallint[], $2::bigint[], $3::bytea[])
			ON CONFLICT (level, idx) DO UPDATE SET hashes = EXCLUDED.hashes`, levels, tileIdxs, hashes)
	}
	moved, err := sendBatch(ctx, conn.Conn(), &batch, b.Start)
	if err != nil {
		return err
	}
	if !moved {
		// Rolled back first: the pipeline's later statements may have
		// failed and aborted the transaction. The size and epoch read
		// afterwards explain the refusal; the epoch only grows, so one
		// still ours now was ours at the UPDATE.
		// Through the pool: a ROLLBACK that fails closes conn, and the
		// server aborts the transaction all the same.
		committed = true // no ROLLBACK twice
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		conn.Exec(rctx, "ROLLBACK")
		cancel()
		var size, current int64
		if err := s.pool.QueryRow(ctx, "SELECT size, epoch FROM tree_head").Scan(&size, &current); err != nil {
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
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
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

// sendBatch sends a Commit's pipeline (BEGIN, the tree_head update, the
// entries, the tiles if any) and reads its results; moved reports whether
// the update moved the tree size. The transaction stays open.
func sendBatch(ctx context.Context, conn *pgx.Conn, batch *pgx.Batch, start uint64) (moved bool, err error) {
	results := conn.SendBatch(ctx, batch)
	defer results.Close()
	if _, err := results.Exec(); err != nil {
		return false, fmt.Errorf("postgres: batch at %d: beginning its transaction: %w", start, err)
	}
	tag, err := results.Exec()
	if err != nil {
		return false, fmt.Errorf("postgres: batch at %d: updating the tree size: %w", start, err)
	}
	if tag.RowsAffected() != 1 {
		// Before the entries' result: a batch that does not continue
		// the log may also collide with stored entries.
		return false, nil
	}
	if _, err := results.Exec(); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == "entries_idem_key_unique" {
			// Not pgErr itself: its detail repeats the key.
			return false, fmt.Errorf("postgres: batch at %d: an idempotency key is already stored: %w", start, ledger.ErrConflict)
		}
		return false, fmt.Errorf("postgres: batch at %d: writing its entries: %w", start, err)
	}
	if batch.Len() > 3 {
		if _, err := results.Exec(); err != nil {
			return false, fmt.Errorf("postgres: batch at %d: writing its tiles: %w", start, err)
		}
	}
	if err := results.Close(); err != nil {
		return false, fmt.Errorf("postgres: batch at %d: %w", start, err)
	}
	return true, nil
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
			FOR KEY SHARE OF t`).Scan(&treeSize, &current, &latestSize, &latest)
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
			_, err = tx.Exec(ctx, "UPDATE checkpoints SET signed = $2 WHERE size = $1", int64(size), signed)
		} else {
			_, err = tx.Exec(ctx, "INSERT INTO checkpoints (size, signed) VALUES ($1, $2)", int64(size), signed)
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
