package server_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/auth"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/connectors"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/gcfloor"
)

// BenchmarkMCPToolCallOverhead measures what an MCP tools/call adds to
// running the same action through POST /v1/integrations/{connector}/run:
// each iteration makes one call of each, alternating, over kept-alive
// loopback connections, and reports both medians and 99th percentiles and
// the difference of the medians (target: at most 100 µs). The MCP request
// is what a stateless client sends: one POST of tools/call, answered as an
// event stream.
//
// The collector is paced as `switchboard serve` paces it (gcfloor).
//
// Calibration rows of the same run: what the MCP SDK costs on its own, an
// MCP ping against the lightest authenticated native request
// (GET /v1/toolsets?limit=1), as sdk-floor-p50-µs: no tools/call can add
// less than that.
//
//	go test ./server -run '^$' -bench MCPToolCallOverhead -benchtime 5000x
func BenchmarkMCPToolCallOverhead(b *testing.B) {
	env, _, key := newInvokeBench(b, connectors.Action{Name: "raw", Method: "GET", Path: "/weather/{{params.city}}",
		Parameters: map[string]connectors.Parameter{"city": {Type: connectors.TypeString, Required: true}}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Pace the collector as switchboard serve does.
	go gcfloor.Run(ctx, 0, 0)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	_, readKey, err := env.Server.Keys().Create(ctx, auth.NewAPIKeyInput{Name: "read", Scopes: []string{auth.ScopeConnectorsRead}})
	if err != nil {
		b.Fatal(err)
	}
	call := func(req *http.Request, want string) time.Duration {
		if req.Header.Get("Authorization") == "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		req.Header.Set("Content-Type", "application/json")
		start := time.Now()
		res, err := hc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		got, _ := io.ReadAll(res.Body)
		_ = res.Body.Close()
		d := time.Since(start)
		if res.StatusCode != 200 || !strings.Contains(string(got), want) {
			b.Fatalf("status %d: %s", res.StatusCode, got)
		}
		return d
	}
	run := func() time.Duration {
		req, _ := http.NewRequest("POST", env.URL+"/v1/integrations/bench/run", bytes.NewReader([]byte(`{"action":"raw","params":{"city":"Oslo"}}`)))
		return call(req, `"status":200`)
	}
	mcpCall := func() time.Duration {
		req, _ := http.NewRequest("POST", env.URL+"/mcp", bytes.NewReader([]byte(
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"bench-raw","arguments":{"city":"Oslo"}}}`)))
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		return call(req, `\"status\":200`)
	}
	ping := func() time.Duration {
		req, _ := http.NewRequest("POST", env.URL+"/mcp", bytes.NewReader([]byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)))
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		return call(req, `"result":{}`)
	}
	light := func() time.Duration {
		req, _ := http.NewRequest("GET", env.URL+"/v1/toolsets?limit=1", nil)
		req.Header.Set("Authorization", "Bearer "+readKey)
		return call(req, `"data"`)
	}
	for range 200 { // warm connections, workers and caches
		run()
		mcpCall()
		ping()
		light()
	}
	r := make([]time.Duration, 0, b.N)
	m := make([]time.Duration, 0, b.N)
	p := make([]time.Duration, 0, b.N)
	l := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		r = append(r, run())
		m = append(m, mcpCall())
		p = append(p, ping())
		l = append(l, light())
	}
	b.StopTimer()
	pp50, _ := percentiles(p)
	lp50, _ := percentiles(l)
	b.ReportMetric(float64(pp50.Microseconds()), "ping-p50-µs")
	b.ReportMetric(float64(lp50.Microseconds()), "light-p50-µs")
	b.ReportMetric(float64((pp50 - lp50).Microseconds()), "sdk-floor-p50-µs")
	rp50, rp99 := percentiles(r)
	mp50, mp99 := percentiles(m)
	b.ReportMetric(float64(rp50.Microseconds()), "run-p50-µs")
	b.ReportMetric(float64(rp99.Microseconds()), "run-p99-µs")
	b.ReportMetric(float64(mp50.Microseconds()), "mcp-p50-µs")
	b.ReportMetric(float64(mp99.Microseconds()), "mcp-p99-µs")
	b.ReportMetric(float64((mp50 - rp50).Microseconds()), "added-p50-µs")
}
