/* tests/unit/ingest/convert_tool.c — `profd convert` without the rest of
 * profd: `pd_ingest_convert_tool ARGS...` runs `profd convert ARGS...` by
 * handing pd_ingest_convert_main an argv whose argv[0] is "convert", as
 * src/main.c does for the real binary. */
#include "ingest/ingest.h"

int main(int argc, char **argv)
{
    argv[0] = "convert";
    return pd_ingest_convert_main(argc, argv);
}
