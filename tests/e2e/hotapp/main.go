// A real Go target for tests/e2e/rules.test.mjs (issue 30): it serves
// net/http/pprof and burns CPU in main.hotTagged inside pprof.Do with an
// "endpoint" label (two endpoints, /checkout twice the work of /search),
// plus untagged work in main.coldWork, so a recording rule "CPU in
// main.hotTagged by endpoint" has something to count. -factor multiplies
// hotTagged's work; its default is set at build time (the regression report
// test builds two versions: go build -ldflags "-X main.defaultFactor=2").
//
//	hotapp -listen 127.0.0.1:PORT [-factor N]
package main

import (
	"context"
	"flag"
	"log"
	"math"
	"net/http"
	_ "net/http/pprof"
	"runtime/pprof"
	"strconv"
	"time"
)

var sink float64

// defaultFactor is -factor's default, set by -ldflags "-X main.defaultFactor=N".
var defaultFactor = "1"

//go:noinline
func hotTagged(n int) {
	for i := 1; i < n; i++ {
		sink += math.Sqrt(float64(i))
	}
}

//go:noinline
func coldWork(n int) {
	for i := 1; i < n; i++ {
		sink -= math.Sqrt(float64(i))
	}
}

//go:noinline
func steadyWork(n int) {
	for i := 1; i < n; i++ {
		sink *= 1.0000001
	}
}

// work runs f every 10 ms slot for about share of it, so the program's CPU
// use stays bounded on a shared machine.
func work(f func()) {
	for {
		start := time.Now()
		f()
		if d := time.Since(start); d < 10*time.Millisecond {
			time.Sleep(10*time.Millisecond - d)
		}
	}
}

func main() {
	listen := flag.String("listen", "127.0.0.1:6061", "address of net/http/pprof")
	def, err := strconv.Atoi(defaultFactor)
	if err != nil {
		log.Fatalf("bad main.defaultFactor %q", defaultFactor)
	}
	factor := flag.Int("factor", def, "multiplies main.hotTagged's work")
	flag.Parse()
	n := 200000 * *factor
	// One goroutine does the three in turn, so each one's share of the CPU
	// is its share of the work however busy the machine: three goroutines,
	// each paced on its own, got equal shares once the machine was too busy
	// to give them their slots (the regression report then saw little of
	// the doubled work).
	ctx := context.Background()
	go work(func() {
		pprof.Do(ctx, pprof.Labels("endpoint", "/checkout"), func(context.Context) { hotTagged(2 * n) })
		pprof.Do(ctx, pprof.Labels("endpoint", "/search"), func(context.Context) {
			hotTagged(n)
			steadyWork(200000)
		})
		coldWork(200000)
		steadyWork(200000)
	})
	log.Fatal(http.ListenAndServe(*listen, nil))
}
