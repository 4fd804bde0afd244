package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/client"
	"github.com/switchboard-dev/terraform-provider-switchboard/server"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/auth"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/servertest"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/vault"
)

var keyPattern = regexp.MustCompile(`sb_[A-Za-z0-9_-]{43}`)

// running is a server.Run in the background.
type running struct {
	addr   string
	out    *syncBuffer // stdout: the bootstrap key
	logs   *syncBuffer // JSON logs
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

func runConfig(t *testing.T, dataDir string) config.Config {
	cfg := config.Default()
	cfg.DataDir = dataDir
	cfg.Addr = "127.0.0.1:0"
	cfg.ShutdownTimeout = config.Duration(10 * time.Second)
	return cfg
}

func startRun(t *testing.T, cfg config.Config) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{out: &syncBuffer{}, logs: &syncBuffer{}, cancel: cancel, done: make(chan error, 1)}
	log := slog.New(slog.NewJSONHandler(r.logs, nil))
	go func() { r.done <- server.Run(ctx, cfg, log, r.out) }()
	t.Cleanup(func() { _ = r.stop(t) })
	deadline := time.After(20 * time.Second)
	for r.addr == "" {
		select {
		case err := <-r.done:
			r.once.Do(func() { r.err = err })
			t.Fatalf("Run exited at start: %v\nlogs:\n%s", err, r.logs)
		case <-deadline:
			t.Fatalf("Run did not start listening:\n%s", r.logs)
		case <-time.After(10 * time.Millisecond):
		}
		r.addr = logField(r.logs.String(), "switchboard listening", "addr")
	}
	return r
}

// stop cancels Run and returns its result (once; later calls repeat it).
func (r *running) stop(t *testing.T) error {
	r.once.Do(func() {
		r.cancel()
		select {
		case r.err = <-r.done:
		case <-time.After(30 * time.Second):
			r.err = errors.New("Run did not return within 30s of cancellation")
		}
	})
	return r.err
}

func (r *running) url() string { return "http://" + r.addr }

// env wraps the running server for the validating clients.
func (r *running) env(adminKey string) *servertest.Env {
	return &servertest.Env{URL: r.url(), AdminKey: adminKey}
}

// logField returns field of the first JSON log line whose msg is msg.
func logField(logs, msg, field string) string {
	sc := bufio.NewScanner(strings.NewReader(logs))
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil && m["msg"] == msg {
			return fmt.Sprint(m[field])
		}
	}
	return ""
}

