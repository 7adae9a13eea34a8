/*
 * agent/profd_agent.h — libprofd-agent: a CPU and heap profiler for C
 * programs that serves Go-shaped pprof, so profd (or `go tool pprof`)
 * scrapes a C program like a Go target with net/http/pprof.
 *
 * CPU: while a profile is being taken (pd_agent_cpu_profile), every thread
 * of the process gets a POSIX timer on its own CPU clock
 * (timer_create(CLOCK_THREAD_CPUTIME_ID of that thread) with
 * SIGEV_THREAD_ID, signal SIGPROF, first expiry randomised within one
 * period). Threads are found by scanning /proc/self/task at the start and
 * every 100 ms during the profile: neither pthread_create interposition nor
 * an explicit register call is needed; a thread that lives less than
 * ~100 ms may be missed. The SIGPROF handler walks frame pointers
 * (bounded depth 64; every frame address is checked to lie in the
 * interrupted thread's stack mapping, taken from a snapshot of
 * /proc/self/maps, so a bad frame pointer ends the walk instead of
 * faulting) and adds the stack to a fixed-size lock-free table. Build the
 * program with -fno-omit-frame-pointer (and link with -rdynamic for
 * symbols of the executable's own functions: dladdr reads the dynamic
 * symbol table only).
 *
 * Heap: malloc, free, calloc, realloc, reallocarray, posix_memalign,
 * aligned_alloc, memalign, valloc, pvalloc and malloc_usable_size are
 * interposed (the definitions live in the static library and in the shared
 * one: link or LD_PRELOAD). One allocation per 512 KiB on average is
 * sampled (Poisson, as tcmalloc and Go); the profile is Go's heap shape:
 * alloc_objects, alloc_space, inuse_objects, inuse_space, values unsampled
 * as Go does. Sampled blocks are served from the agent's own reserved
 * address range (64 GiB of address space, at 16 TiB when free; a sampled
 * block takes at least a 4 KiB page, and malloc_usable_size gives its
 * power-of-two size), the others by glibc untouched: free() tells them
 * apart with one compare. A sampled realloc moves the block. Under AddressSanitizer (which
 * owns malloc) the interposers are not compiled: pd_agent_heap_enabled()
 * is false and the heap profile has no samples and says why in a comment.
 *
 * Output: gzip pprof with mappings from /proc/self/maps (file, offset,
 * GNU build id from the ELF note), function names from dladdr1 (an address
 * past the symbol's size is left unnamed rather than misnamed).
 *
 * Thread safety: every function may be called from any thread; one CPU
 * profile at a time (a second gets PD_EEXIST, as Go's "cpu profiling
 * already in use"). SIGPROF is the agent's while a CPU profile runs.
 */
#ifndef PROFD_AGENT_H
#define PROFD_AGENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "base/buf.h"
#include "base/error.h"

/* CPU sampling rate in Hz when pd_agent_cpu_profile gets 0; as Go. */
#define PD_AGENT_DEFAULT_HZ 100
/* Mean bytes between heap samples; as tcmalloc and Go's MemProfileRate. */
#define PD_AGENT_DEFAULT_HEAP_RATE (512 * 1024)
/* Longest CPU profile pd_agent_cpu_profile accepts, seconds. */
#define PD_AGENT_MAX_SECONDS 3600

/* Sets the mean heap sampling interval in bytes (0: turn heap sampling
 * off; new allocations are no longer sampled, the ones sampled stay in the
 * profile until freed). The environment variable PROFD_AGENT_HEAP_RATE
 * sets it at load time (default PD_AGENT_DEFAULT_HEAP_RATE). */
void pd_agent_heap_set_rate(uint64_t bytes);

/* True when the heap interposers are compiled in (not under ASan) and the
 * rate is non-zero. */
bool pd_agent_heap_enabled(void);

