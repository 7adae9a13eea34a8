/* The C target of the source view's tests (issue 31 item 7:
 * tests/e2e/source_debuginfod.test.mjs, tests/ui/source.test.mjs): built with
 * clang -g, stripped, its debug info and this file served by Debian's
 * debuginfod; profiled by profd-agent (eBPF). hot_line() spends nearly all
 * its time on the line marked HOT (a division each turn); cold_spin() lives
 * in cold.c, whose source debuginfod does not have. Runs argv[1] seconds
 * (default 600). */
#include <stdlib.h>
#include <time.h>

volatile unsigned long sink;

void cold_spin(unsigned long n);

__attribute__((noinline)) void hot_line(unsigned long n)
{
    for (unsigned long i = 1; i < n; i++)
        sink += (i * 7 + sink) % 1000003; /* HOT */
}

int main(int argc, char **argv)
{
    time_t end = time(NULL) + (argc > 1 ? atoi(argv[1]) : 600);
    while (time(NULL) < end) {
        hot_line(4000000);
        cold_spin(1000000);
    }
    return 0;
}
