// Package pgtest starts a real PostgreSQL server for tests: initdb on a
// temporary data directory, then postgres listening only on a Unix socket
// in a temporary directory, stopped (and both directories removed) by Stop.
//
// PostgreSQL refuses to run as root. When the test runs as root, initdb
// and postgres run as the `postgres` user (Debian's package creates it),
// and the temporary directories are made its own; otherwise they run as
// the current user. The processes are started with their credentials set
// by the kernel (the same as `runuser -u postgres --`, without a wrapper
// process in between), so that the stop signal and the parent-death
// signal reach postgres itself: a test binary that dies does not leave a
// server behind.
//
// The server is started with synchronous_commit=off as its default, so a
// store that relies on the server's default instead of setting it on its
// connections is caught by its tests. Everything else is durable (fsync
// on, full_page_writes on).
//
// A test that cuts a client's connection off half-way puts a Proxy
// (NewProxy) between them: TCP on 127.0.0.1 to the server's socket, it
// stops forwarding one connection at a frontend message of the test's
// choosing and keeps the sockets open.
//
// A test that needs a server calls Shared, which starts one server per
// test binary on first use; the package's TestMain calls Main, which stops
// it after the tests. A test that stops the database under a running
// store calls NewServer instead, for a server of its own that it may shut
// down (fast, or immediate as in a crash) and restart on the same data
// and socket. Without PostgreSQL installed, Shared and NewServer skip the
// test with a message saying how to run it, or fail it when LEDGER_CI=1
// (as .ci/run sets), so that CI never skips these tests silently.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNotInstalled: no PostgreSQL server binaries were found.
var ErrNotInstalled = errors.New("pgtest: PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb, no initdb on PATH)")

// HowToRun is the hint given when PostgreSQL is missing.
const HowToRun = "apt-get install postgresql, or run bash .ci/run (which installs it and runs every test)"

// Server is a running PostgreSQL server.
type Server struct {
	// BinDir is the directory of initdb and postgres.
	BinDir string
	// SocketDir is the directory of the server's Unix socket.
	SocketDir string
	// User is the database superuser, named as the OS user it runs as.
	User string

	root    string // holds data/ and sock/
	cred    *syscall.Credential
	cmd     *exec.Cmd
	exited  chan struct{}
	exitErr error
	dbs     atomic.Int64

	// drops are the DROP DATABASEs of NewDatabase's cleanups, running in
	// the background; Stop waits for them and reports dropErrs.
	drops    sync.WaitGroup
	dropMu   sync.Mutex
	dropErrs []error

	// spare is the database NewDatabase created ahead for the next call,
	// once a first call made it: at most one CREATE DATABASE runs ahead
	// (spares tracks it, for Stop).
	spareOnce sync.Once
	spare     chan spareDB
	spares    sync.WaitGroup
}

// spareDB is a database created ahead, or the error creating it.
type spareDB struct {
	name string
	err  error
}

// BinDir finds PostgreSQL's server binaries: $LEDGER_PG_BINDIR if set,
// else the newest /usr/lib/postgresql/<version>/bin holding initdb (where
// Debian installs it), else the directory of initdb on PATH.
func BinDir() (string, error) {
	if d := os.Getenv("LEDGER_PG_BINDIR"); d != "" {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err != nil {
			return "", fmt.Errorf("pgtest: LEDGER_PG_BINDIR=%s: %w", d, err)
		}
		return d, nil
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	sort.Slice(matches, func(i, j int) bool { return pgVersion(matches[i]) > pgVersion(matches[j]) })
	if len(matches) > 0 {
		return filepath.Dir(matches[0]), nil
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", ErrNotInstalled
}

// pgVersion is the major version in /usr/lib/postgresql/<version>/bin/initdb.
func pgVersion(initdb string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(initdb))))
	return v
}

// Start initializes and starts a new server. Stop it with Stop.
func Start() (s *Server, err error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	cred, owner, err := runAs()
	if err != nil {
		return nil, err
	}
	root, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(root)
		}
	}()
	data, sock := filepath.Join(root, "data"), filepath.Join(root, "sock")
	for _, d := range []string{data, sock} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return nil, fmt.Errorf("pgtest: %w", err)
		}
	}
	if cred != nil {
		for _, d := range []string{root, data, sock} {
			if err := os.Chown(d, int(cred.Uid), int(cred.Gid)); err != nil {
				return nil, fmt.Errorf("pgtest: making %s the postgres user's: %w", d, err)
			}
		}
	}

	// --no-sync: initdb's files need not survive a power loss, the data
	// directory is thrown away; the server itself runs with fsync on.
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", owner,
		"--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
	initdb.Dir = root
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("pgtest: initdb: %w\n%s", err, out)
	}

	s = &Server{BinDir: bin, SocketDir: sock, User: owner, root: root, cred: cred}
	if err := s.launch(); err != nil {
		return nil, err
	}
	return s, nil
}

