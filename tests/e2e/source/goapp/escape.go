package main

// Functions whose file names, as the compiler records them (//line
// directives), point outside any source directory: profd must never read
// what they name (tests/e2e/source_view.test.mjs).

//line ../../../../../../../../etc/passwd:1
//go:noinline
func escapeUp(n int) {
	for i := 1; i < n; i++ {
		sink -= float64(i) / 3
	}
}

//line linked.go:1
//go:noinline
func escapeLink(n int) {
	for i := 1; i < n; i++ {
		sink -= float64(i) / 5
	}
}
