package transform

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// The sandbox parent and its worker processes talk over the worker's
// stdin and stdout with frames (below): one job in, one outcome out,
// strictly in turn. Nothing else is written to the worker's stdout.

// job is one transformation to run.
type job struct {
	// Key identifies the compiled program in the worker's cache (a hash
	// of Name and Script).
	Key string
	// Name labels the program in positions and stack traces.
	Name string
	// Script is the transformation's source (a function body).
	Script string
	// Data is the upstream response body: JSON text when DataJSON, else
	// text handed to the script as a string.
	Data     []byte
	DataJSON bool
	// Status and Headers make up the script's `response` argument.
	Status  int
	Headers map[string]string
	// TimeoutNanos bounds the script's run (and the encoding of its result).
	TimeoutNanos int64
	// MaxOutput caps the JSON encoding of the result, in bytes.
	MaxOutput int64
}

// Outcome kinds reported by a worker.
const (
	outcomeOK      = ""
	outcomeCompile = "compile"
	outcomeThrow   = "throw"
	outcomeTimeout = "timeout"
	outcomeMemory  = "memory"
	outcomeOutput  = "output"
	outcomeDepth   = "depth"
	outcomeStack   = "stack"
	outcomeData    = "data"
	outcomeCrash   = "crash"
)

// outcome is a job's result: the JSON of what the script returned, or why
// it failed and where.
type outcome struct {
	Output  []byte
	Kind    string
	Message string
	// Line and Column locate the failure in the user's script (1-based);
	// 0 when unknown.
	Line   int
	Column int
}

// Frames: a uvarint payload length, then the payload: each field in
// order, strings and byte slices as a uvarint length and the bytes,
// integers as varints, booleans as one byte, maps as a uvarint count and
// key, value pairs. No reflection, no type descriptors: the two ends are
// the same binary.

// maxFrame bounds a frame either end accepts.
const maxFrame = 256 << 20

type frameWriter struct {
	w   *bufio.Writer
	buf []byte
}

func (f *frameWriter) str(s string) {
	f.buf = binary.AppendUvarint(f.buf, uint64(len(s)))
	f.buf = append(f.buf, s...)
}
func (f *frameWriter) bytes(b []byte) {
	f.buf = binary.AppendUvarint(f.buf, uint64(len(b)))
	f.buf = append(f.buf, b...)
}
func (f *frameWriter) int(n int64) { f.buf = binary.AppendVarint(f.buf, n) }
func (f *frameWriter) bool(b bool) {
	if b {
		f.buf = append(f.buf, 1)
	} else {
		f.buf = append(f.buf, 0)
	}
}

// flush writes the payload built so far as one frame.
func (f *frameWriter) flush() error {
	var n [binary.MaxVarintLen64]byte
	if _, err := f.w.Write(n[:binary.PutUvarint(n[:], uint64(len(f.buf)))]); err != nil {
		return err
	}
	if _, err := f.w.Write(f.buf); err != nil {
		return err
	}
	f.buf = f.buf[:0]
	return f.w.Flush()
}

type frameReader struct {
	r   *bufio.Reader
	buf []byte
	p   []byte // the unread rest of the current payload
	err error
}

// next reads one frame's payload.
func (f *frameReader) next() error {
	n, err := binary.ReadUvarint(f.r)
	if err != nil {
		return err
	}
	if n > maxFrame {
		return fmt.Errorf("transform: frame of %d bytes", n)
	}
	if uint64(cap(f.buf)) < n {
		f.buf = make([]byte, n)
	}
	f.buf = f.buf[:n]
	if _, err := io.ReadFull(f.r, f.buf); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	f.p, f.err = f.buf, nil
	return nil
}

var errBadFrame = errors.New("transform: malformed frame")

func (f *frameReader) uvarint() uint64 {
	v, n := binary.Uvarint(f.p)
	if n <= 0 {
		f.err = errBadFrame
		return 0
	}
	f.p = f.p[n:]
	return v
}

func (f *frameReader) bytes() []byte {
	n := f.uvarint()
	if f.err != nil || n > uint64(len(f.p)) {
		f.err = errBadFrame
		return nil
	}
	b := bytes.Clone(f.p[:n])
	f.p = f.p[n:]
	return b
}

func (f *frameReader) str() string { return string(f.bytes()) }

func (f *frameReader) int() int64 {
	v, n := binary.Varint(f.p)
	if n <= 0 {
		f.err = errBadFrame
		return 0
	}
	f.p = f.p[n:]
	return v
}

func (f *frameReader) bool() bool {
	if len(f.p) == 0 {
		f.err = errBadFrame
		return false
	}
	b := f.p[0] == 1
	f.p = f.p[1:]
	return b
}

func writeJob(f *frameWriter, j *job) error {
	f.str(j.Key)
	f.str(j.Name)
	f.str(j.Script)
	f.bytes(j.Data)
	f.bool(j.DataJSON)
	f.int(int64(j.Status))
	f.int(int64(len(j.Headers)))
	for k, v := range j.Headers {
		f.str(k)
		f.str(v)
	}
	f.int(j.TimeoutNanos)
	f.int(j.MaxOutput)
	return f.flush()
}

func readJob(f *frameReader, j *job) error {
	if err := f.next(); err != nil {
		return err
	}
	j.Key, j.Name, j.Script = f.str(), f.str(), f.str()
	j.Data, j.DataJSON, j.Status = f.bytes(), f.bool(), int(f.int())
	n := f.int()
	if n < 0 || n > 1<<16 {
		return errBadFrame
	}
	j.Headers = make(map[string]string, n)
	for range n {
		k := f.str()
		j.Headers[k] = f.str()
	}
	j.TimeoutNanos, j.MaxOutput = f.int(), f.int()
	return f.err
}

func writeOutcome(f *frameWriter, o *outcome) error {
	f.bytes(o.Output)
	f.str(o.Kind)
	f.str(o.Message)
	f.int(int64(o.Line))
	f.int(int64(o.Column))
	return f.flush()
}

func readOutcome(f *frameReader, o *outcome) error {
	if err := f.next(); err != nil {
		return err
	}
	o.Output, o.Kind, o.Message = f.bytes(), f.str(), f.str()
	o.Line, o.Column = int(f.int()), int(f.int())
	return f.err
}
