// Command target is the Go scrape target of profd's collection tests: Go's
// net/http/pprof endpoints and a small Prometheus /metrics, optionally
// behind TLS (-tls.cert/-tls.key), basic auth (-basic=user:pass) or a bearer
// token (-bearer=TOKEN). Wrong or missing credentials get 401.
//
// Usage: target -listen=127.0.0.1:PORT [-tls.cert=F -tls.key=F] [-basic=u:p] [-bearer=T]
package main

import (
	"crypto/subtle"
	"flag"
	"fmt"
	"log"
	"net/http"
	_ "net/http/pprof"
	"sync/atomic"
)

var requests atomic.Int64

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	cert := flag.String("tls.cert", "", "TLS certificate (PEM)")
	key := flag.String("tls.key", "", "TLS key (PEM)")
	basic := flag.String("basic", "", "user:password required (basic auth)")
	bearer := flag.String("bearer", "", "bearer token required")
	flag.Parse()

	http.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprintf(w, "# TYPE target_requests_total counter\ntarget_requests_total %d\n", requests.Load())
	})
	var h http.Handler = http.DefaultServeMux
	inner := h
	h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if *basic != "" {
			u, p, ok := r.BasicAuth()
			if !ok || subtle.ConstantTimeCompare([]byte(u+":"+p), []byte(*basic)) != 1 {
				w.Header().Set("WWW-Authenticate", `Basic realm="target"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
		}
		if *bearer != "" && subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), []byte("Bearer "+*bearer)) != 1 {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		inner.ServeHTTP(w, r)
	})
	log.Printf("listening on %s", *listen)
	if *cert != "" {
		log.Fatal(http.ListenAndServeTLS(*listen, *cert, *key, h))
	}
	log.Fatal(http.ListenAndServe(*listen, h))
}
