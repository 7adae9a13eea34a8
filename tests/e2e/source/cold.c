/* cold_spin(): the function of tests/e2e/source/hotline.c whose source file
 * the tests keep away from debuginfod (the source view's "not found"). */
extern volatile unsigned long sink;

__attribute__((noinline)) void cold_spin(unsigned long n)
{
    for (unsigned long i = 1; i < n; i++)
        sink ^= i * 3;
}
