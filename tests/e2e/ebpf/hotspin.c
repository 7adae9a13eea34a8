/* The target of tests/e2e/ebpf_agent.test.mjs: spins in hot_spin(), called
 * by spin_caller(), for argv[1] seconds (default 600). Built by the test
 * with clang -O0 -fno-omit-frame-pointer so the agent's frame-pointer walk
 * sees every frame. VARIANT changes the code (and so the build ID) of the
 * copy whose debug file is uploaded rather than served by debuginfod. */
#include <stdlib.h>
#include <time.h>

#ifndef VARIANT
#define VARIANT 1
#endif

volatile unsigned long sink;

__attribute__((noinline)) void hot_spin(void)
{
    for (unsigned long i = 0; i < 50000000UL; i++)
        sink += i * VARIANT;
}

__attribute__((noinline)) void spin_caller(void)
{
    hot_spin();
}

int main(int argc, char **argv)
{
    time_t end = time(NULL) + (argc > 1 ? atoi(argv[1]) : 600);
    while (time(NULL) < end)
        spin_caller();
    return 0;
}
