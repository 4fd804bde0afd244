package transform

import (
	"testing"

	"github.com/dop251/goja"
)

// BenchmarkRunnerInProcess measures a worker's own work for one small
// transformation (fresh runtime, response hand-over, run, JSON result),
// without the process hop.
//
//	go test ./server/transform -run '^$' -bench RunnerInProcess
func BenchmarkRunnerInProcess(b *testing.B) {
	wk := &runner{programs: map[string]*goja.Program{}}
	j := &job{Name: "bench.transform", Script: "return {city: data.name, celsius: data.main.temp, ids: data.list.map(x => x.id)}",
		Data:     []byte(`{"name":"Oslo","main":{"temp":-3.5,"humidity":80},"list":[{"id":1,"t":1.5},{"id":2,"t":2.5},{"id":3,"t":3.5}]}`),
		DataJSON: true, Status: 200, Headers: map[string]string{"content-type": "application/json"}, TimeoutNanos: 1e9, MaxOutput: 1 << 20}
	j.Key = programKey(j.Name, j.Script)
	for range b.N {
		if out := wk.run(j); out.Kind != outcomeOK {
			b.Fatal(out.Message)
		}
	}
}

// BenchmarkNewRuntime measures what a fresh runtime per call costs (the
// reason runtimes are made per call rather than reused across calls).
//
//	go test ./server/transform -run '^$' -bench NewRuntime
func BenchmarkNewRuntime(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = newRuntime()
	}
}
