/*
 * examples/agent_demo/hot.c — a C program profiled by libprofd-agent: one
 * known hot function (demo_hot_spin, CPU) and one known allocating function
 * (demo_alloc_keep, keeps ~48 MiB live in 64 KiB blocks and churns them),
 * serving /debug/pprof/profile and /debug/pprof/heap on 127.0.0.1.
 *
 *   hot [PORT [SECONDS]]   PORT 0 (default): any free port; runs SECONDS
 *                          (default 120) and exits. Prints "port N heap
 *                          on|off" on stdout once serving.
 * Build with -fno-omit-frame-pointer and link with -rdynamic (symbols;
 * static functions are named from the .symtab, e.g. demo_static_mix).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "agent/profd_agent.h"

#define KEEP 768
#define BLOCK (64 * 1024)

static volatile int g_stop;
volatile uint64_t demo_sink;

__attribute__((noipa)) uint64_t demo_hot_spin(uint64_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (uint64_t i = 0; i < n; i++) {
        h ^= i;
        h *= 1099511628211ull;
    }
    return h;
}

/* A static function: not in the dynamic symbol table even with -rdynamic;
 * the agent names it from the executable's .symtab. */
__attribute__((noipa)) static uint64_t demo_static_mix(uint64_t n)
{
    uint64_t h = 88172645463325252ull;
    for (uint64_t i = 0; i < n; i++) {
        h ^= h << 13;
        h ^= h >> 7;
        h ^= h << 17;
    }
    return h;
}

__attribute__((noipa)) void demo_cold_sleep(void)
{
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
}

static void *hot_thread(void *arg)
{
    (void)arg;
    while (!g_stop) {
        demo_sink += demo_hot_spin(2000000);
        demo_sink += demo_static_mix(200000); /* well below demo_hot_spin, also at -O0 (ASan) */
        demo_cold_sleep();
    }
    return NULL;
}

static void *keep[KEEP];

__attribute__((noipa)) void *demo_alloc_keep(size_t i)
{
    void *p = malloc(BLOCK);
    if (p)
        memset(p, (int)i, 64);
    return p;
}

static void *alloc_thread(void *arg)
{
    (void)arg;
    size_t i = 0;
    while (!g_stop) {
        size_t k = i % KEEP;
        free(keep[k]);
        keep[k] = demo_alloc_keep(i);
        i++;
        if (i % 64 == 0) {
            struct timespec ts = {0, 2000000};
            nanosleep(&ts, NULL);
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    unsigned port = argc > 1 ? (unsigned)atoi(argv[1]) : 0;
    unsigned secs = argc > 2 ? (unsigned)atoi(argv[2]) : 120;
    pd_agent_server *srv;
    pd_err err = {{0}};
    if (pd_agent_serve("127.0.0.1", (uint16_t)port, &srv, &err) < 0) {
        fprintf(stderr, "hot: %s\n", err.msg);
        return 1;
    }
    pthread_t t1, t2;
    pthread_create(&t1, NULL, hot_thread, NULL);
    pthread_create(&t2, NULL, alloc_thread, NULL);
    printf("port %u heap %s\n", pd_agent_server_port(srv), pd_agent_heap_enabled() ? "on" : "off");
    fflush(stdout);
    sleep(secs);
    g_stop = 1;
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    pd_agent_server_stop(srv);
    for (size_t k = 0; k < KEEP; k++)
        free(keep[k]);
    return 0;
}