// launch starts postgres on the server's data directory and socket, and
// returns once it accepts connections. Its output is appended to
// postgres.log, which a failed start returns.
func (s *Server) launch() error {
	logPath := filepath.Join(s.root, "postgres.log")
	logFile, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	defer logFile.Close()
	cmd := exec.Command(filepath.Join(s.BinDir, "postgres"), "-D", filepath.Join(s.root, "data"), "-k", s.SocketDir,
		"-c", "listen_addresses=",
		"-c", "fsync=on", "-c", "full_page_writes=on",
		"-c", "synchronous_commit=off", // the store must set it on its connections
		"-c", "max_connections=200",
		"-c", "shared_buffers=32MB",
		"-c", "logging_collector=off")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Pdeathsig: syscall.SIGQUIT, Setpgid: true}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Dir = s.root
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pgtest: starting postgres: %w", err)
	}
	exited := make(chan struct{})
	s.cmd, s.exited = cmd, exited
	go func() { s.exitErr = cmd.Wait(); close(exited) }()

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		conn, err := pgx.Connect(ctx, s.URL("postgres"))
		if err == nil {
			conn.Close(ctx)
			return nil
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(logPath)
			return fmt.Errorf("pgtest: postgres exited at start: %v\n%s", s.exitErr, log)
		case <-ctx.Done():
			cmd.Process.Signal(syscall.SIGQUIT)
			<-exited
			return fmt.Errorf("pgtest: postgres not accepting connections after 60 s: %w", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// runAs returns the credentials to run PostgreSQL with (nil: as this
// process) and the name of its OS user, which is also the superuser's.
func runAs() (*syscall.Credential, string, error) {
	if os.Geteuid() != 0 {
		u, err := user.Current()
		if err != nil {
			return nil, "", fmt.Errorf("pgtest: %w", err)
		}
		return nil, u.Username, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, "", fmt.Errorf("pgtest: running as root, and PostgreSQL refuses to: %w (Debian's postgresql package creates the postgres user)", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, "", fmt.Errorf("pgtest: the postgres user has uid %q, gid %q", u.Uid, u.Gid)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, "postgres", nil
}

// URL returns the URL of database db on the server, over its Unix socket.
func (s *Server) URL(db string) string {
	q := url.Values{"host": {s.SocketDir}, "sslmode": {"disable"}}
	return (&url.URL{Scheme: "postgres", User: url.User(s.User), Path: "/" + db, RawQuery: q.Encode()}).String()
}

// NewDatabase returns the URL of an empty database with a fresh name.
// CREATE DATABASE and DROP DATABASE each take 50 to 100 ms of the
// server's fsyncs, which a test need not wait for: each call takes the
// database created ahead by the call before (or, if that failed, as after
// a Shutdown, creates one) and starts creating the next; when the test
// ends its database is dropped in the background. Stop waits for both
// and returns an error naming each database that could not be dropped.
func (s *Server) NewDatabase(t testing.TB) string {
	t.Helper()
	s.spareOnce.Do(func() {
		s.spare = make(chan spareDB, 1)
		s.createSpare()
	})
	db := <-s.spare
	s.createSpare()
	name, err := db.name, db.err
	if err != nil {
		name, err = s.createDatabase(t.Context())
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.drops.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := s.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
				s.dropMu.Lock()
				s.dropErrs = append(s.dropErrs, fmt.Errorf("database %s of %s: %w", name, t.Name(), err))
				s.dropMu.Unlock()
			}
		})
	})
	return s.URL(name)
}

// createSpare creates the next database in the background and puts it,
// or the error, in s.spare.
func (s *Server) createSpare() {
	s.spares.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		name, err := s.createDatabase(ctx)
		s.spare <- spareDB{name, err}
	})
}

// createDatabase creates an empty database with a fresh name.
func (s *Server) createDatabase(ctx context.Context) (string, error) {
	name := fmt.Sprintf("t%d_%d", os.Getpid(), s.dbs.Add(1))
	return name, s.Exec(ctx, "CREATE DATABASE "+name)
}

