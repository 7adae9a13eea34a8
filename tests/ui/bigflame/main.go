// A real Go program whose heap profile has a flame graph of ~68,000 nodes,
// for tests/ui/flame50k.test.mjs: N (default 30,000) allocations, each from
// its own call stack of depth 8 through four functions (a, b, c, e: the
// base-4 digits of n pick the next one), every allocation sampled
// (MemProfileRate 1) and kept, then the heap profile written by
// runtime/pprof as net/http/pprof would serve it (gzip level 1, as Go's
// runtime/pprof writes every profile). tests/e2e/profefe_curl.test.mjs
// makes a larger one (-n 300000 -depth 10: over 1 MB gzip) for profefe's
// curl --data-binary.
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
	depth := flag.Int("depth", 8, "call depth above leaf: 4^depth distinct stacks at most")
	flag.Parse()
	runtime.MemProfileRate = 1
	for i := 0; i < *n; i++ {
		a(i, *depth)
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
