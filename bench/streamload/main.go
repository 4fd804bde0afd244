// Command streamload is the load generator of bench/stream.sh: it opens
// -streams streaming chat completions (POST .../chat/completions with
// "stream": true) against one URL, their starts spread evenly over -ramp,
// and measures each one's time to first token: from sending the request
// to reading the first chunk whose delta carries content. Every stream is
// checked to the end: status 200, an event stream, -chunks content chunks,
// a finish reason, a usage chunk and [DONE]; what went wrong is counted by
// reason. With -pid it samples that process's resident memory (VmRSS in
// /proc/<pid>/status) while the streams are open, and reads its peak
// (VmHWM) at the end. -warmup waves run first and are not counted (they
// open the connections the measured wave reuses, as a long-running client
// would). With -pprof, when every stream of the measured wave is open it
// saves that server's heap profile and goroutine dump (a server built
// with -tags pprof). It prints one JSON object (see result) on stdout.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// result is what streamload prints: one measured wave.
type result struct {
	URL     string `json:"url"`
	Streams int    `json:"streams"`
	// OK counts the streams that passed every check.
	OK int `json:"ok"`
	// Failures counts the other streams by what went wrong.
	Failures map[string]int `json:"failures"`
	// PeakOpen is the most streams open at once, as the client saw them.
	PeakOpen int64 `json:"peakOpen"`
	// TTFT is the time to the first content chunk, over the streams that
	// received one.
	TTFT quantiles `json:"ttftMs"`
	// Duration is a whole stream's time, request to [DONE].
	Duration quantiles `json:"durationMs"`
	// MaxGap is each stream's longest wait between two content chunks.
	MaxGap quantiles `json:"maxGapMs"`
	// RSSPeakKB is the highest VmRSS sampled during the wave (-pid), and
	// OpenAtRSSPeak how many streams were open at that sample.
	RSSPeakKB     int64 `json:"rssPeakKB"`
	OpenAtRSSPeak int64 `json:"openAtRssPeak"`
	RSSSamples    int   `json:"rssSamples"`
	// RSSAllOpenKB is the highest VmRSS sampled while all the wave's
	// streams were open, and AllOpenSamples how many samples that was.
	RSSAllOpenKB   int64 `json:"rssAllOpenKB"`
	AllOpenSamples int   `json:"allOpenSamples"`
	// RSSBeforeKB is VmRSS at the wave's start (the first sample).
	RSSBeforeKB int64 `json:"rssBeforeKB"`
	// HWMKB is the process's VmHWM after the wave: its peak RSS since it
	// started.
	HWMKB int64 `json:"hwmKB"`
	// WallMs is the wave's time, first start to last end.
	WallMs float64 `json:"wallMs"`
	// CPUMs is the CPU time (user+system) -pid spent during the wave.
	CPUMs float64 `json:"cpuMs"`
}

// quantiles of a sample, in milliseconds.
type quantiles struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// quantilesOf returns the nearest-rank quantiles of ds (which it sorts).
func quantilesOf(ds []time.Duration) quantiles {
	if len(ds) == 0 {
		return quantiles{}
	}
	slices.Sort(ds)
	at := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(ds)))) - 1
		return float64(ds[max(i, 0)]) / 1e6
	}
	return quantiles{N: len(ds), P50: at(0.50), P90: at(0.90), P99: at(0.99), Max: float64(ds[len(ds)-1]) / 1e6}
}

// outcome is one stream's measurement; Err is empty when it passed.
type outcome struct {
	TTFT     time.Duration // 0 when no content arrived
	Duration time.Duration
	MaxGap   time.Duration
	Err      string
}

