package llm

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// Event is one server-sent event.
type Event struct {
	// Name is the `event:` field; empty means the default type "message".
	Name string
	// Data is the `data:` lines joined with "\n". An SSEReader reuses it:
	// it is valid until the reader's next call to Next.
	Data []byte
	// ID is the last `id:` field seen on the stream.
	ID string
}

// ErrEventTooLarge is returned by SSEReader.Next for an event or line over its limit.
var ErrEventTooLarge = errors.New("server-sent event exceeds the size limit")

// DefaultMaxEventBytes bounds one upstream event (a line or an event's data).
const DefaultMaxEventBytes = 4 << 20

// initialEventBytes is an SSEReader's first buffer: room for a typical
// chat chunk; it grows for larger events. Small, because a gateway holds
// one per open stream, above the transport's own read buffer.
const initialEventBytes = 1024

// keptEventBytes bounds the data buffer an SSEReader keeps for the next event.
const keptEventBytes = 64 << 10

// SSEReader parses a text/event-stream as the HTML Living Standard says:
// lines end in CRLF, LF or CR; a leading BOM is skipped; lines starting with
// a colon are comments; `field: value` loses one leading space from the
// value; a line without a colon is a field with an empty value; a blank line
// dispatches the event (unless it has no data); data left without a blank
// line at the end of the stream is discarded.
type SSEReader struct {
	sc      *bufio.Scanner
	max     int
	lastID  string
	started bool
	data    []byte // the data of the event being read; reused
	name    string // the last event name read, reused while it repeats
}

// NewSSEReader reads events from r; maxBytes bounds a line and an event's
// data (DefaultMaxEventBytes when 0).
func NewSSEReader(r io.Reader, maxBytes int) *SSEReader {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxEventBytes
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, initialEventBytes), maxBytes+2)
	sc.Split(splitSSELines)
	return &SSEReader{sc: sc, max: maxBytes}
}

// splitSSELines splits on CRLF, LF or a lone CR.
func splitSSELines(data []byte, atEOF bool) (int, []byte, error) {
	i := bytes.IndexAny(data, "\r\n")
	if i < 0 {
		if atEOF && len(data) > 0 {
			return len(data), data, nil
		}
		return 0, nil, nil
	}
	if data[i] == '\n' {
		return i + 1, data[:i], nil
	}
	// A CR: part of CRLF when an LF follows; at the end of the buffer we
	// need one more byte to know.
	if i+1 < len(data) {
		if data[i+1] == '\n' {
			return i + 2, data[:i], nil
		}
		return i + 1, data[:i], nil
	}
	if atEOF {
		return i + 1, data[:i], nil
	}
	return 0, nil, nil
}

var bom = []byte{0xEF, 0xBB, 0xBF}

// Next returns the next event, or io.EOF at the end of the stream. The
// event's Data is valid until the next call.
func (s *SSEReader) Next() (Event, error) {
	if cap(s.data) > keptEventBytes {
		s.data = nil // one large event: do not hold its buffer for the stream's life
	}
	var (
		name    string
		data    = s.data[:0]
		hasData bool
	)
	for s.sc.Scan() {
		line := s.sc.Bytes()
		if !s.started {
			s.started = true
			line = bytes.TrimPrefix(line, bom)
		}
		if len(line) == 0 {
			if !hasData {
				name = ""
				continue
			}
			s.data = data
			if n := len(data); n > 0 && data[n-1] == '\n' {
				data = data[:n-1]
			}
			return Event{Name: name, Data: data, ID: s.lastID}, nil
		}
		if line[0] == ':' {
			continue
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "event":
			if string(value) != s.name {
				s.name = string(value)
			}
			name = s.name
		case "data":
			if len(data)+len(value)+1 > s.max {
				return Event{}, ErrEventTooLarge
			}
			data = append(data, value...)
			data = append(data, '\n')
			hasData = true
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				s.lastID = string(value)
			}
		}
	}
	if err := s.sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return Event{}, ErrEventTooLarge
		}
		return Event{}, err
	}
	return Event{}, io.EOF
}

// AppendEvent appends ev in text/event-stream form to dst: an `event:` line
// when Name is set, one `data:` line per line of Data, then a blank line.
// Name must not contain CR or LF.
func AppendEvent(dst []byte, name string, data []byte) []byte {
	if name != "" {
		dst = append(dst, "event: "...)
		dst = append(dst, name...)
		dst = append(dst, '\n')
	}
	for {
		i := bytes.IndexAny(data, "\r\n")
		if i < 0 {
			break
		}
		dst = append(dst, "data: "...)
		dst = append(dst, data[:i]...)
		dst = append(dst, '\n')
		if data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n' {
			i++
		}
		data = data[i+1:]
	}
	dst = append(dst, "data: "...)
	dst = append(dst, data...)
	return append(dst, '\n', '\n')
}
