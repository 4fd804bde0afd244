package transform_test

import (
	"context"
	"testing"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/transform"
)

// BenchmarkSandboxRun measures one small transformation through a warm
// worker process: hand-over, run, result.
//
//	go test ./server/transform -run '^$' -bench SandboxRun
func BenchmarkSandboxRun(b *testing.B) {
	s, err := transform.NewSandbox(transform.Options{Workers: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	in := transform.Input{
		Name: "bench.transform", Script: "return {city: data.name, celsius: data.main.temp, ids: data.list.map(x => x.id)}",
		Data:     []byte(`{"name":"Oslo","main":{"temp":-3.5,"humidity":80},"list":[{"id":1,"t":1.5},{"id":2,"t":2.5},{"id":3,"t":3.5}]}`),
		DataJSON: true, Status: 200, Headers: map[string]string{"content-type": "application/json"},
	}
	ctx := context.Background()
	for range 100 {
		if _, err := s.Run(ctx, in); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for range b.N {
		if _, err := s.Run(ctx, in); err != nil {
			b.Fatal(err)
		}
	}
}
