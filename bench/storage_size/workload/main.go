// Command workload is a Go program for bench/storage_size that is *not* the
// demo the tiny-profile encoding was tuned on (examples/demo): a small job
// service whose mutex, block, threadcreate and goroutine profiles come from
// other code — a sharded cache behind sync.Mutex and sync.RWMutex, a
// pipeline of buffered and unbuffered channels, fan-out requests joined by
// sync.WaitGroup, a sync.Cond batcher, select with timers, per-request
// goroutines that come and go, an HTTP client calling the program's own
// handlers, and now and then a goroutine that exits with its OS thread
// locked (so the runtime creates threads while it runs: threadcreate grows).
// The seed and the profile rates make two instances differ in what they
// record (issue 27 item 4: held-out data).
//
//	workload -listen=127.0.0.1:0 [-seed=1] [-mutexfrac=1] [-blockrate=1]
//	         [-workers=6] [-rate=40]
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand"
	"net"
	"net/http"
	_ "net/http/pprof"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

var sink uint64

type shard struct {
	mu sync.Mutex
	m  map[int]int
}

type cache struct{ shards [4]shard }

//go:noinline
func (c *cache) get(k int) (int, bool) {
	s := &c.shards[k%len(c.shards)]
	s.mu.Lock()
	v, ok := s.m[k]
	s.mu.Unlock()
	return v, ok
}

//go:noinline
func (c *cache) put(k, v int) {
	s := &c.shards[k%len(c.shards)]
	s.mu.Lock()
	s.m[k] = v
	if len(s.m) > 512 {
		for kk := range s.m {
			delete(s.m, kk)
			break
		}
	}
	s.mu.Unlock()
}

var (
	cfgMu sync.RWMutex
	cfg   = map[string]int{"limit": 10}
)

//go:noinline
func readConfig(key string) int {
	cfgMu.RLock()
	defer cfgMu.RUnlock()
	return cfg[key]
}

//go:noinline
func reloadConfig(r *rand.Rand) {
	for {
		time.Sleep(time.Duration(200+r.Intn(300)) * time.Millisecond)
		cfgMu.Lock()
		cfg["limit"] = 5 + r.Intn(20)
		time.Sleep(time.Duration(r.Intn(3)) * time.Millisecond)
		cfgMu.Unlock()
	}
}

//go:noinline
func compute(n int) uint64 {
	var x uint64 = 88172645463325252
	for i := 0; i < n; i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	return x
}

// pipeline: stage 1 (unbuffered) -> stage 2 (buffered 8) -> a slow sink.
func pipeline(r *rand.Rand) {
	in := make(chan int)
	mid := make(chan int, 8)
	go func() {
		for v := range in {
			mid <- v * 2
		}
	}()
	go func() {
		for v := range mid {
			atomic.AddUint64(&sink, compute(2000+v%1000))
			time.Sleep(time.Duration(1+r.Intn(4)) * time.Millisecond)
		}
	}()
	for i := 0; ; i++ {
		in <- i
		if i%64 == 0 {
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// batcher: producers signal a sync.Cond, one consumer takes batches.
func batcher() {
	var mu sync.Mutex
	c := sync.NewCond(&mu)
	pending := 0
	go func() {
		for {
			mu.Lock()
			for pending < 16 {
				c.Wait()
			}
			pending = 0
			mu.Unlock()
			time.Sleep(3 * time.Millisecond)
		}
	}()
	for g := 0; g < 3; g++ {
		go func(g int) {
			for {
				mu.Lock()
				pending++
				mu.Unlock()
				c.Signal()
				time.Sleep(time.Duration(1+g) * time.Millisecond)
			}
		}(g)
	}
}

// request: fan out to k lookups, join them, maybe time out in a select.
//
//go:noinline
func request(c *cache, r *rand.Rand, id int) int {
	k := 2 + id%4
	var wg sync.WaitGroup
	res := make(chan int, k)
	for i := 0; i < k; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			key := (id*31 + i*7) % 2048
			if v, ok := c.get(key); ok {
				res <- v
				return
			}
			v := int(compute(500+key) % 1000)
			c.put(key, v)
			res <- v
		}(i)
	}
	wg.Wait()
	close(res)
	sum := 0
	for v := range res {
		sum += v
	}
	done := make(chan struct{})
	go func() {
		time.Sleep(time.Duration(r.Intn(3)) * time.Millisecond)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(time.Millisecond):
	}
	return sum + readConfig("limit")
}

// lockedExit: a goroutine that exits with its thread locked takes the thread
// with it; the runtime starts another when it needs one (threadcreate).
func lockedExit(r *rand.Rand) {
	for {
		time.Sleep(time.Duration(20+r.Intn(40)) * time.Second)
		done := make(chan struct{})
		go func() {
			runtime.LockOSThread()
			atomic.AddUint64(&sink, compute(1000))
			close(done)
		}()
		<-done
	}
}

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to serve /debug/pprof/ on (port 0: any; the address is printed)")
	seed := flag.Int64("seed", 1, "random seed")
	mutexfrac := flag.Int("mutexfrac", 1, "runtime.SetMutexProfileFraction")
	blockrate := flag.Int("blockrate", 1, "runtime.SetBlockProfileRate (ns)")
	workers := flag.Int("workers", 6, "request workers")
	rate := flag.Float64("rate", 40, "requests per second through HTTP, all workers")
	flag.Parse()
	runtime.SetMutexProfileFraction(*mutexfrac)
	runtime.SetBlockProfileRate(*blockrate)

	c := &cache{}
	for i := range c.shards {
		c.shards[i].m = map[int]int{}
	}
	rnd := func(i int64) *rand.Rand { return rand.New(rand.NewSource(*seed*100 + i)) }
	go reloadConfig(rnd(1))
	go pipeline(rnd(2))
	go lockedExit(rnd(3))
	batcher()

	var ids int64
	http.HandleFunc("/work", func(w http.ResponseWriter, req *http.Request) {
		id := int(atomic.AddInt64(&ids, 1))
		fmt.Fprintln(w, request(c, rnd(int64(10+id%8)), id))
	})
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ln.Addr().String())
	go func() { log.Fatal(http.Serve(ln, nil)) }()

	per := time.Duration(float64(time.Second) * float64(*workers) / *rate)
	url := "http://" + ln.Addr().String() + "/work"
	for w := 0; w < *workers; w++ {
		go func(w int) {
			r := rnd(int64(100 + w))
			cl := &http.Client{Transport: &http.Transport{DisableKeepAlives: w%2 == 0}}
			for {
				resp, err := cl.Get(url + "?w=" + strconv.Itoa(w))
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				time.Sleep(per/2 + time.Duration(r.Int63n(int64(per))))
			}
		}(w)
	}
	select {}
}
