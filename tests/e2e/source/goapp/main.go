// The Go target of tests/e2e/source_view.test.mjs (issue 31 item 7, the
// source view): serves net/http/pprof and burns CPU in main.hotLines, whose
// loop spends most of its time on one line (the square root and the
// division, marked HOT below) and a little on another (marked WARM), so the
// per-line cost profd computes has a clear largest line. escape.go adds two
// functions whose recorded file names try to leave --ui.source-dir.
//
//	srcapp -listen 127.0.0.1:PORT
package main

import (
	"flag"
	"log"
	"math"
	"net/http"
	_ "net/http/pprof"
	"time"
)

var sink float64

//go:noinline
func hotLines(n int) {
	for i := 1; i < n; i++ {
		sink += math.Sqrt(float64(i)) / (float64(i%7) + 1.5) // HOT
		if i%64 == 0 {
			sink *= 0.999999 // WARM
		}
	}
}

// work runs f for about half of every 10 ms, so the program's CPU use stays
// bounded on a shared machine.
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
	listen := flag.String("listen", "127.0.0.1:6060", "address of net/http/pprof")
	flag.Parse()
	go work(func() { hotLines(200000) })
	go work(func() { escapeUp(400000); escapeLink(400000) })
	log.Fatal(http.ListenAndServe(*listen, nil))
}
