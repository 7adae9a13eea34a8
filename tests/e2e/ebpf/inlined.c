/* The target of tests/e2e/ebpf_agent.test.mjs's inlined-frames test: built
 * with -O2 -g -fno-omit-frame-pointer, the static inline mix_step() is
 * inlined into inline_caller() (the test checks with eu-addr2line -i that
 * the program has no mix_step symbol and its hot address is in mix_step
 * inlined into inline_caller). profd, which sees the address only (the
 * binary is stripped; its .debug uploaded), must show mix_step above
 * inline_caller, as two lines of one pprof location. */
#include <stdlib.h>
#include <time.h>

volatile unsigned long sink;

static inline unsigned long mix_step(unsigned long h, unsigned long i)
{
    h ^= i * 0x9e3779b97f4a7c15UL;
    h = (h << 13) | (h >> 51);
    return h * 5 + 0xe6546b64UL;
}

__attribute__((noinline)) void inline_caller(void)
{
    unsigned long h = sink;
    for (unsigned long i = 0; i < 50000000UL; i++)
        h = mix_step(h, i);
    sink = h;
}

int main(int argc, char **argv)
{
    time_t end = time(NULL) + (argc > 1 ? atoi(argv[1]) : 600);
    while (time(NULL) < end)
        inline_caller();
    return 0;
}
