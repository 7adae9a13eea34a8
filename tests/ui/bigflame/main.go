// A real Go program whose heap profile has a flame graph of ~68,000 nodes,
// for tests/ui/flame50k.test.mjs: N (default 30,000) allocations, each from
// its own call stack of depth 8 through four functions (a, b, c, e: the
// base-4 digits of n pick the next one), every allocation sampled
// (MemProfileRate 1) and kept, then the heap profile written by
// runtime/pprof as net/http/pprof would serve it.
//
//	bigflame -n 30000 -o heap.pb.gz
package main

import (
	"flag"
	"os"
	"runtime"
	"runtime/pprof"
)

var keep [][]byte

func leaf(n int) { keep = append(keep, make([]byte, 64+n%512)) }

//go:noinline
func a(n, d int) {
	if d == 0 {
		leaf(n)
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
func b(n, d int) {
	if d == 0 {
		leaf(n)
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
func c(n, d int) {
	if d == 0 {
		leaf(n)
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
func e(n, d int) {
	if d == 0 {
		leaf(n)
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

func main() {
	n := flag.Int("n", 30000, "distinct call stacks")
	out := flag.String("o", "heap.pb.gz", "output file")
	flag.Parse()
	runtime.MemProfileRate = 1
	for i := 0; i < *n; i++ {
		a(i, 8)
	}
	runtime.GC()
	f, err := os.Create(*out)
	if err != nil {
		panic(err)
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		panic(err)
	}
	f.Close()
	runtime.KeepAlive(keep)
}
