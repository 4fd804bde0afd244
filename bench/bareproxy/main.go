// Command bareproxy is the calibration point of bench/llm.sh: a bare
// net/http/httputil reverse proxy in front of the mock upstream, with no
// authentication, parsing or accounting. Measured on the same machine at the
// same time, it shows what any Go HTTP proxy costs there, so that
// Switchboard's figures can be read against it.
package main

import (
	"flag"
	"log"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:18082", "listen address")
	upstream := flag.String("upstream", "http://127.0.0.1:18081", "upstream base URL")
	flag.Parse()
	u, err := url.Parse(*upstream)
	if err != nil {
		log.Fatal(err)
	}
	p := httputil.NewSingleHostReverseProxy(u)
	p.Transport = &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024, IdleConnTimeout: 90 * time.Second}
	p.ErrorLog = log.New(discard{}, "", 0)
	srv := &http.Server{Addr: *addr, Handler: p, ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.ListenAndServe())
}

type discard struct{}

func (discard) Write(b []byte) (int, error) { return len(b), nil }