// chunk is the part of a chat.completion.chunk the checks read.
type chunk struct {
	Object  string `json:"object"`
	Choices []struct {
		Delta struct {
			Content *string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// streamer runs streams against one URL.
type streamer struct {
	client *http.Client
	url    string
	key    string
	body   []byte
	chunks int // content chunks every stream must carry
	// timeout bounds one stream, request to end.
	timeout time.Duration
}

// run makes one streaming request and checks the stream to its end.
func (s *streamer) run(ctx context.Context) (o outcome) {
	start := time.Now()
	defer func() { o.Duration = time.Since(start) }()
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(s.body))
	if err != nil {
		return outcome{Err: "request: " + err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	if s.key != "" {
		req.Header.Set("Authorization", "Bearer "+s.key)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return outcome{Err: "connect: " + shortErr(err)}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		return outcome{Err: fmt.Sprintf("status %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))}
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		return outcome{Err: "content type " + ct + ", not text/event-stream"}
	}
	o, err = s.read(resp.Body, start)
	if err != nil {
		o.Err = err.Error()
	}
	return o
}

// read reads an OpenAI chat completion stream from r, sent at start,
// checking it as it goes.
func (s *streamer) read(r io.Reader, start time.Time) (outcome, error) {
	var (
		o              outcome
		contents       int
		last           time.Time
		finish, usage  bool
		done           bool
		completionToks int
	)
	br := bufio.NewReaderSize(r, 16<<10)
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			return o, errors.New("an event line longer than 16 KiB")
		}
		if err == io.EOF && len(line) == 0 {
			break
		}
		if err != nil && err != io.EOF {
			return o, fmt.Errorf("read after %d content chunks: %s", contents, shortErr(err))
		}
		line = bytes.TrimRight(line, "\r\n")
		data, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue // blank lines end events; comments and other fields are not checked
		}
		data = bytes.TrimPrefix(data, []byte(" "))
		if done {
			return o, errors.New("data after [DONE]")
		}
		if string(data) == "[DONE]" {
			done = true
			continue
		}
		var c chunk
		if err := json.Unmarshal(data, &c); err != nil {
			return o, fmt.Errorf("a chunk that is not JSON: %v", err)
		}
		if len(c.Error) > 0 && string(c.Error) != "null" {
			return o, fmt.Errorf("an error event: %.200s", c.Error)
		}
		if c.Object != "chat.completion.chunk" {
			return o, fmt.Errorf("object %q, not chat.completion.chunk", c.Object)
		}
		if c.Usage != nil {
			usage, completionToks = true, c.Usage.CompletionTokens
		}
		for _, ch := range c.Choices {
			if ch.Delta.Content != nil && *ch.Delta.Content != "" {
				now := time.Now()
				if contents == 0 {
					o.TTFT = now.Sub(start)
				} else if g := now.Sub(last); g > o.MaxGap {
					o.MaxGap = g
				}
				last = now
				contents++
			}
			if ch.FinishReason != nil && *ch.FinishReason != "" {
				finish = true
			}
		}
		if err == io.EOF {
			break
		}
	}
	switch {
	case !done:
		return o, fmt.Errorf("ended without [DONE] after %d content chunks", contents)
	case contents != s.chunks:
		return o, fmt.Errorf("%d content chunks, want %d", contents, s.chunks)
	case !finish:
		return o, errors.New("no finish_reason")
	case !usage:
		return o, errors.New("no usage chunk")
	case completionToks != s.chunks:
		return o, fmt.Errorf("usage completion_tokens %d, want %d", completionToks, s.chunks)
	}
	return o, nil
}

// shortErr is err's message without the request line net/http prefixes
// (Post "http://...": ...), so that failures group by cause.
func shortErr(err error) string {
	msg := err.Error()
	if i := strings.LastIndex(msg, "\": "); i >= 0 && strings.HasPrefix(msg, "Post \"") {
		msg = msg[i+3:]
	}
	return msg
}

// wave runs n streams, the i-th starting at i*ramp/n, and returns their
// outcomes, the most open at once (as counted in open) and its wall time.
// When all n are open at once (open reaches n, which happens once a wave),
// it calls allOpen, if not nil, and waits for it before returning.
func (s *streamer) wave(ctx context.Context, n int, ramp time.Duration, open *atomic.Int64, peak *atomic.Int64, allOpen func()) ([]outcome, time.Duration) {
	var side sync.WaitGroup
	out := make([]outcome, n)
	var wg sync.WaitGroup
	begin := time.Now()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Until(begin.Add(time.Duration(int64(ramp) * int64(i) / int64(n)))))
			v := open.Add(1)
			for p := peak.Load(); v > p && !peak.CompareAndSwap(p, v); p = peak.Load() {
			}
			if v == int64(n) && allOpen != nil {
				side.Add(1)
				go func() { defer side.Done(); allOpen() }()
			}
			out[i] = s.run(ctx)
			open.Add(-1)
		}()
	}
	wg.Wait()
	wall := time.Since(begin)
	side.Wait()
	return out, wall
}

// memory reads VmRSS and VmHWM, in kB, from /proc/<pid>/status.
func memory(pid int) (rss, hwm int64, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("%s in /proc/%d/status: %v", k, pid, err)
		}
		if k == "VmRSS" {
			rss = n
		} else {
			hwm = n
		}
	}
	return rss, hwm, nil
}