/* Takes a CPU profile of the whole process for `seconds` (1..
 * PD_AGENT_MAX_SECONDS) at `hz` samples per CPU-second per thread (0:
 * PD_AGENT_DEFAULT_HZ; at most 1000), blocking the caller that long (less
 * when *cancel becomes true; cancel may be NULL), and appends it to out as
 * gzip pprof: sample types samples/count and cpu/nanoseconds, period
 * cpu/nanoseconds. Returns 0; PD_EINVAL (seconds or hz out of range),
 * PD_EEXIST (another CPU profile is running), PD_ENOMEM, PD_ETOOBIG
 * (out's cap), -errno from timer_create/sigaction; err says which. */
int pd_agent_cpu_profile(unsigned seconds, unsigned hz, const volatile bool *cancel, pd_buf *out,
                         pd_err *err);

/* Appends the heap profile (Go's shape: alloc_objects/count,
 * alloc_space/bytes, inuse_objects/count, inuse_space/bytes; period
 * space/bytes = the sampling rate; default sample type inuse_space) as gzip
 * pprof. alloc_* are cumulative since the agent was loaded, inuse_* are
 * the sampled allocations not freed yet. 0, PD_ENOMEM, PD_ETOOBIG. */
int pd_agent_heap_profile(pd_buf *out, pd_err *err);

/* Counters of what the agent dropped, for /metrics and tests. */
typedef struct pd_agent_stats {
    uint64_t cpu_samples;      /* SIGPROF samples recorded, since load */
    uint64_t cpu_dropped;      /* samples lost to a full table or a busy slot */
    uint64_t heap_samples;     /* allocations sampled, since load */
    uint64_t heap_dropped;     /* sampled allocations not tracked (table full) */
    uint64_t threads_profiled; /* thread timers created, since load */
} pd_agent_stats;

/* Fills *st. Never fails. */
void pd_agent_get_stats(pd_agent_stats *st /* OUT */);

/* ---- a tiny net/http/pprof ---- */

typedef struct pd_agent_server pd_agent_server;

/* Serves GET /debug/pprof/profile?seconds=N (default 30, 1..3600) and
 * GET /debug/pprof/heap (and /debug/pprof/allocs, the same profile with
 * default sample type alloc_space, as Go) on host:port (host a numeric
 * IPv4 address, e.g. "127.0.0.1"; port 0 picks a free one) with
 * libmicrohttpd, one thread per connection. Bad parameters get a 400
 * naming the parameter; a second concurrent CPU profile a 500 as Go.
 * The shared library (libprofd-agent.so) loads libmicrohttpd.so.12 with
 * dlopen on the first call, so that a process it is preloaded into and
 * that does not serve never loads it (nor GnuTLS behind it).
 * *out is NULL on failure. 0, PD_EINVAL (host), PD_ENOMEM, -errno (bind),
 * -ENOENT when libmicrohttpd cannot be loaded (the message names it). */
int pd_agent_serve(const char *host, uint16_t port, pd_agent_server **out /* OUT */, pd_err *err);

/* The port the server listens on. */
uint16_t pd_agent_server_port(const pd_agent_server *s);

/* Stops the server (waits for requests in progress) and frees it. NULL is
 * a no-op. */
void pd_agent_server_stop(pd_agent_server *s);

/* Starts a server if the environment variable PROFD_AGENT_LISTEN is set
 * ("HOST:PORT"), for programs that link or preload the agent without code
 * changes; harmless to call again. 0 or as pd_agent_serve.
 * The library constructor calls it unless PROFD_AGENT_COMM is set and
 * names neither the base name of /proc/self/exe nor the command name the
 * process was started as (so that wrappers preloading the agent into what
 * they run, like timeout(1) or pyenv's shims, leave the port to the real
 * program); after it served, children made by fork() drop the variable
 * (they cannot take the same port), while a program exec'd in place keeps
 * it and serves. */
int pd_agent_serve_from_env(pd_err *err);

#endif
