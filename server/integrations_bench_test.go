package server_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/auth"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/connectors"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/servertest"
)

// BenchmarkInvokeOverhead measures what running an action through
// Switchboard adds to calling the same upstream directly: each iteration
// makes one direct call and one call through POST
// /v1/integrations/{connector}/run (auth, rate limit, param checks,
// request building, credential injection, egress guard, invocation log,
// and for "transform" the sandboxed script), both over kept-alive
// connections on loopback. It reports the medians and the 99th
// percentiles of both and the added latency at the median.
//
//	go test ./server -run '^$' -bench InvokeOverhead -benchtime 5000x
func BenchmarkInvokeOverhead(b *testing.B) {
	params := map[string]connectors.Parameter{"city": {Type: connectors.TypeString, Required: true}}
	env, up, key := newInvokeBench(b,
		connectors.Action{Name: "raw", Method: "GET", Path: "/weather/{{params.city}}", Parameters: params},
		connectors.Action{Name: "transform", Method: "GET", Path: "/weather/{{params.city}}", Parameters: params,
			Transformation: "return {city: data.name, celsius: data.main.temp, ids: data.list.map(x => x.id)}"},
	)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}

	call := func(req *http.Request) {
		res, err := hc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		_ = res.Body.Close()
		if res.StatusCode != 200 {
			b.Fatalf("status %d", res.StatusCode)
		}
	}
	direct := func() time.Duration {
		req, _ := http.NewRequest("GET", up.URL+"/weather/Oslo", nil)
		req.Header.Set("X-API-Key", "bench-key")
		start := time.Now()
		call(req)
		return time.Since(start)
	}
	via := func(action string) time.Duration {
		req, _ := http.NewRequest("POST", env.URL+"/v1/integrations/bench/run",
			bytes.NewReader([]byte(`{"action":"`+action+`","params":{"city":"Oslo"}}`)))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		start := time.Now()
		call(req)
		return time.Since(start)
	}

	for _, action := range []string{"raw", "transform"} {
		b.Run(action, func(b *testing.B) {
			for range 200 { // warm connections, workers and caches
				direct()
				via(action)
			}
			d := make([]time.Duration, 0, b.N)
			v := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				d = append(d, direct())
				v = append(v, via(action))
			}
			b.StopTimer()
			dp50, dp99 := percentiles(d)
			vp50, vp99 := percentiles(v)
			b.ReportMetric(float64(dp50.Microseconds()), "direct-p50-µs")
			b.ReportMetric(float64(dp99.Microseconds()), "direct-p99-µs")
			b.ReportMetric(float64(vp50.Microseconds()), "via-p50-µs")
			b.ReportMetric(float64(vp99.Microseconds()), "via-p99-µs")
			b.ReportMetric(float64((vp50 - dp50).Microseconds()), "added-p50-µs")
		})
	}
}

// newInvokeBench starts a server with the connector "bench" (an API key
// in X-API-Key, its default connection stored) whose upstream answers a
// fixed JSON body, creates actions, and returns the server, the upstream
// and an invoke key. The requests-per-minute limit is out of the way.
func newInvokeBench(b *testing.B, actions ...connectors.Action) (*servertest.Env, *httptest.Server, string) {
	body := []byte(`{"name":"Oslo","main":{"temp":-3.5,"humidity":80},"list":[{"id":1,"t":1.5},{"id":2,"t":2.5},{"id":3,"t":3.5}]}`)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	b.Cleanup(up.Close)
	env := servertest.New(b, func(c *config.Config) {
		c.Egress.Allow = []string{"127.0.0.0/8"}
		c.Limits.RequestsPerMinute = 1 << 30
	})
	ctx := context.Background()
	if _, err := env.Server.Connectors().CreateConnector(ctx, connectors.Connector{Name: "bench", BaseURL: up.URL,
		Auth: connectors.Auth{Type: connectors.AuthAPIKey, Name: "X-API-Key", In: connectors.InHeader}}); err != nil {
		b.Fatal(err)
	}
	for _, a := range actions {
		if _, err := env.Server.Connectors().CreateAction(ctx, "bench", a); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := env.Server.Connections().Create(ctx, "bench", connectors.ConnectionInput{Credentials: connectors.Credentials{APIKey: "bench-key"}}); err != nil {
		b.Fatal(err)
	}
	_, key, err := env.Server.Keys().Create(ctx, auth.NewAPIKeyInput{Name: "bench", Scopes: []string{auth.ScopeInvoke}})
	if err != nil {
		b.Fatal(err)
	}
	return env, up, key
}

func percentiles(ds []time.Duration) (p50, p99 time.Duration) {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2], s[len(s)*99/100]
}
