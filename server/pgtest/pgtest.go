// Package pgtest runs real PostgreSQL servers for tests: Debian's
// postgresql binaries, started as child processes on a free loopback port
// with their data in a temporary directory, as an unprivileged user when
// the tests run as root (PostgreSQL refuses to run as root).
//
//	url := pgtest.NewDatabase(t)   // a fresh, empty database on the shared server
//	srv := pgtest.New(t)           // a server of the test's own (to stop and restart it)
//
// A missing PostgreSQL installation fails the test with the command that
// installs it: tests never skip a backend.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Server is one running PostgreSQL server.
type Server struct {
	bin  string
	dir  string // data directory
	port int
	cred *syscall.Credential
	log  string

	mu     sync.Mutex
	proc   *os.Process   // nil while stopped
	exited chan struct{} // closed when proc has exited
}

// superuser is the role initdb creates; the server trusts loopback.
const superuser = "switchboard"

// URL is the connection URL of database db on the server.
func (s *Server) URL(db string) string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", superuser, s.port, db)
}

// Port is the server's loopback port.
func (s *Server) Port() int { return s.port }

var (
	sharedOnce sync.Once
	shared     *Server
	sharedErr  error
	dbSeq      atomic.Int64
)

// Shared returns the server shared by the tests of this test binary,
// starting it on first use; it stops when the binary exits.
func Shared(tb testing.TB) *Server {
	tb.Helper()
	sharedOnce.Do(func() { shared, sharedErr = start() })
	if sharedErr != nil {
		tb.Fatalf("pgtest: %v", sharedErr)
	}
	return shared
}

// NewDatabase creates an empty database on the shared server and returns
// its URL; it is dropped when tb ends.
func NewDatabase(tb testing.TB) string {
	tb.Helper()
	return Shared(tb).NewDatabase(tb)
}

// NewDatabase creates an empty database on s and returns its URL; it is
// dropped when tb ends.
func (s *Server) NewDatabase(tb testing.TB) string {
	tb.Helper()
	name := fmt.Sprintf("t%d_%d", os.Getpid(), dbSeq.Add(1))
	if err := s.exec(context.Background(), "CREATE DATABASE "+name); err != nil {
		tb.Fatalf("pgtest: create database: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = s.exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	})
	return s.URL(name)
}

func (s *Server) exec(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// New starts a server of tb's own, stopped when tb ends.
func New(tb testing.TB) *Server {
	tb.Helper()
	s, err := start()
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

// Stop stops the server (fast shutdown: open connections are closed); its
// data stays for Start.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return nil
	}
	_ = s.proc.Signal(syscall.SIGINT)
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		_ = s.proc.Kill()
		<-s.exited
	}
	s.proc = nil
	return nil
}

// Start starts a stopped server again, on the same port with the same data.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		return nil
	}
	return s.run()
}

// Close stops the server and removes its data.
func (s *Server) Close() error {
	err := s.Stop()
	return errors.Join(err, os.RemoveAll(filepath.Dir(s.dir)))
}

// Dir is the base of the temporary directories of this package's servers;
// directories left by test binaries that were killed are removed at start.
var Dir = filepath.Join(os.TempDir(), "switchboard-pgtest")

func start() (*Server, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	removeStale()
	if err := os.MkdirAll(Dir, 0o755); err != nil {
		return nil, err
	}
	base, err := os.MkdirTemp(Dir, strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return nil, err
	}
	s := &Server{bin: bin, dir: filepath.Join(base, "data"), log: filepath.Join(base, "postgres.log")}
	if os.Geteuid() == 0 {
		cred, err := unprivileged()
		if err != nil {
			return nil, err
		}
		s.cred = cred
	}
	if err := os.Chmod(base, 0o777); err != nil {
		return nil, err
	}
	if s.cred != nil {
		if err := os.Chown(base, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			return nil, err
		}
	}
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", s.dir, "-U", superuser, "--auth=trust",
		"--encoding=UTF8", "--no-locale", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	initdb.Dir = base
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	if s.port, err = freePort(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.run(); err != nil {
		_ = os.RemoveAll(base)
		return nil, err
	}
	return s, nil
}

// run starts postgres and waits until it accepts connections; s.mu held.
func (s *Server) run() error {
	cmd := exec.Command(filepath.Join(s.bin, "postgres"), "-D", s.dir,
		"-p", strconv.Itoa(s.port), "-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories="+filepath.Dir(s.dir),
		"-c", "max_connections=500", "-c", "shared_buffers=64MB",
		// Tests need no durability; crash safety is PostgreSQL's own.
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	logf, err := os.OpenFile(s.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o666)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = filepath.Dir(s.dir)
	// Pdeathsig: the server dies with the test binary, however it ends.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	exited := make(chan struct{})
	go func() { _, _ = cmd.Process.Wait(); close(exited) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, s.URL("postgres"))
		cancel()
		if err == nil {
			_ = conn.Close(context.Background())
			break
		}
		select {
		case <-exited:
			b, _ := os.ReadFile(s.log)
			return fmt.Errorf("postgres exited at start: %s", b)
		default:
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			return fmt.Errorf("postgres did not accept connections within 60s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.proc, s.exited = cmd.Process, exited
	return nil
}

// binDir finds the PostgreSQL server binaries: the newest version under
// /usr/lib/postgresql (Debian's layout), else pg_config --bindir.
func binDir() (string, error) {
	vs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	sort.Slice(vs, func(i, j int) bool { return version(vs[i]) > version(vs[j]) })
	if len(vs) > 0 {
		return filepath.Dir(vs[0]), nil
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		dir := strings.TrimSpace(string(out))
		if _, err := os.Stat(filepath.Join(dir, "postgres")); err == nil {
			return dir, nil
		}
	}
	return "", errors.New("PostgreSQL server binaries not found (initdb, postgres): install them with `apt-get install postgresql` (.ci/run does)")
}

func version(bin string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(bin))))
	return v
}

// unprivileged is the user PostgreSQL runs as under root: postgres (the
// Debian package creates it), else nobody.
func unprivileged() (*syscall.Credential, error) {
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
	}
	return nil, errors.New("running as root and neither user postgres nor nobody exists to run PostgreSQL as")
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// removeStale removes the directories of test binaries that no longer run.
func removeStale() {
	entries, _ := os.ReadDir(Dir)
	for _, e := range entries {
		pid, err := strconv.Atoi(strings.SplitN(e.Name(), "-", 2)[0])
		if err != nil || pid == os.Getpid() {
			continue
		}
		if syscall.Kill(pid, 0) == nil {
			continue
		}
		_ = os.RemoveAll(filepath.Join(Dir, e.Name()))
	}
}
