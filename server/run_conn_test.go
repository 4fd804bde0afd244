//go:build unix

package server_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
)

// dialRaw opens a TCP connection to addr and writes what, if anything.
func dialRaw(t *testing.T, addr, what string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if what != "" {
		if _, err := io.WriteString(c, what); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// keepAlive opens a connection, makes one GET /healthz on it and leaves it
// idle between requests; the reader holds what follows.
func keepAlive(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c := dialRaw(t, addr, "GET /healthz HTTP/1.1\r\nHost: switchboard\r\n\r\n")
	r := bufio.NewReader(c)
	res, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Close {
		t.Fatalf("GET /healthz on a keep-alive connection = %d (close %v)", res.StatusCode, res.Close)
	}
	return c, r
}

// closedByServer reports whether the server closes c within wait: reading
// what it sends ends at EOF (or a reset), not at the deadline.
func closedByServer(c net.Conn, r io.Reader, wait time.Duration) error {
	c.SetReadDeadline(time.Now().Add(wait))
	_, err := io.Copy(io.Discard, r)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("still open after %v", wait)
	}
	return nil
}

// healthz makes a GET /healthz on a new connection, with a generous timeout.
func healthz(url string) error {
	h := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	res, err := h.Get(url + "/healthz")
	if err != nil {
		return err
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /healthz = %d", res.StatusCode)
	}
	return nil
}

// floodSize is how many idle connections the flood test opens: 3,000, or
// fewer when the open-file limit (client and server ends share this
// process) does not allow it.
func floodSize(t *testing.T) int {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		t.Fatal(err)
	}
	if l.Cur < l.Max {
		l.Cur = l.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
		_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l)
	}
	n := min(3000, (int(l.Cur)-1000)/2)
	if n < 500 {
		t.Fatalf("open-file limit %d is too low for the flood test (needs 2,000)", l.Cur)
	}
	return n
}

