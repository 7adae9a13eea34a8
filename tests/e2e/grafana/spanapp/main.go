// spanapp: a Go program traced with OpenTelemetry whose CPU samples carry
// the span of the work they belong to — what Grafana's "Profiles for this
// span" (Tempo -> Pyroscope -> profd's SelectMergeSpanProfile) needs. Used
// by tests/e2e/grafana/spans.test.mjs.
//
// Built with Debian's Go 1.19 against Debian's OpenTelemetry Go packages
// only (golang-opentelemetry-otel-dev: the API, the SDK and its stdout
// exporter under /usr/share/gocode), in GOPATH mode, with no network.
//
// grafana/otel-profiling-go (the package Pyroscope documents for this, not
// packaged by Debian) is NOT used: spanLabels below does what it does, in
// our own words and with the same label names. It wraps a TracerProvider;
// when a span starts with no local root span in its context (the first
// span of a trace in this process), the goroutine's pprof labels get
// span_id = the span's id as 16 hex digits (SpanID.String()) and
// span_name = its name (runtime/pprof.SetGoroutineLabels), and the span
// gets the attribute pyroscope.profile.id = that id (what makes Grafana
// offer "Profiles for this span"); child spans inherit the root's labels;
// when the root span ends, the goroutine's labels from before it come back.
//
// The program serves net/http/pprof on -listen (profd scrapes its CPU
// profile) and runs, over and over, a root span "spanA" spinning in
// funcA and a root span "spanB" spinning in funcB, each -span long, on
// their own goroutines. Each span's record is written to stdout by the
// SDK's stdout exporter when it ends (one JSON object per line; its
// SpanContext.SpanID is the id the test asks profd for).
package main

import (
	"context"
	"flag"
	"log"
	"net"
	"net/http"
	_ "net/http/pprof"
	"os"
	"runtime/pprof"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// ---- the labels (what otel-profiling-go does, written anew) ----

const (
	spanIDLabel      = "span_id"
	spanNameLabel    = "span_name"
	profileIDAttrKey = "pyroscope.profile.id"
)

type spanLabels struct{ tp trace.TracerProvider }

func (p spanLabels) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return labelTracer{p.tp.Tracer(name, opts...)}
}

type labelTracer struct{ tr trace.Tracer }

type rootKey struct{}

func (t labelTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	before := ctx
	ctx, span := t.tr.Start(ctx, name, opts...)
	if ctx.Value(rootKey{}) != nil || !span.SpanContext().IsSampled() {
		return ctx, span // a child span: the root's labels stay
	}
	id := span.SpanContext().SpanID().String()
	span.SetAttributes(attribute.String(profileIDAttrKey, id))
	ctx = context.WithValue(ctx, rootKey{}, true)
	ctx = pprof.WithLabels(ctx, pprof.Labels(spanIDLabel, id, spanNameLabel, name))
	pprof.SetGoroutineLabels(ctx)
	return ctx, restoreOnEnd{span, before}
}

// restoreOnEnd gives the goroutine its labels from before the root span.
type restoreOnEnd struct {
	trace.Span
	before context.Context
}

func (s restoreOnEnd) End(opts ...trace.SpanEndOption) {
	s.Span.End(opts...)
	pprof.SetGoroutineLabels(s.before)
}

// ---- the work ----

var sink uint64

//go:noinline
func funcA(until time.Time) {
	x := uint64(1)
	for time.Now().Before(until) {
		for i := 0; i < 10000; i++ {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	sink += x
}

//go:noinline
func funcB(until time.Time) {
	x := uint64(7)
	for time.Now().Before(until) {
		for i := 0; i < 10000; i++ {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
		}
	}
	sink += x
}

func loop(tr trace.Tracer, name string, work func(time.Time), d time.Duration) {
	for {
		ctx, span := tr.Start(context.Background(), name)
		_, child := tr.Start(ctx, name+"/work") // inherits the root's labels
		work(time.Now().Add(d))
		child.End()
		span.End()
	}
}

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address of net/http/pprof")
	spanDur := flag.Duration("span", time.Second, "how long each span spins")
	flag.Parse()

	exp, err := stdouttrace.New(stdouttrace.WithWriter(os.Stdout))
	if err != nil {
		log.Fatal(err)
	}
	sdk := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp),
		sdktrace.WithSampler(sdktrace.AlwaysSample()))
	tr := spanLabels{sdk}.Tracer("spanapp")

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("listening on %s", ln.Addr())
	go loop(tr, "spanA", funcA, *spanDur)
	go loop(tr, "spanB", funcB, *spanDur)
	log.Fatal(http.Serve(ln, nil))
}
