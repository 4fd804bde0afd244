package llm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func readAll(t testing.TB, r io.Reader, max int) ([]Event, error) {
	t.Helper()
	sr := NewSSEReader(r, max)
	var out []Event
	for {
		ev, err := sr.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		ev.Data = bytes.Clone(ev.Data) // valid until the next call only
		out = append(out, ev)
	}
}

func TestSSEReader(t *testing.T) {
	tests := []struct {
		name  string
		input string
		want  []Event
	}{
		{"data only", "data: hello\n\n", []Event{{Data: []byte("hello")}}},
		{"named event", "event: delta\ndata: {}\n\n", []Event{{Name: "delta", Data: []byte("{}")}}},
		{"multi-line data joined with LF", "data: a\ndata: b\ndata:\n\n", []Event{{Data: []byte("a\nb\n")}}},
		{"CRLF", "event: x\r\ndata: 1\r\n\r\ndata: 2\r\n\r\n", []Event{{Name: "x", Data: []byte("1")}, {Data: []byte("2")}}},
		{"lone CR", "data: 1\r\rdata: 2\r\r", []Event{{Data: []byte("1")}, {Data: []byte("2")}}},
		{"comments and unknown fields ignored", ": ping\nfoo: bar\ndata: x\n\n", []Event{{Data: []byte("x")}}},
		{"only one space stripped", "data:  two\n\ndata:none\n\n", []Event{{Data: []byte(" two")}, {Data: []byte("none")}}},
		{"field without colon", "data\n\n", []Event{{Data: []byte("")}}},
		{"event without data is not dispatched", "event: ping\n\ndata: y\n\n", []Event{{Data: []byte("y")}}},
		{"leading BOM", "\xEF\xBB\xBFdata: bom\n\n", []Event{{Data: []byte("bom")}}},
		{"id remembered", "id: 7\ndata: a\n\ndata: b\n\n", []Event{{Data: []byte("a"), ID: "7"}, {Data: []byte("b"), ID: "7"}}},
		{"unterminated event discarded", "data: a\n\ndata: cut", []Event{{Data: []byte("a")}}},
		{"colon in value", "data: {\"a\": 1}\n\n", []Event{{Data: []byte(`{"a": 1}`)}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, r := range []io.Reader{strings.NewReader(tc.input), iotest.OneByteReader(strings.NewReader(tc.input))} {
				got, err := readAll(t, r, 0)
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != len(tc.want) {
					t.Fatalf("got %q, want %q", got, tc.want)
				}
				for i := range got {
					if got[i].Name != tc.want[i].Name || !bytes.Equal(got[i].Data, tc.want[i].Data) || got[i].ID != tc.want[i].ID {
						t.Errorf("event %d = %+v, want %+v", i, got[i], tc.want[i])
					}
				}
			}
		})
	}
}

func TestSSEReaderLimits(t *testing.T) {
	long := "data: " + strings.Repeat("x", 200) + "\n\n"
	if _, err := readAll(t, strings.NewReader(long), 100); !errors.Is(err, ErrEventTooLarge) {
		t.Errorf("long line: %v", err)
	}
	many := strings.Repeat("data: "+strings.Repeat("y", 40)+"\n", 5) + "\n"
	if _, err := readAll(t, strings.NewReader(many), 100); !errors.Is(err, ErrEventTooLarge) {
		t.Errorf("long event: %v", err)
	}
}

// TestSSEReaderReuse reads events of varied sizes one at a time, as a
// stream does: each event's data is right when it is returned, though the
// reader reuses its buffer, and one large event's buffer is not kept.
func TestSSEReaderReuse(t *testing.T) {
	big := strings.Repeat("b", 2*keptEventBytes)
	sizes := []string{"short", strings.Repeat("m", 3000), "x", big, "tail"}
	var in strings.Builder
	for i, d := range sizes {
		fmt.Fprintf(&in, "event: e%d\ndata: %s\n\n", i%2, d)
	}
	sr := NewSSEReader(strings.NewReader(in.String()), 4*keptEventBytes)
	for i, want := range sizes {
		ev, err := sr.Next()
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if string(ev.Data) != want || ev.Name != fmt.Sprintf("e%d", i%2) {
			t.Errorf("event %d = %q (%d bytes) named %q", i, ev.Data[:min(len(ev.Data), 10)], len(ev.Data), ev.Name)
		}
	}
	if _, err := sr.Next(); err != io.EOF {
		t.Fatalf("after the last event: %v", err)
	}
	if cap(sr.data) > keptEventBytes {
		t.Errorf("the reader keeps a %d-byte buffer after a large event", cap(sr.data))
	}
}

func TestAppendEvent(t *testing.T) {
	got := string(AppendEvent(nil, "done", []byte("a\nb\r\nc")))
	if want := "event: done\ndata: a\ndata: b\ndata: c\n\n"; got != want {
		t.Errorf("got %q want %q", got, want)
	}
	if got := string(AppendEvent(nil, "", []byte(`{"x":1}`))); got != "data: {\"x\":1}\n\n" {
		t.Errorf("got %q", got)
	}
}

// FuzzSSEParser feeds arbitrary bytes to the parser: it must not panic or
// hang, every event it returns must survive a round trip through
// AppendEvent, and splitting the input into single bytes must not change
// what it parses.
func FuzzSSEParser(f *testing.F) {
	for _, seed := range []string{
		"data: hello\n\n",
		"event: delta\r\ndata: {\"text\":\"hi\"}\r\n\r\n",
		"data: a\rdata: b\r\r",
		": comment\nid: 1\nretry: 100\ndata\n\n",
		"\xEF\xBB\xBFevent: x\ndata: y\n\ndata: z",
		"data: [DONE]\n\n",
		"event: error\ndata: {\"type\": \"error\", \"error\": {\"type\": \"overloaded_error\"}}\n\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		events, err := readAll(t, bytes.NewReader(in), 1<<16)
		if err != nil {
			if errors.Is(err, ErrEventTooLarge) {
				return
			}
			t.Fatalf("unexpected error %v", err)
		}
		oneByte, err := readAll(t, iotest.OneByteReader(bytes.NewReader(in)), 1<<16)
		if err != nil || len(oneByte) != len(events) {
			t.Fatalf("byte-at-a-time reading differs: %d vs %d events (%v)", len(oneByte), len(events), err)
		}
		for i, ev := range events {
			if !bytes.Equal(ev.Data, oneByte[i].Data) || ev.Name != oneByte[i].Name {
				t.Fatalf("event %d differs when read byte by byte", i)
			}
			if strings.ContainsAny(ev.Name, "\r\n") || bytes.ContainsAny(ev.Data, "\r") {
				t.Fatalf("event %d carries a line break it should not: %+v", i, ev)
			}
			again, err := readAll(t, bytes.NewReader(AppendEvent(nil, ev.Name, ev.Data)), 1<<17)
			if err != nil || len(again) != 1 {
				t.Fatalf("round trip of %+v: %v %v", ev, again, err)
			}
			if !bytes.Equal(again[0].Data, ev.Data) || again[0].Name != ev.Name {
				t.Fatalf("round trip changed %+v into %+v", ev, again[0])
			}
		}
	})
}
