// Command demo is a small Go program for trying profd: it serves Go's
// net/http/pprof endpoints and keeps every profile type busy.
//
//   - burnCPU: a CPU burner (the top of the cpu profile)
//   - leakMemory: a slow leak, 16 KiB every 50 ms kept in a global slice
//     (the top of the heap profile), capped at -leak.max bytes so that it
//     does not exhaust memory when left running for hours
//   - contendMutex / contendChannel: goroutines fighting over a mutex and an
//     unbuffered channel, so that the mutex and block profiles have samples
//
// Usage: demo [-listen=127.0.0.1:6060] [-leak.max=268435456]
package main

import (
	"flag"
	"log"
	"net/http"
	_ "net/http/pprof"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

var (
	leaked   [][]byte
	leakedMu sync.Mutex
	sink     uint64
)

// burnCPU spends CPU on purpose; its name is what profd's tests look for.
//
//go:noinline
func burnCPU(n int) uint64 {
	var x uint64 = 1469598103934665603
	for i := 0; i < n; i++ {
		x ^= uint64(i)
		x *= 1099511628211
	}
	return x
}

// leakMemory keeps 16 KiB every 50 ms until max bytes are held, then drops
// the oldest half and keeps going (so the heap stays bounded).
//
//go:noinline
func leakMemory(max int) {
	const chunk = 16 << 10
	for {
		b := make([]byte, chunk)
		for i := range b {
			b[i] = byte(i)
		}
		leakedMu.Lock()
		leaked = append(leaked, b)
		if len(leaked)*chunk > max {
			half := len(leaked) / 2
			leaked = append([][]byte(nil), leaked[half:]...)
		}
		leakedMu.Unlock()
		time.Sleep(50 * time.Millisecond)
	}
}

// contendMutex has several goroutines hold one mutex for a while in turn.
func contendMutex() {
	var mu sync.Mutex
	for g := 0; g < 4; g++ {
		go func() {
			for {
				mu.Lock()
				time.Sleep(2 * time.Millisecond)
				mu.Unlock()
				time.Sleep(time.Millisecond)
			}
		}()
	}
}

// contendChannel has a slow consumer on an unbuffered channel, so senders block.
func contendChannel() {
	ch := make(chan int)
	go func() {
		for v := range ch {
			atomic.AddUint64(&sink, uint64(v))
			time.Sleep(5 * time.Millisecond)
		}
	}()
	for g := 0; g < 3; g++ {
		go func(g int) {
			for i := 0; ; i++ {
				ch <- g + i
			}
		}(g)
	}
}

func main() {
	listen := flag.String("listen", "127.0.0.1:6060", "address to serve /debug/pprof/ on")
	leakMax := flag.Int("leak.max", 256<<20, "bytes the leak keeps at most")
	flag.Parse()

	runtime.SetBlockProfileRate(int(time.Millisecond / 10)) // sample blocking events of about 100µs and more
	runtime.SetMutexProfileFraction(5)                      // 1 in 5 contention events

	go func() {
		for {
			atomic.AddUint64(&sink, burnCPU(20_000_000))
			time.Sleep(10 * time.Millisecond)
		}
	}()
	go leakMemory(*leakMax)
	contendMutex()
	contendChannel()

	log.Printf("demo: serving http://%s/debug/pprof/", *listen)
	log.Fatal(http.ListenAndServe(*listen, nil))
}
