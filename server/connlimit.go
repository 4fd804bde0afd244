package server

import (
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
)

// maxConnections is cfg's bound on open client connections: the value
// configured, else half the process's open-file limit (the other half is
// for upstream connections, the database and the logs), at most
// config.DefaultMaxConnections.
func maxConnections(cfg config.Config) int {
	if cfg.MaxConnections > 0 {
		return cfg.MaxConnections
	}
	n := config.DefaultMaxConnections
	if fds, ok := openFileLimit(); ok && fds/2 < uint64(n) {
		n = max(int(fds/2), 1)
	}
	return n
}

// connLimiter is a listener that keeps at most max client connections
// open. At the bound, a client waiting to be accepted is let in by closing
// the connection idle the longest (a keep-alive connection between two
// requests; its client opens a new one when it needs it, as after the idle
// timeout). Connections in a request, or new ones that have not sent their
// first request yet, are never closed for it: those are bounded by the read
// timeouts. When no connection is idle, the waiting client waits (in the
// kernel's accept queue) until one closes or becomes idle.
//
// The server must report connection states to it (http.Server.ConnState =
// connLimiter.connState).
type connLimiter struct {
	net.Listener
	log   *slog.Logger
	slots chan struct{} // one per open connection
	done  chan struct{} // closed by Close
	// wake is signalled when a connection becomes idle.
	wake      chan struct{}
	closeOnce sync.Once

	mu   sync.Mutex
	idle map[*limitedConn]uint64 // idle connections, in the order they became idle
	seq  uint64

	lastWarn atomic.Int64 // unix nanoseconds of the last "at the bound" warning
}

func newConnLimiter(ln net.Listener, max int, log *slog.Logger) *connLimiter {
	return &connLimiter{
		Listener: ln, log: log,
		slots: make(chan struct{}, max), done: make(chan struct{}), wake: make(chan struct{}, 1),
		idle: map[*limitedConn]uint64{},
	}
}

// Accept accepts a connection first, then waits for a slot: so a slot is
// only made by closing an idle connection when a client is really waiting.
// At most one accepted connection waits beyond the bound.
func (l *connLimiter) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	for warned := false; ; {
		select {
		case l.slots <- struct{}{}:
			return &limitedConn{Conn: c, l: l}, nil
		default:
		}
		if !warned {
			l.warnAtBound()
			warned = true
		}
		if l.closeLongestIdle() {
			continue
		}
		select {
		case l.slots <- struct{}{}:
			return &limitedConn{Conn: c, l: l}, nil
		case <-l.wake:
		case <-l.done:
			c.Close()
			return nil, net.ErrClosed
		}
	}
}

// Close closes the listener and lets a waiting Accept return.
func (l *connLimiter) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// connState tracks which connections are idle (http.Server.ConnState).
func (l *connLimiter) connState(c net.Conn, s http.ConnState) {
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	l.mu.Lock()
	if s == http.StateIdle {
		l.seq++
		l.idle[lc] = l.seq
	} else {
		delete(l.idle, lc)
	}
	l.mu.Unlock()
	if s == http.StateIdle {
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
}

// closeLongestIdle closes the connection idle the longest, freeing its
// slot; false when none is idle.
func (l *connLimiter) closeLongestIdle() bool {
	l.mu.Lock()
	var oldest *limitedConn
	var since uint64
	for c, n := range l.idle {
		if oldest == nil || n < since {
			oldest, since = c, n
		}
	}
	delete(l.idle, oldest)
	l.mu.Unlock()
	if oldest == nil {
		return false
	}
	oldest.Close()
	return true
}

// warnAtBound logs that the bound was reached, at most once a minute.
func (l *connLimiter) warnAtBound() {
	now := time.Now().UnixNano()
	last := l.lastWarn.Load()
	if now-last < int64(time.Minute) || !l.lastWarn.CompareAndSwap(last, now) {
		return
	}
	l.log.Warn("open connections reached maxConnections; closing idle keep-alive connections to let new clients in, or making them wait",
		"maxConnections", cap(l.slots))
}

// limitedConn gives its slot back when closed (once).
type limitedConn struct {
	net.Conn
	l    *connLimiter
	once sync.Once
}

// CloseWrite half-closes a TCP connection: net/http does it before closing
// a connection whose client may still be sending (a refused body), so that
// the client reads the response rather than a reset.
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.idle, c)
		c.l.mu.Unlock()
		<-c.l.slots
	})
	return err
}
