package transform

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
)

// Sandbox defaults (config `connectors.transform*`).
const (
	DefaultTimeout        = 100 * time.Millisecond
	DefaultMaxOutputBytes = 1 << 20
	DefaultMaxMemoryBytes = 64 << 20
)

// Options configure a Sandbox; zero values take the defaults.
type Options struct {
	// Timeout is a script's wall-clock limit (connectors.transformTimeout).
	Timeout time.Duration
	// MaxOutputBytes caps the JSON of a script's result
	// (connectors.transformMaxOutputBytes).
	MaxOutputBytes int64
	// MaxMemoryBytes is how much memory a worker may grow by while running
	// scripts (connectors.transformMaxMemoryBytes).
	MaxMemoryBytes int64
	// Workers is how many worker processes may run at once (default: the
	// number of CPUs, at most 4).
	Workers int
	// Logger receives a warning when a worker dies; never script data.
	Logger *slog.Logger
}

// Sandbox runs transformations in a pool of worker processes.
//
// Each worker is this executable started again (see workerArg), running
// scripts with goja one at a time, each on a runtime of its own that has
// no require, no network, no files, no timers and no host objects: only
// the ECMAScript built-ins, `data` and `response`. A runtime serves one
// call and is never reused, so nothing a script leaves behind reaches
// another call — another connection's data least of all. Memory is contained twice: the worker's watchdog samples
// the heap every millisecond and interrupts a script past
// MaxMemoryBytes (failing it with its line), and the kernel caps the
// worker (RLIMIT_DATA, plus RLIMIT_AS against absurd single allocations,
// on Linux) so that what the watchdog cannot see coming —
// `'x'.repeat(1e9)` inside one built-in call — ends the worker and fails
// that call only, while the server's memory stays untouched. A script
// that runs too long is interrupted at Timeout; one stuck in a long
// built-in call is killed with its worker, and a worker that stopped a
// script at the memory limit is retired. Dead workers are replaced on
// the next call. Compiled programs are cached in each worker, keyed by a
// hash of the action's name and script (so per action version). The
// caller waits for an outcome by polling briefly before it parks (see
// spinReader): the hand-over costs tens of microseconds, not a wake-up.
type Sandbox struct {
	opts  Options
	exe   string
	idle  chan *worker
	slots chan struct{}

	mu     sync.Mutex
	closed bool
	all    map[*worker]struct{}
}

