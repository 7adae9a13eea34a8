/* tests/unit/ingest/perf_hot.c — the program perf_e2e.sh profiles: main
 * calls middle, which spends ~4/5 of its time in hot_leaf and ~1/5 in
 * warm_leaf. Built with -O0 -fno-omit-frame-pointer so that perf's
 * frame-pointer unwinding sees hot_leaf <- middle <- main. */
#include <stdio.h>
#include <stdlib.h>

static volatile unsigned long sink;

__attribute__((noinline)) static void hot_leaf(unsigned long n)
{
    for (unsigned long i = 0; i < n; i++)
        sink += i * i;
}

__attribute__((noinline)) static void warm_leaf(unsigned long n)
{
    for (unsigned long i = 0; i < n; i++)
        sink ^= i;
}

__attribute__((noinline)) static void middle(unsigned long n)
{
    hot_leaf(n * 4);
    warm_leaf(n);
}

int main(int argc, char **argv)
{
    unsigned long rounds = argc > 1 ? strtoul(argv[1], NULL, 10) : 20;
    for (unsigned long k = 0; k < rounds; k++)
        middle(1000000);
    printf("%lu\n", sink);
    return 0;
}