func TestRunFirstAndSecondStart(t *testing.T) {
	dir := t.TempDir()
	cfg := runConfig(t, dir)

	first := startRun(t, cfg)
	keys := keyPattern.FindAllString(first.out.String(), -1)
	if len(keys) != 1 {
		t.Fatalf("first start printed %d keys, want the bootstrap admin key once:\n%s", len(keys), first.out)
	}
	bootstrap := keys[0]
	if strings.Contains(first.logs.String(), bootstrap) {
		t.Error("the bootstrap key reached the log")
	}
	// Master key generated, 0600, with a warning naming the file.
	fi, err := os.Stat(filepath.Join(dir, vault.KeyFile))
	if err != nil {
		t.Fatalf("master key not generated: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("master.key mode = %v, want 0600", fi.Mode().Perm())
	}
	if msg := logField(first.logs.String(), "generated a new master key; production deployments must pass SWITCHBOARD_MASTER_KEY and keep it safe: losing it loses every stored secret", "level"); msg != "WARN" {
		t.Errorf("no warning about the generated master key:\n%s", first.logs)
	}
	keyBytes, _ := os.ReadFile(filepath.Join(dir, vault.KeyFile))
	if strings.Contains(first.logs.String(), strings.TrimSpace(string(keyBytes))) {
		t.Error("the master key reached the log")
	}

	env := first.env(bootstrap)
	res, err := env.Client(t).ListAPIKeysWithResponse(bg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode() != http.StatusOK || len(res.JSON200.Data) != 1 || res.JSON200.Data[0].Name != "bootstrap-admin" {
		t.Fatalf("list with the bootstrap key = %d %s", res.StatusCode(), res.Body)
	}
	if err := first.stop(t); err != nil {
		t.Fatalf("Run = %v", err)
	}

	second := startRun(t, cfg)
	if keys := keyPattern.FindAllString(second.out.String(), -1); len(keys) != 0 {
		t.Errorf("second start printed a key again: %s", second.out)
	}
	if strings.Contains(second.logs.String(), "generated a new master key") {
		t.Error("second start generated another master key")
	}
	if again, _ := os.ReadFile(filepath.Join(dir, vault.KeyFile)); string(again) != string(keyBytes) {
		t.Error("master.key changed across restarts")
	}
	res, err = second.env(bootstrap).Client(t).ListAPIKeysWithResponse(bg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode() != http.StatusOK || len(res.JSON200.Data) != 1 {
		t.Fatalf("bootstrap key after restart = %d %s", res.StatusCode(), res.Body)
	}
}

func TestRunAdminKeyFromEnvironment(t *testing.T) {
	dir := t.TempDir()
	cfg := runConfig(t, dir)
	cfg.AdminKey = "sb_" + strings.Repeat("Adm1n", 8)
	cfg.MasterKey = vault.EncodeKey(vault.NewKey())

	for start := range 2 {
		r := startRun(t, cfg)
		if keyPattern.MatchString(r.out.String()) || strings.Contains(r.out.String(), cfg.AdminKey) {
			t.Errorf("start %d printed a key although SWITCHBOARD_ADMIN_KEY is set: %s", start, r.out)
		}
		if strings.Contains(r.logs.String(), cfg.AdminKey) || strings.Contains(r.logs.String(), cfg.MasterKey) {
			t.Errorf("start %d logged a secret", start)
		}
		res, err := r.env(cfg.AdminKey).Client(t).ListAPIKeysWithResponse(bg, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode() != http.StatusOK || len(res.JSON200.Data) != 1 || res.JSON200.Data[0].Scopes[0] != client.ScopeAdmin {
			t.Fatalf("start %d: list with SWITCHBOARD_ADMIN_KEY = %d %s, want the one admin key", start, res.StatusCode(), res.Body)
		}
		if err := r.stop(t); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, vault.KeyFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a master key file was generated although SWITCHBOARD_MASTER_KEY is set: %v", err)
	}

	bad := runConfig(t, t.TempDir())
	bad.AdminKey = "short"
	err := server.Run(context.Background(), bad, slog.New(slog.NewTextHandler(io.Discard, nil)), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "SWITCHBOARD_ADMIN_KEY") || strings.Contains(err.Error(), "short") {
		t.Errorf("Run with a malformed admin key = %v, want an error naming the variable, not the value", err)
	}
}

func TestRunSecondServerOnSameDataDir(t *testing.T) {
	dir := t.TempDir()
	startRun(t, runConfig(t, dir))

	start := time.Now()
	done := make(chan error, 1)
	go func() {
		done <- server.Run(context.Background(), runConfig(t, dir), slog.New(slog.NewTextHandler(io.Discard, nil)), io.Discard)
	}()
	select {
	case err := <-done:
		if !errors.Is(err, store.ErrInUse) || !strings.Contains(err.Error(), "database is in use by another process") || !strings.Contains(err.Error(), dir) {
			t.Fatalf("second Run = %v, want %q naming the data dir", err, store.ErrInUse)
		}
		t.Logf("second server refused after %v", time.Since(start))
	case <-time.After(15 * time.Second):
		t.Fatal("a second server on the same data dir hangs")
	}
}

func TestRunGracefulShutdown(t *testing.T) {
	dir := t.TempDir()
	cfg := runConfig(t, dir)
	cfg.AdminKey = "sb_" + strings.Repeat("GraceFul", 5)
	r := startRun(t, cfg)

	// An in-flight request: its body arrives in two parts, around the signal.
	pr, pw := io.Pipe()
	req, _ := http.NewRequest("POST", r.url()+"/v1/api-keys", pr)
	req.Header.Set("Authorization", "Bearer "+cfg.AdminKey)
	req.Header.Set("Content-Type", "application/json")
	type result struct {
		status int
		body   string
		err    error
	}
	resc := make(chan result, 1)
	go func() {
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			resc <- result{err: err}
			return
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		resc <- result{status: res.StatusCode, body: string(b)}
	}()
	if _, err := io.WriteString(pw, `{"name":"in-flight",`); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // let the server start on the request

	stopped := make(chan error, 1)
	go func() { stopped <- r.stop(t) }()

	// New connections are refused while the request is still running.
	refused := false
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		c, err := net.DialTimeout("tcp", r.addr, time.Second)
		if err != nil {
			refused = true
			break
		}
		c.Close()
	}
	if !refused {
		t.Fatal("the server still accepts connections after shutdown began")
	}
	select {
	case err := <-stopped:
		t.Fatalf("Run returned (%v) before the in-flight request finished", err)
	default:
	}

	if _, err := io.WriteString(pw, `"scopes":["llm"]}`); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	res := <-resc
	if res.err != nil || res.status != http.StatusCreated {
		t.Fatalf("in-flight request = %d %s %v, want 201", res.status, res.body, res.err)
	}
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return after the in-flight request finished")
	}
	if !strings.Contains(r.logs.String(), `"msg":"stopped"`) {
		t.Errorf("no stopped log line:\n%s", r.logs)
	}

	// The database was closed: it opens at once, holding the in-flight write.
	st, err := server.OpenStore(bg, cfg, quiet)
	if err != nil {
		t.Fatalf("database not released after Run: %v", err)
	}
	defer st.Close()
	keys := &auth.Keys{Store: st}
	list, _, err := keys.List(bg, "", 10)
	if err != nil || len(list) != 2 || list[1].Name != "in-flight" {
		t.Errorf("keys after shutdown = %+v, %v; want the bootstrap key and the in-flight one", list, err)
	}
}

func TestRunShutdownWaitIsBounded(t *testing.T) {
	cfg := runConfig(t, t.TempDir())
	cfg.ShutdownTimeout = config.Duration(300 * time.Millisecond)
	cfg.AdminKey = "sb_" + strings.Repeat("Bounded1", 5)
	r := startRun(t, cfg)

	// A request whose body never completes.
	pr, pw := io.Pipe()
	defer pw.Close()
	req, _ := http.NewRequest("POST", r.url()+"/v1/api-keys", pr)
	req.Header.Set("Authorization", "Bearer "+cfg.AdminKey)
	req.Header.Set("Content-Type", "application/json")
	errc := make(chan error, 1)
	go func() {
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			res.Body.Close()
		}
		errc <- err
	}()
	if _, err := io.WriteString(pw, `{"name":`); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)

	start := time.Now()
	if err := r.stop(t); err != nil {
		t.Fatalf("Run = %v", err)
	}
	took := time.Since(start)
	// Bounded by the timeout, not by the stuck request (which never ends).
	if took > 10*time.Second {
		t.Errorf("shutdown took %v with a 300ms bound", took)
	}
	if !strings.Contains(r.logs.String(), "in-flight requests did not finish in time") {
		t.Errorf("no log about the cut request:\n%s", r.logs)
	}
	pw.Close()
	<-errc
	st, err := server.OpenStore(bg, cfg, quiet)
	if err != nil {
		t.Fatalf("database not released after a forced shutdown: %v", err)
	}
	st.Close()
}

func TestRunListenFailureCreatesNoKey(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg := runConfig(t, t.TempDir())
	cfg.Addr = ln.Addr().String()
	var out syncBuffer
	err = server.Run(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), &out)
	if err == nil || !strings.Contains(err.Error(), "listen on "+cfg.Addr) {
		t.Fatalf("Run on a busy port = %v", err)
	}
	if out.String() != "" {
		t.Errorf("a bootstrap key was printed although the server never served: %s", out.String())
	}
	// So the next successful start prints one.
	r := startRun(t, runConfig(t, cfg.DataDir))
	if !keyPattern.MatchString(r.out.String()) {
		t.Error("no bootstrap key on the first successful start")
	}
}