// NewSandbox returns a sandbox; workers start on first use.
func NewSandbox(o Options) (*Sandbox, error) {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxOutputBytes <= 0 {
		o.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if o.MaxMemoryBytes <= 0 {
		o.MaxMemoryBytes = DefaultMaxMemoryBytes
	}
	if o.Workers <= 0 {
		o.Workers = min(runtime.NumCPU(), 4)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	exe, err := selfExecutable()
	if err != nil {
		return nil, fmt.Errorf("transform: locating the executable for sandbox workers: %w", err)
	}
	return &Sandbox{
		opts:  o,
		exe:   exe,
		idle:  make(chan *worker, o.Workers),
		slots: make(chan struct{}, o.Workers),
		all:   map[*worker]struct{}{},
	}, nil
}

// Options returns the sandbox's effective options.
func (s *Sandbox) Options() Options { return s.opts }

// Input is one transformation call.
type Input struct {
	// Name labels the script in positions (e.g. "weather.forecast").
	Name string
	// Script is the transformation: the body of a function of (data, response).
	Script string
	// Data is the upstream body: JSON text when DataJSON, else text.
	Data     []byte
	DataJSON bool
	// Status and Headers (lower-case names) form `response`.
	Status  int
	Headers map[string]string
}

// Run runs in.Script and returns the JSON of its result. Failures of the
// script are errs.TransformationFailed errors whose message says what went
// wrong and at which line (details: line, column); a cancelled ctx ends
// the call (and its worker).
func (s *Sandbox) Run(ctx context.Context, in Input) (json.RawMessage, error) {
	j := &job{
		Key: programKey(in.Name, in.Script), Name: in.Name, Script: in.Script,
		Data: in.Data, DataJSON: in.DataJSON, Status: in.Status, Headers: in.Headers,
		TimeoutNanos: int64(s.opts.Timeout), MaxOutput: s.opts.MaxOutputBytes,
	}
	// The worker interrupts the script itself at Timeout; the backstop
	// covers a script stuck inside one long built-in call, plus the time
	// to hand the response over (bounded by the response size cap).
	backstop := s.opts.Timeout + time.Second + time.Duration(len(in.Data)>>20)*100*time.Millisecond

	w, err := s.acquire(ctx)
	if err != nil {
		return nil, err
	}
	out, err := w.call(ctx, j, backstop)
	if err == nil && out.Kind == outcomeMemory {
		// A worker that held a runaway script keeps its address space
		// reserved near the kernel's limit: a fresh one takes its place.
		s.drop(w)
	} else {
		s.release(w)
	}
	if err != nil {
		return nil, s.workerFailure(ctx, w, err)
	}
	if out.Kind == outcomeOK {
		return out.Output, nil
	}
	return nil, s.scriptFailure(in.Name, out)
}

func (s *Sandbox) scriptFailure(name string, out outcome) error {
	where := ""
	details := map[string]any{}
	if out.Line > 0 {
		where = fmt.Sprintf(" at line %d, column %d", out.Line, out.Column)
		details["line"], details["column"] = out.Line, out.Column
	}
	var msg string
	switch out.Kind {
	case outcomeCompile:
		msg = fmt.Sprintf("transformation %s does not compile%s: %s", name, where, out.Message)
	case outcomeTimeout:
		msg = fmt.Sprintf("transformation %s exceeded its time limit of %s (connectors.transformTimeout)%s", name, s.opts.Timeout, where)
		details["limitMs"] = s.opts.Timeout.Milliseconds()
	case outcomeMemory:
		msg = fmt.Sprintf("transformation %s exceeded its memory limit of %s (connectors.transformMaxMemoryBytes)%s", name, mib(s.opts.MaxMemoryBytes), where)
		details["limitBytes"] = s.opts.MaxMemoryBytes
	case outcomeOutput:
		msg = fmt.Sprintf("transformation %s returned too much: %s (connectors.transformMaxOutputBytes)", name, out.Message)
		details["limitBytes"] = s.opts.MaxOutputBytes
	case outcomeDepth:
		msg = fmt.Sprintf("transformation %s returned a result that nests deeper than %d levels, the limit for a result; return a flatter value", name, MaxResultDepth)
		details["limitDepth"] = MaxResultDepth
	case outcomeData:
		msg = fmt.Sprintf("transformation %s could not be given the response: %s", name, out.Message)
	default:
		msg = fmt.Sprintf("transformation %s failed%s: %s", name, where, out.Message)
	}
	if len(details) == 0 {
		details = nil
	}
	return errs.E(errs.TransformationFailed, "%s", msg).WithDetails(details)
}

// errWorkerTimeout and errWorkerDied say why a call got no outcome.
var (
	errWorkerTimeout = errors.New("worker did not answer in time")
	errWorkerDied    = errors.New("worker exited")
)

func (s *Sandbox) workerFailure(ctx context.Context, w *worker, err error) error {
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, errWorkerTimeout):
		return errs.E(errs.TransformationFailed, "transformation exceeded its time limit of %s (connectors.transformTimeout) and was stopped", s.opts.Timeout).
			WithDetails(map[string]any{"limitMs": s.opts.Timeout.Milliseconds()})
	case errors.Is(err, errWorkerDied):
		tail := w.stderr.String()
		switch {
		case outOfMemory(tail):
			return errs.E(errs.TransformationFailed, "transformation exceeded its memory limit of %s (connectors.transformMaxMemoryBytes) and was stopped", mib(s.opts.MaxMemoryBytes)).
				WithDetails(map[string]any{"limitBytes": s.opts.MaxMemoryBytes})
		case strings.Contains(tail, "stack exceeds") || strings.Contains(tail, "stack overflow"):
			return errs.E(errs.TransformationFailed, "transformation exceeded the maximum call stack size and was stopped")
		}
		s.opts.Logger.Warn("transformation worker exited unexpectedly", "exit", w.exitErr(), "stderr", firstLine(tail))
		return errs.E(errs.TransformationFailed, "transformation's sandbox process ended unexpectedly")
	}
	return errs.Wrap(errs.Internal, err, "transformation sandbox unavailable")
}

