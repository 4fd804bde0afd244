//go:build pprof

package main

// Built with -tags pprof (bench/llm.sh PROFILE=1, bench/invoke.sh), the
// binary serves net/http/pprof on SWITCHBOARD_PPROF_ADDR so that a
// benchmark run can be profiled. Release builds do not contain it.

import (
	"log"
	"net/http"
	_ "net/http/pprof"
	"os"
)

func init() {
	addr := os.Getenv("SWITCHBOARD_PPROF_ADDR")
	if addr == "" {
		return
	}
	go func() { log.Println(http.ListenAndServe(addr, nil)) }()
}
