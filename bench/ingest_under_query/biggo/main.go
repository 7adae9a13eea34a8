// A real Go program whose heap profile is ~75 KB (gzip): allocations from
// 4^7 = 16,384 distinct call stacks (four mutually recursive functions, depth
// 7), every allocation sampled. Serves net/http/pprof on 127.0.0.1:21031.
// Used by collect.sh for bench/ingest_under_query (PD_IUQ_PROFILES).
package main

import (
	"net/http"
	_ "net/http/pprof"
	"runtime"
	"time"
)

var keep [][]byte

func a(n, d int) {
	if d == 0 {
		alloc(n)
		return
	}
	switch n & 3 {
	case 0:
		a(n>>2, d-1)
	case 1:
		b(n>>2, d-1)
	case 2:
		c(n>>2, d-1)
	default:
		e(n>>2, d-1)
	}
}
func b(n, d int) {
	if d == 0 {
		alloc(n)
		return
	}
	switch n & 3 {
	case 0:
		a(n>>2, d-1)
	case 1:
		b(n>>2, d-1)
	case 2:
		c(n>>2, d-1)
	default:
		e(n>>2, d-1)
	}
}
func c(n, d int) {
	if d == 0 {
		alloc(n)
		return
	}
	switch n & 3 {
	case 0:
		a(n>>2, d-1)
	case 1:
		b(n>>2, d-1)
	case 2:
		c(n>>2, d-1)
	default:
		e(n>>2, d-1)
	}
}
func e(n, d int) {
	if d == 0 {
		alloc(n)
		return
	}
	switch n & 3 {
	case 0:
		a(n>>2, d-1)
	case 1:
		b(n>>2, d-1)
	case 2:
		c(n>>2, d-1)
	default:
		e(n>>2, d-1)
	}
}

//go:noinline
func alloc(n int) { keep = append(keep, make([]byte, 64+n%512)) }

func main() {
	runtime.MemProfileRate = 1
	go http.ListenAndServe("127.0.0.1:21031", nil)
	for i := 0; ; i++ {
		a(i%16384, 7)
		if len(keep) > 100000 {
			keep = keep[50000:]
		}
		if i%1000 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
}