// Exec runs sql as the superuser in the postgres database.
func (s *Server) Exec(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("pgtest: %s: %w", sql, err)
	}
	return nil
}

// Stop waits for the drops of NewDatabase's databases, shuts the server
// down (fast shutdown: SIGINT, then SIGQUIT after 20 s) and removes its
// directories. It returns an error if a database could not be dropped,
// or the directories removed. Stopping twice, or after Shutdown, is safe.
func (s *Server) Stop() error {
	if s == nil || s.cmd == nil {
		return nil
	}
	s.spares.Wait() // the spare is not dropped: the data directory goes
	s.drops.Wait()
	s.dropMu.Lock()
	dropErr := errors.Join(s.dropErrs...)
	s.dropErrs = nil
	s.dropMu.Unlock()
	select {
	case <-s.exited:
	default:
		s.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-s.exited:
		case <-time.After(20 * time.Second):
			s.cmd.Process.Signal(syscall.SIGQUIT)
			<-s.exited
		}
	}
	return errors.Join(dropErr, os.RemoveAll(s.root))
}

// ShutdownMode is how Shutdown stops a server, as pg_ctl stop -m names it.
type ShutdownMode int

const (
	// Fast (SIGINT): the server disconnects its clients, aborting their
	// transactions, writes a checkpoint and exits.
	Fast ShutdownMode = iota
	// Immediate (SIGQUIT): the server's processes exit at once, without a
	// checkpoint; the next start recovers from the write-ahead log, as
	// after a crash.
	Immediate
)

// Shutdown stops the server in mode and returns once postgres has
// exited, keeping its data directory and socket directory for Restart.
// It is not safe to call concurrently with Restart or Stop.
func (s *Server) Shutdown(mode ShutdownMode) error {
	sig := syscall.SIGINT
	if mode == Immediate {
		sig = syscall.SIGQUIT
	}
	select {
	case <-s.exited:
		return errors.New("pgtest: Shutdown: the server is not running")
	default:
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("pgtest: Shutdown: %w", err)
	}
	select {
	case <-s.exited:
		return nil
	case <-time.After(60 * time.Second):
		return errors.New("pgtest: Shutdown: postgres still running 60 s after the signal")
	}
}

// Restart starts a server that Shutdown stopped again, on the same data
// directory and socket (so its URLs stay valid), and returns once it
// accepts connections.
func (s *Server) Restart() error {
	select {
	case <-s.exited:
	default:
		return errors.New("pgtest: Restart: the server is running")
	}
	return s.launch()
}

// NewServer starts a server of t's own, which t may stop and start again
// (Shutdown, Restart) without disturbing other tests; it is stopped and
// removed when t ends. Like Shared, it skips t when PostgreSQL is not
// installed, or fails it when LEDGER_CI=1.
func NewServer(t testing.TB) *Server {
	t.Helper()
	s, err := Start()
	if err != nil {
		skipOrFail(t, err)
		return nil
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	return s
}

var shared struct {
	once sync.Once
	s    *Server
	err  error
}

// Shared returns the test binary's server, starting it on first use. When
// PostgreSQL is not installed it skips t, or fails it when LEDGER_CI=1.
func Shared(t testing.TB) *Server {
	t.Helper()
	shared.once.Do(func() { shared.s, shared.err = Start() })
	if shared.err != nil {
		skipOrFail(t, shared.err)
	}
	return shared.s
}

// skipOrFail ends t after a failed start: skipped when PostgreSQL is not
// installed (failed when LEDGER_CI=1), failed on any other error.
func skipOrFail(t testing.TB, err error) {
	t.Helper()
	switch {
	case errors.Is(err, ErrNotInstalled) && os.Getenv("LEDGER_CI") != "1":
		t.Skipf("%v; to run the PostgreSQL tests: %s", err, HowToRun)
	case errors.Is(err, ErrNotInstalled):
		t.Fatalf("%v, and LEDGER_CI=1 requires the PostgreSQL tests: %s", err, HowToRun)
	default:
		t.Fatal(err)
	}
}

// Main runs the tests and then stops the shared server, if one started.
// Call it from TestMain: func TestMain(m *testing.M) { pgtest.Main(m) }.
func Main(m *testing.M) {
	os.Exit(Run(m))
}

// Run is Main returning the tests' exit code instead of exiting, for a
// TestMain with more to do after the tests. A database of the shared
// server that could not be dropped makes the code 1: its test has ended,
// and cannot fail any more.
func Run(m *testing.M) int {
	code := m.Run()
	if shared.s != nil {
		if err := shared.s.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}
