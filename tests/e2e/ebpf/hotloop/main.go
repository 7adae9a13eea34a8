// The Go target of tests/e2e/ebpf_agent.test.mjs: spins in main.hotLoop
// until killed (Go keeps frame pointers on amd64 and arm64).
package main

import "fmt"

var sink uint64

//go:noinline
func hotLoop() {
	for i := uint64(0); i < 100000000; i++ {
		sink += i
	}
}

func main() {
	for {
		hotLoop()
		if sink == 42 {
			fmt.Println(sink)
		}
	}
}