// cpuTime reads a process's CPU time (user+system) from /proc/<pid>/stat.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; fields count from after it.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	var ticks int64
	for _, v := range f[11:13] { // utime and stime, fields 14 and 15
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %v", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// clockTicks is the kernel's USER_HZ, the unit of /proc/<pid>/stat's CPU
// times: 100 on every Linux architecture Go runs on.
const clockTicks = 100

// saveProfiles saves a pprof server's heap profile and goroutine dump
// into dir (heap.pprof, goroutines.txt), and the heap's text form, which
// ends with the runtime's memory statistics (memstats.txt: heap, stacks,
// what was returned to the OS).
func saveProfiles(base, dir string) error {
	for _, p := range []struct{ path, file string }{
		// Cheapest first: the streams end while the profiles are taken.
		{"/debug/pprof/heap?debug=1", "memstats.txt"},
		{"/debug/pprof/goroutine?debug=1", "goroutines.txt"},
		{"/debug/pprof/heap?gc=1", "heap.pprof"},
	} {
		resp, err := http.Get(base + p.path)
		if err != nil {
			return err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s%s: %s", base, p.path, resp.Status)
		}
		if err := os.WriteFile(dir+"/"+p.file, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func main() {
	url := flag.String("url", "http://127.0.0.1:18080/openai/v1/chat/completions", "chat completions URL")
	key := flag.String("key", os.Getenv("SB_KEY"), "API key, sent as a Bearer token (default $SB_KEY)")
	model := flag.String("model", "mock/bench", "model")
	streams := flag.Int("streams", 2000, "streams in a wave")
	ramp := flag.Duration("ramp", 500*time.Millisecond, "time over which a wave's stream starts are spread")
	chunks := flag.Int("chunks", 20, "content chunks every stream must carry")
	warmup := flag.Int("warmup", 1, "waves run (and not counted) before the measured one")
	timeout := flag.Duration("timeout", time.Minute, "bound on one stream")
	pid := flag.Int("pid", 0, "process whose memory is sampled during the measured wave (0: none)")
	every := flag.Duration("sample", 10*time.Millisecond, "memory sampling interval")
	pprofURL := flag.String("pprof", "", "base URL of the server's net/http/pprof (http://host:port): profiles saved when all streams are open")
	pprofDir := flag.String("pprof-dir", ".", "where -pprof's profiles are saved")
	flag.Parse()
	if *streams < 1 || *chunks < 1 || *ramp < 0 {
		log.Fatal("streamload: -streams and -chunks must be at least 1, -ramp not negative")
	}
	body, err := json.Marshal(map[string]any{
		"model":          *model,
		"messages":       []map[string]string{{"role": "user", "content": "Count to twenty."}},
		"max_tokens":     64,
		"stream":         true,
		"stream_options": map[string]bool{"include_usage": true},
	})
	if err != nil {
		log.Fatal(err)
	}
	s := &streamer{
		client: &http.Client{Transport: &http.Transport{
			MaxIdleConns: *streams, MaxIdleConnsPerHost: *streams, IdleConnTimeout: time.Minute,
			DisableCompression: true,
		}},
		url: *url, key: *key, body: body, chunks: *chunks, timeout: *timeout,
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(*warmup+1)*(*ramp+*timeout))
	defer cancel()
	var open, peak atomic.Int64
	for range *warmup {
		s.wave(ctx, *streams, *ramp, &open, &peak, nil)
	}
	peak.Store(0)
	res := result{URL: *url, Streams: *streams, Failures: map[string]int{}}
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		if *pid == 0 {
			return
		}
		t := time.NewTicker(*every)
		defer t.Stop()
		for {
			o := open.Load()
			if rss, _, err := memory(*pid); err == nil {
				if res.RSSSamples == 0 {
					res.RSSBeforeKB = rss
				}
				res.RSSSamples++
				if rss > res.RSSPeakKB {
					res.RSSPeakKB, res.OpenAtRSSPeak = rss, o
				}
				if o == int64(*streams) && open.Load() == o {
					res.AllOpenSamples++
					res.RSSAllOpenKB = max(res.RSSAllOpenKB, rss)
				}
			}
			select {
			case <-t.C:
			case <-stop:
				return
			}
		}
	}()
	var cpu0 time.Duration
	if *pid != 0 {
		if cpu0, err = cpuTime(*pid); err != nil {
			log.Fatal(err)
		}
	}
	var allOpen func()
	profiled := make(chan error, 1)
	if *pprofURL != "" {
		allOpen = func() { profiled <- saveProfiles(*pprofURL, *pprofDir) }
	}
	outs, wall := s.wave(ctx, *streams, *ramp, &open, &peak, allOpen)
	close(stop)
	<-sampled
	if *pid != 0 {
		cpu1, err := cpuTime(*pid)
		if err != nil {
			log.Fatal(err)
		}
		_, hwm, err := memory(*pid)
		if err != nil {
			log.Fatal(err)
		}
		res.HWMKB, res.CPUMs = hwm, float64(cpu1-cpu0)/1e6
	}
	res.PeakOpen, res.WallMs = peak.Load(), float64(wall)/1e6
	if *pprofURL != "" {
		select {
		case err := <-profiled:
			if err != nil {
				log.Printf("streamload: profiles: %v", err)
			}
		default:
			log.Printf("streamload: no profiles: the %d streams were never all open at once", *streams)
		}
	}
	var ttft, dur, gap []time.Duration
	for _, o := range outs {
		if o.TTFT > 0 {
			ttft = append(ttft, o.TTFT)
		}
		if o.Err != "" {
			res.Failures[o.Err]++
			continue
		}
		res.OK++
		dur, gap = append(dur, o.Duration), append(gap, o.MaxGap)
	}
	res.TTFT, res.Duration, res.MaxGap = quantilesOf(ttft), quantilesOf(dur), quantilesOf(gap)
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(res); err != nil {
		log.Fatal(err)
	}
}
