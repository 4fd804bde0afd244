package cluster_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/client"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/pgtest"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/redistest"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/vault"
)

// binary is the switchboard binary built once for the test binary.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "switchboard-cluster-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "switchboard")
	build := exec.Command("go", "build", "-o", binary, "../..")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build switchboard:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// cluster is PostgreSQL, Redis and replicas of `switchboard serve` on
// loopback, sharing one master key and one admin key.
type cluster struct {
	t        *testing.T
	pg       *pgtest.Server
	redis    *redistest.Server
	dbURL    string
	master   string
	admin    string
	dir      string
	extraEnv []string
	replicas []*replica
}

// replica is one `switchboard serve` process.
type replica struct {
	name string
	url  string
	addr string
	cmd  *exec.Cmd
	done chan struct{}
	logs *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type clusterOption func(*cluster)

// withEnv adds environment variables to every replica.
func withEnv(kv ...string) clusterOption {
	return func(c *cluster) { c.extraEnv = append(c.extraEnv, kv...) }
}

// newCluster starts PostgreSQL and Redis of the test's own, then n
// replicas, and waits until every replica is ready.
func newCluster(t *testing.T, n int, opts ...clusterOption) *cluster {
	t.Helper()
	c := &cluster{
		t:      t,
		pg:     pgtest.New(t),
		redis:  redistest.New(t),
		master: vault.EncodeKey(vault.NewKey()),
		admin:  "sb_" + randomHex(24),
		dir:    t.TempDir(),
	}
	for _, o := range opts {
		o(c)
	}
	c.dbURL = c.pg.NewDatabase(t)
	for i := range n {
		c.start(fmt.Sprintf("r%d", i+1))
	}
	for _, r := range c.replicas {
		c.waitReady(r)
	}
	t.Cleanup(func() {
		for _, r := range c.replicas {
			r.stop()
		}
		if t.Failed() {
			for _, r := range c.replicas {
				t.Logf("== %s logs\n%s", r.name, tail(r.logs.String(), 4000))
			}
		}
	})
	return c
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// start starts a replica (it is not waited for: see waitReady).
func (c *cluster) start(name string) *replica {
	c.t.Helper()
	addr := freeAddr(c.t)
	r := &replica{name: name, addr: addr, url: "http://" + addr, done: make(chan struct{}), logs: &syncBuffer{}}
	cmd := exec.Command(binary, "serve")
	cmd.Env = append(os.Environ(),
		"SWITCHBOARD_ADDR="+addr,
		"SWITCHBOARD_DATA_DIR="+filepath.Join(c.dir, name),
		"SWITCHBOARD_DATABASE_URL="+c.dbURL,
		"SWITCHBOARD_REDIS_URL="+c.redis.URL(),
		"SWITCHBOARD_MASTER_KEY="+c.master,
		"SWITCHBOARD_ADMIN_KEY="+c.admin,
		"SWITCHBOARD_EGRESS_ALLOW=127.0.0.0/8",
		"SWITCHBOARD_LOG_LEVEL=info",
		// High enough for the load the tests make; a test that checks a
		// limit sets it on its key.
		"SWITCHBOARD_REQUESTS_PER_MINUTE=10000000",
		"SWITCHBOARD_CONTROL_PLANE_REQUESTS_PER_MINUTE=10000000",
	)
	cmd.Env = append(cmd.Env, c.extraEnv...)
	cmd.Stdout, cmd.Stderr = r.logs, r.logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("start replica %s: %v", name, err)
	}
	r.cmd = cmd
	go func() { _ = cmd.Wait(); close(r.done) }()
	c.replicas = append(c.replicas, r)
	return r
}

// waitReady waits until r answers /readyz with 200.
func (c *cluster) waitReady(r *replica) {
	c.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-r.done:
			c.t.Fatalf("replica %s exited at start:\n%s", r.name, r.logs.String())
		default:
		}
		res, err := http.Get(r.url + "/readyz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.t.Fatalf("replica %s not ready within 60s:\n%s", r.name, r.logs.String())
}

// kill sends SIGKILL: the replica dies without draining or releasing.
func (r *replica) kill() {
	_ = r.cmd.Process.Kill()
	<-r.done
}

// stop sends SIGTERM and waits for the graceful shutdown.
func (r *replica) stop() {
	select {
	case <-r.done:
		return
	default:
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(30 * time.Second):
		r.kill()
	}
}

// alive are the replicas still running.
func (c *cluster) alive() []*replica {
	var out []*replica
	for _, r := range c.replicas {
		select {
		case <-r.done:
		default:
			out = append(out, r)
		}
	}
	return out
}

// httpClient is shared by every request of the tests: keep-alive pools per replica.
var httpClient = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}

// client is the generated client of replica r with key.
func (c *cluster) client(r *replica, key string) *client.ClientWithResponses {
	c.t.Helper()
	cl, err := client.NewClientWithResponses(r.url, client.WithHTTPClient(httpClient),
		client.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
			req.Header.Set("Authorization", "Bearer "+key)
			return nil
		}))
	if err != nil {
		c.t.Fatal(err)
	}
	return cl
}

// do sends a JSON request to r with key; it returns the status and body
// (status 0 when the request failed at the transport).
func do(r *replica, key, method, path string, body any) (int, []byte) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, r.url+path, rd)
	req.Header.Set("Authorization", "Bearer "+key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := httpClient.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

// mustDo is do that fails the test unless the status is want.
func (c *cluster) mustDo(r *replica, key, method, path string, body any, want int) []byte {
	c.t.Helper()
	code, b := do(r, key, method, path, body)
	if code != want {
		c.t.Fatalf("%s %s on %s = %d %s, want %d", method, path, r.name, code, b, want)
	}
	return b
}

// createKey creates an API key through r and returns its id and secret.
func (c *cluster) createKey(r *replica, body map[string]any) (id, secret string) {
	c.t.Helper()
	b := c.mustDo(r, c.admin, http.MethodPost, "/v1/api-keys", body, http.StatusCreated)
	var k struct {
		ID     string `json:"id"`
		Secret string `json:"key"`
	}
	if err := json.Unmarshal(b, &k); err != nil || k.Secret == "" {
		c.t.Fatalf("create key: %v %s", err, b)
	}
	return k.ID, k.Secret
}

// withConfig gives every replica the configuration file yaml.
func withConfig(yaml string) clusterOption {
	return func(c *cluster) {
		path := filepath.Join(c.dir, "config.yaml")
		if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
			c.t.Fatal(err)
		}
		c.extraEnv = append(c.extraEnv, "SWITCHBOARD_CONFIG="+path)
	}
}

// shortLeases makes a webhook lane's lease last 2×2s+10s, so that a killed
// replica's deliveries are taken over within the test's patience.
var shortLeases = withConfig("webhooks:\n  attemptTimeout: 2s\n")
