// A real Go target for tests/e2e/scrape_labels.test.mjs (issue 26): it
// serves net/http/pprof and burns CPU in two goroutines — one inside
// pprof.Do(ctx, pprof.Labels("endpoint", "/checkout"), ...) as a server
// labels a request's work, one without labels — so its CPU and goroutine
// profiles carry pprof sample labels on part of their samples.
//
//	labelled -listen 127.0.0.1:PORT
package main

import (
	"context"
	"flag"
	"log"
	"math"
	"net/http"
	_ "net/http/pprof"
	"runtime/pprof"
)

var sink float64

//go:noinline
func checkoutWork() {
	for i := 1; i < 2000000; i++ {
		sink += math.Sqrt(float64(i))
	}
}

//go:noinline
func backgroundWork() {
	for i := 1; i < 2000000; i++ {
		sink -= math.Sqrt(float64(i))
	}
}

func main() {
	listen := flag.String("listen", "127.0.0.1:6061", "address of net/http/pprof")
	flag.Parse()
	go pprof.Do(context.Background(), pprof.Labels("endpoint", "/checkout"), func(context.Context) {
		for {
			checkoutWork()
		}
	})
	go func() {
		for {
			backgroundWork()
		}
	}()
	log.Fatal(http.ListenAndServe(*listen, nil))
}
