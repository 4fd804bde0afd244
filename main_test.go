package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/pgtest"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/vault"
)

// The test binary doubles as the switchboard binary: started with
// SWITCHBOARD_TEST_EXEC_MAIN=1 it runs main's command dispatch, so that the
// tests below drive a real process (signals, exit codes, stdout/stderr).
func TestMain(m *testing.M) {
	if os.Getenv("SWITCHBOARD_TEST_EXEC_MAIN") == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

var keyPattern = regexp.MustCompile(`sb_[A-Za-z0-9_-]{43}`)

// lockedBuffer collects a process's output while it runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type proc struct {
	cmd            *exec.Cmd
	stdout, stderr *lockedBuffer
	exited         chan struct{}
}

// start runs `switchboard args...` with only the given SWITCHBOARD_* env.
func start(t *testing.T, env map[string]string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = []string{"SWITCHBOARD_TEST_EXEC_MAIN=1", "PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	p := &proc{cmd: cmd, stdout: &lockedBuffer{}, stderr: &lockedBuffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = cmd.Process.Kill()
			<-p.exited
		}
	})
	return p
}

// wait returns the exit code, failing the test after timeout.
func (p *proc) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.exited:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(timeout):
		t.Fatalf("process still running after %v\nstderr:\n%s", timeout, p.stderr)
		return -1
	}
}

// listening waits for the "switchboard listening" log line and returns the address.
func (p *proc) listening(t *testing.T) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		sc := bufio.NewScanner(strings.NewReader(p.stderr.String()))
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil && m["msg"] == "switchboard listening" {
				return fmt.Sprint(m["addr"])
			}
		}
		select {
		case <-p.exited:
			t.Fatalf("switchboard exited at start (%d):\n%s", p.cmd.ProcessState.ExitCode(), p.stderr)
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("switchboard did not start listening:\n%s", p.stderr)
	return ""
}

func TestServeLifecycle(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	env := map[string]string{"SWITCHBOARD_DATA_DIR": dir, "SWITCHBOARD_ADDR": "127.0.0.1:0"}

	p := start(t, env, "serve")
	addr := p.listening(t)
	key := keyPattern.FindString(p.stdout.String())
	if key == "" {
		t.Fatalf("no bootstrap admin key on stdout:\n%s", p.stdout)
	}
	// Logs are JSON lines on stderr, and carry no secret.
	for _, line := range strings.Split(strings.TrimSpace(p.stderr.String()), "\n") {
		if !json.Valid([]byte(line)) {
			t.Errorf("stderr line is not JSON: %s", line)
		}
	}
	if !strings.Contains(p.stderr.String(), "generated a new master key") {
		t.Errorf("no master key warning:\n%s", p.stderr)
	}
	if fi, err := os.Stat(filepath.Join(dir, vault.KeyFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("master.key: %v %v, want mode 0600", fi, err)
	}

	req, _ := http.NewRequest("GET", "http://"+addr+"/v1/api-keys", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/api-keys with the bootstrap key = %d", res.StatusCode)
	}

	// A second server on the same data dir fails fast with a clear message.
	second := start(t, env, "serve")
	if code := second.wait(t, 15*time.Second); code != 1 {
		t.Errorf("second server exit code = %d, want 1", code)
	}
	if !strings.Contains(second.stderr.String(), "database is in use by another process") {
		t.Errorf("second server stderr lacks the reason:\n%s", second.stderr)
	}

	// SIGTERM: a clean stop, exit code 0, database released.
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("exit code after SIGTERM = %d\n%s", code, p.stderr)
	}
	for _, msg := range []string{`"msg":"shutting down"`, `"msg":"stopped"`} {
		if !strings.Contains(p.stderr.String(), msg) {
			t.Errorf("stderr lacks %s", msg)
		}
	}
	if strings.Contains(p.stderr.String(), key) {
		t.Error("the bootstrap key reached the log")
	}

	// Restart: no new key printed; SIGINT stops it too.
	again := start(t, env, "serve")
	again.listening(t)
	if keyPattern.MatchString(again.stdout.String()) {
		t.Errorf("second start printed a key:\n%s", again.stdout)
	}
	if err := again.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if code := again.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("exit code after SIGINT = %d", code)
	}
	st, err := store.OpenBolt(filepath.Join(dir, "switchboard.db"))
	if err != nil {
		t.Fatalf("database not released: %v", err)
	}
	st.Close()
}