// outOfMemory reads a dead worker's stderr: did it run out of memory?
// Besides the runtime's own "out of memory" verdict, a fatal
// "SIGSEGV: segmentation violation" counts: a worker runs only the Go
// runtime, goja and this package, whose nil dereferences are recoverable
// panics ("invalid memory address"), never fatal signals; a fatal fault
// comes from inside the runtime, which under the kernel's memory limit
// means a refused mapping it did not check (Go 1.26 allocates GC work
// queues with sysAlloc and uses the result unchecked).
func outOfMemory(stderr string) bool {
	return strings.Contains(stderr, "out of memory") ||
		strings.Contains(stderr, "cannot allocate memory") ||
		strings.HasPrefix(strings.TrimSpace(stderr), "SIGSEGV: segmentation violation")
}

func mib(n int64) string {
	if n%(1<<20) == 0 {
		return strconv.FormatInt(n>>20, 10) + " MiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

func (s *Sandbox) acquire(ctx context.Context) (*worker, error) {
	for {
		var w *worker
		select {
		case w = <-s.idle:
		default:
			select {
			case w = <-s.idle:
			case s.slots <- struct{}{}:
				nw, err := s.spawn()
				if err != nil {
					<-s.slots
					return nil, errs.Wrap(errs.Internal, err, "transformation sandbox unavailable")
				}
				return nw, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if w.alive() {
			return w, nil
		}
		s.drop(w)
	}
}

func (s *Sandbox) release(w *worker) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed || !w.alive() {
		s.drop(w)
		return
	}
	s.idle <- w
}

func (s *Sandbox) drop(w *worker) {
	w.stop()
	s.mu.Lock()
	delete(s.all, w)
	s.mu.Unlock()
	<-s.slots
}

// Close stops the idle workers; busy ones stop when their call ends.
func (s *Sandbox) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	for {
		select {
		case w := <-s.idle:
			s.drop(w)
		default:
			return nil
		}
	}
}

// Workers reports how many worker processes are running.
func (s *Sandbox) Workers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.all)
}

func (s *Sandbox) spawn() (*worker, error) {
	cmd := exec.Command(s.exe, workerArg)
	// A minimal environment: a worker needs nothing of the server's (and
	// must not hold its master key or provider credentials).
	cmd.Env = []string{
		workerEnv + "=1",
		workerMemEnv + "=" + strconv.FormatInt(s.opts.MaxMemoryBytes, 10),
		"GOTRACEBACK=none",
	}
	w := &worker{cmd: cmd, exited: make(chan struct{})}
	cmd.Stderr = &w.stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	out, ok := stdout.(*os.File)
	if !ok {
		return nil, errors.New("transform: worker stdout is not a pipe")
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	w.stdin, w.stdout = stdin, out
	w.out = &frameWriter{w: bufio.NewWriter(stdin)}
	rc, err := out.SyscallConn()
	if err != nil {
		_ = cmd.Process.Kill()
		return nil, err
	}
	w.in = &frameReader{r: bufio.NewReader(&spinReader{f: out, rc: rc, spinFor: outcomeSpin})}
	go func() {
		w.waitErr = cmd.Wait()
		close(w.exited)
	}()
	s.mu.Lock()
	s.all[w] = struct{}{}
	s.mu.Unlock()
	return w, nil
}

// worker is the parent's handle on one worker process. It is used by one
// call at a time, which writes the job and reads the outcome itself (no
// goroutine hand-off on the request path).
type worker struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	stdout  *os.File
	out     *frameWriter
	in      *frameReader
	exited  chan struct{} // closed once the process has exited and been reaped
	stderr  stderrBuffer
	waitErr error
	stopped atomic.Bool
}

func (w *worker) alive() bool {
	select {
	case <-w.exited:
		return false
	default:
		return !w.stopped.Load()
	}
}

