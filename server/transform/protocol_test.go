package transform

import (
	"bufio"
	"bytes"
	"reflect"
	"testing"
)

func TestFramesRoundTrip(t *testing.T) {
	var pipe bytes.Buffer
	w := &frameWriter{w: bufio.NewWriter(&pipe)}
	jobs := []job{
		{Key: "k", Name: "weather.forecast", Script: "return data", Data: []byte(`{"a":1}`), DataJSON: true, Status: 200,
			Headers: map[string]string{"content-type": "application/json", "x-é": "ü"}, TimeoutNanos: 1e8, MaxOutput: 1 << 20},
		{Headers: map[string]string{}, Status: -1, TimeoutNanos: -5},
	}
	outs := []outcome{{Output: []byte(`{"x":true}`)}, {Kind: outcomeThrow, Message: "TypeError: x", Line: 3, Column: 14}}
	for i := range jobs {
		if err := writeJob(w, &jobs[i]); err != nil {
			t.Fatal(err)
		}
		if err := writeOutcome(w, &outs[i]); err != nil {
			t.Fatal(err)
		}
	}
	r := &frameReader{r: bufio.NewReader(&pipe)}
	for i := range jobs {
		var j job
		var o outcome
		if err := readJob(r, &j); err != nil {
			t.Fatal(err)
		}
		if err := readOutcome(r, &o); err != nil {
			t.Fatal(err)
		}
		if jobs[i].Data == nil {
			jobs[i].Data = []byte{}
		}
		if !reflect.DeepEqual(j, jobs[i]) {
			t.Errorf("job %d: %+v, want %+v", i, j, jobs[i])
		}
		if outs[i].Output == nil {
			outs[i].Output = []byte{}
		}
		if !reflect.DeepEqual(o, outs[i]) {
			t.Errorf("outcome %d: %+v, want %+v", i, o, outs[i])
		}
	}
	// A truncated frame is an error, not a panic.
	var cut bytes.Buffer
	_ = writeJob(&frameWriter{w: bufio.NewWriter(&cut)}, &jobs[0])
	var j job
	if err := readJob(&frameReader{r: bufio.NewReader(bytes.NewReader(cut.Bytes()[:cut.Len()-3]))}, &j); err == nil {
		t.Fatal("a truncated frame was accepted")
	}
}