func TestCommands(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name       string
		args       []string
		code       int
		stdout     string
		stderr     string
		stderrJSON bool
	}{
		{name: "no command", args: nil, code: 2, stderr: "usage: switchboard"},
		{name: "version", args: []string{"version"}, code: 0, stdout: "switchboard dev"},
		{name: "help", args: []string{"help"}, code: 0, stdout: "rotate-master-key"},
		{name: "unknown command", args: []string{"frobnicate"}, code: 2, stderr: `unknown command "frobnicate"`},
		{name: "unknown flag", args: []string{"serve", "-bogus"}, code: 2, stderr: "-bogus"},
		{name: "invalid config", args: []string{"serve", "-log-level=loud"}, code: 2, stderr: "logLevel"},
		{name: "serve -h prints the usage once and exits 0", args: []string{"serve", "-h"}, code: 0, stdout: "usage: switchboard serve [flags]"},
		{name: "serve --help", args: []string{"serve", "--help"}, code: 0, stdout: "-idle-timeout"},
		{name: "migrate -help", args: []string{"migrate", "-help"}, code: 0, stdout: "usage: switchboard migrate [flags]"},
		{name: "rotate-master-key -h", args: []string{"rotate-master-key", "-h"}, code: 0, stdout: "usage: switchboard rotate-master-key [flags]"},
		{name: "migrate", args: []string{"migrate", "-data-dir", dir}, code: 0, stdout: fmt.Sprintf("schema version %d", store.SchemaVersion())},
		{name: "rotate without a key", args: []string{"rotate-master-key", "-data-dir", filepath.Join(dir, "empty")}, code: 1, stderr: "read current master key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(tc.args, &out, &errOut)
			if code != tc.code {
				t.Errorf("exit code = %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, &out, &errOut)
			}
			if !strings.Contains(out.String(), tc.stdout) {
				t.Errorf("stdout %q lacks %q", &out, tc.stdout)
			}
			if !strings.Contains(errOut.String(), tc.stderr) {
				t.Errorf("stderr %q lacks %q", &errOut, tc.stderr)
			}
			if tc.code == 0 && strings.Contains(out.String()+errOut.String(), "help requested") {
				t.Errorf("output reports help as an error:\n%s%s", &out, &errOut)
			}
			if n := strings.Count(out.String()+errOut.String(), "-data-dir"); n > 1 {
				t.Errorf("the flags are listed %d times:\n%s%s", n, &out, &errOut)
			}
		})
	}
}

