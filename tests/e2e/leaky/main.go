// leaky: a Go service that leaks memory fast, for profd's adaptive capture
// tests (issue 18). It serves net/http/pprof and a /metrics page with the
// Go runtime's go_memstats_heap_inuse_bytes (the name client_golang uses)
// on every address of -listen (comma-separated: one process can be many
// scrape targets). After -delay it keeps -rate MiB/s of 64 KiB buffers alive
// in leakSessions (the leak), while handleRequests allocates and drops
// garbage (what a healthy service does).
package main

import (
	"flag"
	"fmt"
	"log"
	"net/http"
	_ "net/http/pprof"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"time"
)

var (
	mu       sync.Mutex
	sessions [][]byte
	sink     []byte
)

// leakSessions keeps n bytes alive forever, in 64 KiB buffers whose pages
// are touched (so RSS grows as the heap does).
func leakSessions(n int) {
	for ; n > 0; n -= 64 << 10 {
		b := make([]byte, 64<<10)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		mu.Lock()
		sessions = append(sessions, b)
		mu.Unlock()
	}
}

// handleRequests allocates short-lived garbage.
func handleRequests() {
	for i := 0; i < 50; i++ {
		sink = make([]byte, 8<<10)
	}
}

func metrics(w http.ResponseWriter, r *http.Request) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fmt.Fprintf(w, "# HELP go_memstats_heap_inuse_bytes Number of heap bytes that are in use.\n")
	fmt.Fprintf(w, "# TYPE go_memstats_heap_inuse_bytes gauge\n")
	fmt.Fprintf(w, "go_memstats_heap_inuse_bytes %d\n", ms.HeapInuse)
}

func main() {
	listen := flag.String("listen", "127.0.0.1:6060", "addresses, comma-separated")
	rate := flag.Float64("rate", 10, "MiB per second kept alive after -delay (0: no leak)")
	delay := flag.Duration("delay", 0, "time before the leak starts")
	stop := flag.Duration("stop-after", 0, "after the leak ran this long, stop it and free what it kept (0: never)")
	flag.Parse()
	http.HandleFunc("/metrics", metrics)
	for _, a := range strings.Split(*listen, ",") {
		a := a
		go func() { log.Fatal(http.ListenAndServe(a, nil)) }()
	}
	time.Sleep(*delay)
	tick := time.NewTicker(50 * time.Millisecond)
	start := time.Now()
	for range tick.C {
		handleRequests()
		if *stop > 0 && time.Since(start) > *stop {
			if *rate > 0 {
				mu.Lock()
				sessions = nil
				mu.Unlock()
				debug.FreeOSMemory()
				*rate = 0
			}
			continue
		}
		if *rate > 0 {
			leakSessions(int(*rate * (1 << 20) / 20))
		}
	}
}