// Thousands of idle connections, slow headers and trickling bodies neither
// keep a normal request from being answered nor stay open past the
// timeouts.
func TestRunConnectionFlood(t *testing.T) {
	cfg := runConfig(t, t.TempDir())
	cfg.AdminKey = "sb_" + strings.Repeat("Fl00d", 8)
	cfg.ReadHeaderTimeout = config.Duration(2 * time.Second)
	cfg.ReadTimeout = config.Duration(3 * time.Second)
	cfg.IdleTimeout = config.Duration(2 * time.Second)
	r := startRun(t, cfg)
	n := floodSize(t)

	type conn struct {
		kind string
		c    net.Conn
		r    io.Reader
	}
	var conns []conn
	for range n { // connected, never a byte sent
		c := dialRaw(t, r.addr, "")
		conns = append(conns, conn{"silent", c, c})
	}
	for range 50 { // one request, then idle between requests
		c, br := keepAlive(t, r.addr)
		conns = append(conns, conn{"keep-alive idle", c, br})
	}
	for range 50 { // slowloris: headers never end
		c := dialRaw(t, r.addr, "GET /healthz HTTP/1.1\r\nHost: switchboard\r\nX-Slow: ")
		conns = append(conns, conn{"partial headers", c, c})
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for range 50 { // a body that trickles in, a byte every 100ms
		c := dialRaw(t, r.addr, "POST /v1/api-keys HTTP/1.1\r\nHost: switchboard\r\nAuthorization: Bearer "+cfg.AdminKey+
			"\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
		go func() {
			for ctx.Err() == nil {
				if _, err := c.Write([]byte(" ")); err != nil {
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
		}()
		conns = append(conns, conn{"trickling body", c, c})
	}
	t.Logf("%d connections open", len(conns))

	start := time.Now()
	if err := healthz(r.url()); err != nil {
		t.Fatalf("a normal request among %d idle connections: %v", len(conns), err)
	}
	t.Logf("GET /healthz answered in %v", time.Since(start))

	// Each is closed by the server after its timeout (2-3s here); the
	// minute of waiting only keeps a slow machine from failing the test.
	var wg sync.WaitGroup
	var mu sync.Mutex
	open := map[string]int{}
	for _, c := range conns {
		wg.Go(func() {
			if err := closedByServer(c.c, c.r, time.Minute); err != nil {
				mu.Lock()
				open[c.kind]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	t.Logf("all closed %v after the flood began", time.Since(start))
	for kind, count := range open {
		t.Errorf("%d %s connections were not closed by the server", count, kind)
	}
	if err := healthz(r.url()); err != nil {
		t.Fatalf("after the flood: %v", err)
	}
}

// At maxConnections a new client is let in by closing the connection idle
// the longest; connections that are not idle keep their slots, and the new
// client waits for one.
func TestRunMaxConnections(t *testing.T) {
	cfg := runConfig(t, t.TempDir())
	cfg.MaxConnections = 20
	cfg.ReadHeaderTimeout = config.Duration(time.Minute)
	cfg.ReadTimeout = config.Duration(time.Minute)
	cfg.IdleTimeout = config.Duration(time.Hour)
	r := startRun(t, cfg)

	t.Run("idle keep-alive connections make room for a new client", func(t *testing.T) {
		type idle struct {
			c net.Conn
			r *bufio.Reader
		}
		var conns []idle
		for range cfg.MaxConnections {
			c, br := keepAlive(t, r.addr)
			conns = append(conns, idle{c, br})
		}
		if err := healthz(r.url()); err != nil {
			t.Fatalf("a new client with %d idle connections at the bound: %v", cfg.MaxConnections, err)
		}
		// One idle connection (the one idle the longest) was closed for it.
		closed := make(chan int, len(conns))
		for i, c := range conns {
			go func() {
				if closedByServer(c.c, c.r, time.Minute) == nil {
					closed <- i
				}
			}()
		}
		select {
		case i := <-closed:
			t.Logf("idle connection %d was closed", i)
		case <-time.After(10 * time.Second):
			t.Error("no idle connection was closed for the new client")
		}
		for _, c := range conns {
			c.c.Close()
		}
	})

	t.Run("connections that are not idle are not closed; a new client waits", func(t *testing.T) {
		// Connected, no request yet: not idle, so never closed for room.
		var held []net.Conn
		for range cfg.MaxConnections {
			held = append(held, dialRaw(t, r.addr, ""))
		}
		// The kernel hands connections over in order: the client below is
		// accepted after all of these, once the subtest before has freed
		// its slots.
		done := make(chan error, 1)
		go func() { done <- healthz(r.url()) }()
		select {
		case err := <-done:
			t.Fatalf("a client beyond the bound was served at once (%v): the bound does not hold", err)
		case <-time.After(500 * time.Millisecond):
		}
		held[0].Close()
		if err := <-done; err != nil {
			t.Fatalf("the waiting client after a slot freed: %v", err)
		}
	})
}

// A streaming response, and a slow upstream answering late, outlive the
// read and idle timeouts; and the client going away still cancels the
// upstream after the read deadline has passed.
func TestRunLongResponsesOutliveTheTimeouts(t *testing.T) {
	cancelled := make(chan struct{}, 8)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch {
		case strings.Contains(string(body), `"stream":true`):
			w.Header().Set("Content-Type", "text/event-stream")
			fl := w.(http.Flusher)
			endless := strings.Contains(string(body), "endless")
			for i := 0; endless || i < 20; i++ {
				fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"tick%d \"}}]}\n\n", i)
				fl.Flush()
				select {
				case <-r.Context().Done():
					cancelled <- struct{}{}
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
			io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":20,\"total_tokens\":21}}\n\ndata: [DONE]\n\n")
		default:
			time.Sleep(2 * time.Second) // longer than the read and idle timeouts
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1700000000,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"late"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
		}
	}))
	defer up.Close()

	cfg := runConfig(t, t.TempDir())
	cfg.AdminKey = "sb_" + strings.Repeat("Stream1", 6)
	cfg.ReadHeaderTimeout = config.Duration(500 * time.Millisecond)
	cfg.ReadTimeout = config.Duration(500 * time.Millisecond)
	cfg.IdleTimeout = config.Duration(500 * time.Millisecond)
	cfg.Providers = []config.Provider{{Name: "up", Type: "openai", BaseURL: up.URL + "/v1", Timeout: config.Duration(30 * time.Second),
		Models: []config.Model{{Name: "m", Capabilities: []string{"chat"}, MaxTokens: 1000}}}}
	r := startRun(t, cfg)

	post := func(ctx context.Context, path, body string) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, r.url()+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+cfg.AdminKey)
		req.Header.Set("Content-Type", "application/json")
		return http.DefaultClient.Do(req)
	}
	for _, tc := range []struct {
		name, path, body, want string
	}{
		{"native stream of 2s", "/v1/chat", `{"model":"up/m","messages":[{"role":"user","content":"count"}],"stream":true}`, "event: done"},
		{"OpenAI-compatible stream of 2s", "/openai/v1/chat/completions", `{"model":"up/m","messages":[{"role":"user","content":"count"}],"stream":true}`, "data: [DONE]"},
		{"upstream answering after 2s", "/v1/chat", `{"model":"up/m","messages":[{"role":"user","content":"wait"}]}`, `"late"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := post(context.Background(), tc.path, tc.body)
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(res.Body)
			res.Body.Close()
			if err != nil || res.StatusCode != http.StatusOK || !strings.Contains(string(b), tc.want) {
				t.Fatalf("= %d %v, want 200 and %q:\n%s", res.StatusCode, err, tc.want, b)
			}
			if strings.Contains(tc.body, "count") && !strings.Contains(string(b), "tick19") {
				t.Errorf("the stream was cut:\n%s", b)
			}
		})
	}

	t.Run("client going away after the read timeout cancels the upstream", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		res, err := post(ctx, "/v1/chat", `{"model":"up/m","messages":[{"role":"user","content":"endless"}],"stream":true}`)
		if err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(res.Body)
		for deadline := time.Now().Add(1500 * time.Millisecond); time.Now().Before(deadline); { // past the 500ms read timeout
			if _, err := br.ReadString('\n'); err != nil {
				t.Fatalf("the stream ended early: %v", err)
			}
		}
		cancel()
		res.Body.Close()
		select {
		case <-cancelled:
		case <-time.After(10 * time.Second):
			t.Fatal("the upstream request was not cancelled after the client went away")
		}
	})
}
