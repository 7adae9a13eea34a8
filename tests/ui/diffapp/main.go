// A real Go program with a heap profile of known shape, for
// tests/ui/compare.test.mjs (issue 31): -foo, -bar and -baz blocks of 1 MiB (the runtime's own few KiB then under 0.05% of a total)
// allocated (and kept) by main.foo, main.bar and main.baz, every allocation
// sampled (MemProfileRate 1), then runtime/pprof writes the heap profile
// (-heap FILE, default sample type none: pprof's rule picks inuse_space) and
// the allocs profile (-allocs FILE: default_sample_type alloc_space), as
// net/http/pprof serves them; with -listen it then serves net/http/pprof
// for profd to scrape (its allocs profile: default_sample_type alloc_space).
//
//	diffapp -foo 5 -bar 25 -baz 20 -heap heap.pb.gz -allocs allocs.pb.gz
package main

import (
	"flag"
	"net/http"
	_ "net/http/pprof"
	"os"
	"runtime"
	"runtime/pprof"
)

const block = 1 << 20

var keep [][]byte

//go:noinline
func foo(n int) {
	for i := 0; i < n; i++ {
		keep = append(keep, make([]byte, block))
	}
}

//go:noinline
func bar(n int) {
	for i := 0; i < n; i++ {
		keep = append(keep, make([]byte, block))
	}
}

//go:noinline
func baz(n int) {
	for i := 0; i < n; i++ {
		keep = append(keep, make([]byte, block))
	}
}

func write(name, file string) {
	if file == "" {
		return
	}
	f, err := os.Create(file)
	if err != nil {
		panic(err)
	}
	if err := pprof.Lookup(name).WriteTo(f, 0); err != nil {
		panic(err)
	}
	if err := f.Close(); err != nil {
		panic(err)
	}
}

func main() {
	runtime.MemProfileRate = 1
	nfoo := flag.Int("foo", 5, "blocks allocated by main.foo")
	nbar := flag.Int("bar", 25, "blocks allocated by main.bar")
	nbaz := flag.Int("baz", 20, "blocks allocated by main.baz")
	heap := flag.String("heap", "", "heap profile file")
	allocs := flag.String("allocs", "", "allocs profile file")
	listen := flag.String("listen", "", "serve net/http/pprof on this address (profd scrapes it) until killed")
	flag.Parse()
	keep = make([][]byte, 0, *nfoo+*nbar+*nbaz)
	foo(*nfoo)
	bar(*nbar)
	baz(*nbaz)
	runtime.GC() // the heap profile is as of the last GC
	write("heap", *heap)
	write("allocs", *allocs)
	if *listen != "" {
		if err := http.ListenAndServe(*listen, nil); err != nil {
			panic(err)
		}
	}
	runtime.KeepAlive(keep)
}
