// Package redistest runs real Redis servers for tests: Debian's
// redis-server, started as a child process on a free loopback port with no
// persistence, one per test.
//
//	srv := redistest.New(t)   // srv.URL() is redis://127.0.0.1:PORT/0
//	srv.Stop(); srv.Start()   // an outage, then recovery on the same port
//
// A missing redis-server fails the test with the command that installs it.
package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Server is one running redis-server.
type Server struct {
	bin  string
	dir  string
	port int

	mu     sync.Mutex
	proc   *os.Process
	exited chan struct{}
}

// New starts a redis-server for tb, stopped when tb ends.
func New(tb testing.TB) *Server {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		tb.Fatalf("redistest: redis-server not found: install it with `apt-get install redis-server` (.ci/run does)")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	s := &Server{bin: bin, dir: tb.TempDir(), port: port}
	if err := s.Start(); err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	tb.Cleanup(func() { _ = s.Stop() })
	return s
}

// URL is the server's redis:// URL (database 0).
func (s *Server) URL() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", s.port) }

// Addr is the server's host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// Start starts a stopped server on the same port (empty: no persistence).
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		return nil
	}
	cmd := exec.Command(s.bin, "--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir, "--protected-mode", "no",
		"--loglevel", "warning", "--logfile", s.dir+"/redis.log")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	exited := make(chan struct{})
	go func() { _, _ = cmd.Process.Wait(); close(exited) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if ping(s.Addr()) == nil {
			break
		}
		select {
		case <-exited:
			b, _ := os.ReadFile(s.dir + "/redis.log")
			return fmt.Errorf("redis-server exited at start: %s", b)
		default:
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			return errors.New("redis-server did not answer PING within 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.proc, s.exited = cmd.Process, exited
	return nil
}

// Stop stops the server (its data is lost: there is no persistence).
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return nil
	}
	_ = s.proc.Kill()
	<-s.exited
	s.proc = nil
	return nil
}

// ping sends a RESP PING and expects +PONG.
func ping(addr string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	buf := make([]byte, 7)
	n, err := c.Read(buf)
	if err != nil {
		return err
	}
	if string(buf[:n]) != "+PONG\r\n" {
		return fmt.Errorf("unexpected reply %q", buf[:n])
	}
	return nil
}