// An invalid configuration, from any source, is refused before anything is
// written to the data dir: no master key is generated for a server that
// never starts, and a bad key is reported under the name of its source.
func TestServeInvalidConfigWritesNothing(t *testing.T) {
	badProviders := filepath.Join(t.TempDir(), "providers.yaml")
	if err := os.WriteFile(badProviders, []byte("providers:\n  - name: x\n    type: bogus\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	badKeyFile := t.TempDir()
	if err := os.WriteFile(filepath.Join(badKeyFile, vault.KeyFile), []byte("not-a-key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		env     map[string]string
		args    []string
		dataDir string // default: a fresh one
		code    int
		stderr  []string // all must appear
		absent  string   // must not appear (a secret)
	}{
		{name: "bad -master-key flag is reported under the flag", args: []string{"-master-key=c2hvcnQ="}, code: 1,
			stderr: []string{"-master-key: master key must decode to 32 bytes"}, absent: "SWITCHBOARD_MASTER_KEY"},
		{name: "bad SWITCHBOARD_MASTER_KEY is reported under the variable", env: map[string]string{"SWITCHBOARD_MASTER_KEY": "c2hvcnQ="}, code: 1,
			stderr: []string{"SWITCHBOARD_MASTER_KEY: master key must decode to 32 bytes"}, absent: "c2hvcnQ="},
		{name: "flag wins over the variable and is named", env: map[string]string{"SWITCHBOARD_MASTER_KEY": vault.EncodeKey(vault.NewKey())}, args: []string{"-master-key=bm9wZQ=="}, code: 1,
			stderr: []string{"-master-key: "}, absent: "bm9wZQ=="},
		{name: "bad admin key", env: map[string]string{"SWITCHBOARD_ADMIN_KEY": "short"}, code: 1, stderr: []string{"SWITCHBOARD_ADMIN_KEY"}, absent: "short"},
		{name: "bad egress range", env: map[string]string{"SWITCHBOARD_EGRESS_ALLOW": "not-a-cidr"}, code: 1, stderr: []string{"egress.allow", "not-a-cidr"}},
		{name: "bad provider in the config file", env: map[string]string{"SWITCHBOARD_CONFIG": badProviders}, code: 1, stderr: []string{`unknown type "bogus"`}},
		{name: "zero idle timeout", args: []string{"-idle-timeout=0s"}, code: 2, stderr: []string{"idleTimeout must be positive"}},
		{name: "bad key file is reported under its path", dataDir: badKeyFile, code: 1, stderr: []string{filepath.Join(badKeyFile, vault.KeyFile) + ": master key is not valid base64"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.dataDir
			if dir == "" {
				dir = filepath.Join(t.TempDir(), "data")
			}
			env := map[string]string{"SWITCHBOARD_DATA_DIR": dir, "SWITCHBOARD_ADDR": "127.0.0.1:0"}
			for k, v := range tc.env {
				env[k] = v
			}
			p := start(t, env, append([]string{"serve"}, tc.args...)...)
			if code := p.wait(t, 30*time.Second); code != tc.code {
				t.Errorf("exit code = %d, want %d\nstderr:\n%s", code, tc.code, p.stderr)
			}
			for _, s := range tc.stderr {
				if !strings.Contains(p.stderr.String(), s) {
					t.Errorf("stderr lacks %q:\n%s", s, p.stderr)
				}
			}
			if tc.absent != "" && strings.Contains(p.stderr.String()+p.stdout.String(), tc.absent) {
				t.Errorf("output holds %q:\n%s", tc.absent, p.stderr)
			}
			if tc.dataDir != "" {
				return // the test's own key file
			}
			if _, err := os.Stat(filepath.Join(dir, vault.KeyFile)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a master key was generated for a refused configuration (stat: %v)", err)
			}
			if entries, _ := os.ReadDir(dir); len(entries) > 0 {
				t.Errorf("the data dir was written: %v", entries)
			}
			if keyPattern.MatchString(p.stdout.String()) {
				t.Errorf("a bootstrap key was printed: %s", p.stdout)
			}
		})
	}
}

// TestRotateMasterKeyCommand: rotation is refused while a server runs on
// the database (bbolt's file lock; PostgreSQL's serving lock, held by
// every replica), then replaces the key file and re-encrypts.
func TestRotateMasterKeyCommand(t *testing.T) {
	for _, backend := range []struct {
		name string
		url  func(testing.TB) string
	}{
		{"bbolt", func(testing.TB) string { return "" }},
		{"postgres", pgtest.NewDatabase},
	} {
		t.Run(backend.name, func(t *testing.T) {
			dir := t.TempDir()
			url := backend.url(t)
			t.Setenv("SWITCHBOARD_DATABASE_URL", url)
			t.Setenv("SWITCHBOARD_MASTER_KEY", "")
			// A first start generates the key file.
			p := start(t, map[string]string{"SWITCHBOARD_DATA_DIR": dir, "SWITCHBOARD_ADDR": "127.0.0.1:0", "SWITCHBOARD_DATABASE_URL": url}, "serve")
			p.listening(t)

			// Refused while the server runs.
			var out, errOut bytes.Buffer
			if code := run([]string{"rotate-master-key", "-data-dir", dir}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "database is in use") {
				t.Errorf("rotate while serving = %d %s", code, &errOut)
			}
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
			p.wait(t, 30*time.Second)

			before, _ := os.ReadFile(filepath.Join(dir, vault.KeyFile))
			out.Reset()
			errOut.Reset()
			if code := run([]string{"rotate-master-key", "-data-dir", dir}, &out, &errOut); code != 0 {
				t.Fatalf("rotate = %d %s", code, &errOut)
			}
			after, _ := os.ReadFile(filepath.Join(dir, vault.KeyFile))
			if bytes.Equal(before, after) || !strings.Contains(out.String(), "re-encrypted") {
				t.Errorf("key file not replaced: %s", &out)
			}
			if strings.Contains(out.String()+errOut.String(), strings.TrimSpace(string(after))) {
				t.Error("rotation printed the new key file's key")
			}
		})
	}
}

func TestTuneGC(t *testing.T) {
	for _, tc := range []struct {
		name  string
		gogc  string
		tuned bool
	}{
		{"GOGC unset: paced for serving", "", true},
		{"GOGC set: left to the runtime", "150", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			got := tuneGC(ctx, func(k string) string {
				if k == "GOGC" {
					return tc.gogc
				}
				return ""
			})
			if got != tc.tuned {
				t.Fatalf("tuned = %v, want %v", got, tc.tuned)
			}
		})
	}
}

// store copy copies a stopped server's bbolt database, refuses a target
// holding data unless --merge, and never prints a URL's password.
func TestStoreCopyCommand(t *testing.T) {
	// Into a bbolt file, and into PostgreSQL (the command's purpose).
	for _, target := range []struct {
		name string
		to   func(t *testing.T, dir string) string
	}{
		{"bbolt", func(t *testing.T, dir string) string { return filepath.Join(dir, "copy.db") }},
		{"postgres", func(t *testing.T, _ string) string { return pgtest.NewDatabase(t) }},
	} {
		t.Run(target.name, func(t *testing.T) {
			dir := t.TempDir()
			testStoreCopyCommand(t, dir, filepath.Join(dir, "switchboard.db"), target.to(t, dir))
		})
	}
}

func testStoreCopyCommand(t *testing.T, dir, from, to string) {
	src, err := store.OpenBolt(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Update(context.Background(), func(tx store.Tx) error {
		for _, k := range []string{"key_1", "key_2", "key_3"} {
			if err := tx.Put("apikeys", k, []byte(`{}`)); err != nil {
				return err
			}
		}
		_, err := tx.NextSequence("invocations")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// Refused while a process holds the source.
	var out, errOut bytes.Buffer
	if code := run([]string{"store", "copy", "--from", from, "--to", to}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "stop the switchboard serving it") {
		t.Errorf("copy of a database in use = %d, stderr %s", code, &errOut)
	}
	src.Close()

	t.Setenv("SWITCHBOARD_DATABASE_URL", "")
	steps := []struct {
		name   string
		args   []string
		code   int
		stdout []string
		stderr string
	}{
		{name: "into an empty target it prints per-bucket counts", args: []string{"store", "copy", "--from", from, "--to", to}, code: 0,
			stdout: []string{"copying " + from + " to " + to, "apikeys          3     0", "invocations      0     0         1", "copied 3 keys"}},
		{name: "again without --merge it is refused", args: []string{"store", "copy", "--from", from, "--to", to}, code: 1, stderr: "already holds data (bucket apikeys)"},
		{name: "again with --merge it replaces nothing", args: []string{"store", "copy", "--from", from, "--to", to, "--merge"}, code: 0, stdout: []string{"apikeys          3     0", "copied 3 keys"}},
		{name: "without a target it says how to name one", args: []string{"store", "copy", "--from", from}, code: 2, stderr: "SWITCHBOARD_DATABASE_URL"},
		{name: "a URL's password is never printed", args: []string{"store", "copy", "--from", from, "--to", "postgres://sb:hunter2@127.0.0.1:1/sb?password=hunter2"}, code: 1, stderr: "postgres://sb:xxxxx@127.0.0.1:1/sb?password=xxxxx"},
		{name: "a missing source is named", args: []string{"store", "copy", "--from", filepath.Join(dir, "nope.db"), "--to", to}, code: 1, stderr: "nope.db"},
		{name: "store -h lists the flags", args: []string{"store", "-h"}, code: 0, stdout: []string{"--merge", "-from"}},
		{name: "an unknown subcommand prints the usage", args: []string{"store", "move"}, code: 2, stderr: "usage: switchboard store copy"},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(s.args, &out, &errOut)
			if code != s.code {
				t.Errorf("exit code = %d, want %d\nstdout: %s\nstderr: %s", code, s.code, &out, &errOut)
			}
			// The table's columns widen with the longest bucket name:
			// compare its rows with single spaces.
			flat := strings.Join(strings.Fields(out.String()), " ")
			for _, want := range s.stdout {
				if !strings.Contains(flat, strings.Join(strings.Fields(want), " ")) {
					t.Errorf("stdout lacks %q:\n%s", want, &out)
				}
			}
			if !strings.Contains(errOut.String(), s.stderr) {
				t.Errorf("stderr %q lacks %q", &errOut, s.stderr)
			}
			if strings.Contains(out.String()+errOut.String(), "hunter2") {
				t.Errorf("the password is printed:\n%s%s", &out, &errOut)
			}
		})
	}
}

// TestMigrateCommandOnPostgres: `switchboard migrate` with
// SWITCHBOARD_DATABASE_URL creates the schema in an empty database,
// changes nothing when run again, and refuses a database whose schema is
// newer than the binary, saying so.
func TestMigrateCommandOnPostgres(t *testing.T) {
	url := pgtest.NewDatabase(t)
	t.Setenv("SWITCHBOARD_DATABASE_URL", url)
	t.Setenv("SWITCHBOARD_MASTER_KEY", "")
	dir := t.TempDir()
	migrate := func() (int, string, string) {
		var out, errOut bytes.Buffer
		code := run([]string{"migrate", "-data-dir", dir}, &out, &errOut)
		return code, out.String(), errOut.String()
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	applied := func() (n int, at time.Time) {
		t.Helper()
		if err := conn.QueryRow(ctx, "SELECT count(*), max(applied_at) FROM schema_migrations").Scan(&n, &at); err != nil {
			t.Fatal(err)
		}
		return n, at
	}
	want := fmt.Sprintf("schema version %d", store.SchemaVersion())
	if code, out, errOut := migrate(); code != 0 || !strings.Contains(out, want) {
		t.Fatalf("migrate on an empty database = %d %q %q, want 0 and %q", code, out, errOut, want)
	}
	n, at := applied()
	if n == 0 {
		t.Fatal("no schema migration recorded")
	}
	var kv bool
	if err := conn.QueryRow(ctx, "SELECT to_regclass('kv') IS NOT NULL").Scan(&kv); err != nil || !kv {
		t.Fatalf("table kv missing after migrate (%v)", err)
	}
	if code, out, errOut := migrate(); code != 0 || !strings.Contains(out, want) {
		t.Fatalf("migrate again = %d %q %q", code, out, errOut)
	}
	if n2, at2 := applied(); n2 != n || !at2.Equal(at) {
		t.Errorf("migrate again recorded %d migrations at %v, want the same %d at %v", n2, at2, n, at)
	}
	if _, err := conn.Exec(ctx, "INSERT INTO schema_migrations (version) VALUES (999)"); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := migrate(); code != 1 || !strings.Contains(errOut, "schema version 999") || !strings.Contains(errOut, "run a newer switchboard") {
		t.Errorf("migrate on a newer schema = %d %q, want 1 naming the version", code, errOut)
	}
}