func (w *worker) exitErr() string {
	if w.waitErr == nil {
		return "exit status 0"
	}
	return w.waitErr.Error()
}

func (w *worker) call(ctx context.Context, j *job, backstop time.Duration) (outcome, error) {
	if err := writeJob(w.out, j); err != nil {
		w.kill()
		return outcome{}, errWorkerDied
	}
	_ = w.stdout.SetReadDeadline(time.Now().Add(backstop))
	cancelled := context.AfterFunc(ctx, func() { _ = w.cmd.Process.Kill() })
	var o outcome
	err := readOutcome(w.in, &o)
	if !cancelled() {
		w.kill()
		return outcome{}, ctx.Err()
	}
	switch {
	case err == nil:
		return o, nil
	case errors.Is(err, os.ErrDeadlineExceeded):
		w.kill()
		return outcome{}, errWorkerTimeout
	}
	// The process ended (or wrote garbage): wait for it, so that its
	// stderr is complete.
	w.stopped.Store(true)
	select {
	case <-w.exited:
	case <-time.After(time.Second):
		w.kill()
	}
	return outcome{}, errWorkerDied
}

// kill ends the process at once and waits until it is gone.
func (w *worker) kill() {
	w.stopped.Store(true)
	_ = w.cmd.Process.Kill()
	<-w.exited
}

// stop asks the process to exit (end of input) and kills it if it lingers.
func (w *worker) stop() {
	if w.stopped.Swap(true) {
		_ = w.cmd.Process.Kill()
		<-w.exited
		return
	}
	_ = w.stdin.Close()
	select {
	case <-w.exited:
	case <-time.After(2 * time.Second):
		_ = w.cmd.Process.Kill()
		<-w.exited
	}
}

// stderrBuffer keeps the first and the last KiBs written to it (a
// worker's stderr: a fatal error's reason comes first, then stacks).
type stderrBuffer struct {
	mu   sync.Mutex
	head []byte
	tail []byte
}

const stderrKeep = 2 << 10

func (t *stderrBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	if room := stderrKeep - len(t.head); room > 0 {
		k := min(room, len(p))
		t.head = append(t.head, p[:k]...)
		p = p[k:]
	}
	t.tail = append(t.tail, p...)
	if len(t.tail) > stderrKeep {
		t.tail = bytes.Clone(t.tail[len(t.tail)-stderrKeep:])
	}
	return n, nil
}

func (t *stderrBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.head) + "\n" + string(t.tail)
}

// firstLine is the first non-empty line of s.
func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return l
		}
	}
	return ""
}

// outcomeSpin is how long a call polls for its outcome before it parks.
const outcomeSpin = 200 * time.Microsecond

// spinReader reads a worker's stdout. A read first polls the pipe without
// blocking, yielding the processor between polls, for up to spinFor: a
// transformation's outcome usually arrives within tens of microseconds,
// and parking the goroutine on the poller costs about as much again in
// wake-up latency (on virtual machines, an idle vCPU takes tens of
// microseconds to wake). Polling yields to every other runnable goroutine,
// so it only uses time the processor would otherwise idle. Past spinFor,
// and for deadlines and errors, it reads as the file does.
type spinReader struct {
	f       *os.File
	rc      syscall.RawConn
	spinFor time.Duration
}

func (r *spinReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var start time.Time
	for {
		var (
			n     int
			rerr  error
			ready bool
		)
		err := r.rc.Read(func(fd uintptr) bool {
			n, rerr = syscall.Read(int(fd), p)
			ready = rerr != syscall.EAGAIN
			return true // never park here: the loop decides
		})
		switch {
		case err != nil: // deadline passed or file closed: let the file say so
			return r.f.Read(p)
		case ready && rerr != nil:
			return 0, &os.PathError{Op: "read", Path: r.f.Name(), Err: rerr}
		case ready && n == 0:
			return 0, io.EOF
		case ready:
			return n, nil
		}
		if start.IsZero() {
			start = time.Now()
		} else if time.Since(start) >= r.spinFor {
			return r.f.Read(p)
		}
		runtime.Gosched()
	}
}
