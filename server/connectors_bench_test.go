package server_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/servertest"
)

// Benchmarks of connector create and get through HTTP against the real
// server (Echo, auth, bbolt in b.TempDir(), loopback). The client is a plain
// keep-alive http.Client, so that the figures are the server's (plus
// loopback), not the spec validation of servertest's clients. Rate limits
// are off. Allocations count client and server (same process).
//
//	go test ./server/ -run '^$' -bench 'BenchmarkConnector' -benchmem

func benchEnv(b *testing.B) (*servertest.Env, *http.Client) {
	b.Helper()
	env := servertest.New(b, func(c *config.Config) {
		c.Limits.RequestsPerMinute, c.Limits.ControlPlaneRequestsPerMinute = 0, 0
	})
	return env, env.HTTP.Client()
}

func benchDo(b *testing.B, hc *http.Client, env *servertest.Env, method, path string, body []byte, want int) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, env.URL+path, rd)
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+env.AdminKey)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := hc.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != want {
		b.Fatalf("%s %s = %d, want %d", method, path, res.StatusCode, want)
	}
}

const benchConnectorBody = `{"name":%q,"displayName":"Weather","baseUrl":"https://api.weather.example/v1",` +
	`"auth":{"type":"apiKey","name":"X-API-Key","in":"header"}}`

func BenchmarkConnectorCreate(b *testing.B) {
	env, hc := benchEnv(b)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		benchDo(b, hc, env, http.MethodPost, "/v1/connectors", fmt.Appendf(nil, benchConnectorBody, fmt.Sprintf("c_%d", i)), http.StatusCreated)
		i++
	}
}

func BenchmarkConnectorGet(b *testing.B) {
	env, hc := benchEnv(b)
	benchDo(b, hc, env, http.MethodPost, "/v1/connectors", fmt.Appendf(nil, benchConnectorBody, "weather"), http.StatusCreated)
	b.ReportAllocs()
	for b.Loop() {
		benchDo(b, hc, env, http.MethodGet, "/v1/connectors/weather", nil, http.StatusOK)
	}
}
