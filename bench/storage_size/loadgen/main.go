// Command loadgen keeps examples/demo busy like a real server while
// bench/storage_size/collect.sh scrapes its profiles: W workers send a mix of
// requests to the demo's HTTP server (pprof index page, text profiles with
// symbolization, symbol lookups, protobuf profiles, 404s), some over
// keep-alive connections that sit idle for a while (goroutines parked in
// net/http reads), some opening a new connection per request. The mix gives
// the heap/allocs/goroutine/cpu profiles the varied net/http, fmt,
// compress/flate, text/template and runtime/pprof stacks of a server under
// load, on top of the demo's own CPU burner, leak and contention.
//
//	loadgen -target=http://127.0.0.1:6060 [-workers=8] [-rate=150]
package main

import (
	"flag"
	"io"
	"math/rand"
	"net/http"
	"strings"
	"time"
)

var paths = []string{
	"/debug/pprof/",
	"/debug/pprof/cmdline",
	"/debug/pprof/goroutine?debug=1",
	"/debug/pprof/goroutine?debug=2",
	"/debug/pprof/heap?debug=1",
	"/debug/pprof/allocs?debug=1",
	"/debug/pprof/threadcreate",
	"/debug/pprof/mutex",
	"/debug/pprof/block?debug=1",
	"/nope",
}

func main() {
	target := flag.String("target", "http://127.0.0.1:6060", "demo base URL")
	workers := flag.Int("workers", 8, "concurrent clients")
	rate := flag.Float64("rate", 150, "requests per second, all workers together")
	flag.Parse()
	per := time.Duration(float64(time.Second) * float64(*workers) / *rate)
	for w := 0; w < *workers; w++ {
		go func(w int) {
			r := rand.New(rand.NewSource(int64(w)))
			tr := &http.Transport{DisableKeepAlives: w%3 == 0, MaxIdleConnsPerHost: 4,
				IdleConnTimeout: time.Duration(1+r.Intn(10)) * time.Second}
			c := &http.Client{Transport: tr, Timeout: 30 * time.Second}
			for {
				var resp *http.Response
				var err error
				if r.Intn(10) == 0 {
					resp, err = c.Post(*target+"/debug/pprof/symbol", "text/plain",
						strings.NewReader("0x401000+0x402000+0x403000"))
				} else {
					resp, err = c.Get(*target + paths[r.Intn(len(paths))])
				}
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				// Poisson-ish arrivals around the mean period.
				time.Sleep(time.Duration(r.ExpFloat64() * float64(per)))
			}
		}(w)
	}
	select {}
}
