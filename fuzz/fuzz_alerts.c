/*
 * fuzz_alerts — libFuzzer target for the Alertmanager webhook reader
 * pd__alert_msg_parse (src/api/alerts_parse.c, POST /api/v1/alerts).
 *
 * Input: any bytes, as a request body. Seed corpus: fuzz/corpus/alerts
 * (Alertmanager 0.25's messages: firing, resolved, grouped).
 * Properties checked besides the sanitizers: an error sets a message and
 * leaves the message empty; a success gives n alerts each with a non-empty
 * label set and, when it has a key, a NUL-terminated one.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "api/api_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pd__alert_msg m;
    char msg[600] = "";
    int rc = pd__alert_msg_parse(data, size, &m, msg, sizeof msg);
    if (rc == PD_ENOMEM)
        return 0;
    if (rc) {
        if (!msg[0] || m.n || m.alerts)
            abort();
        return 0;
    }
    for (size_t i = 0; i < m.n; i++) {
        if (!m.alerts[i].labels || !m.alerts[i].labels->n)
            abort();
        if (m.alerts[i].key)
            (void)strlen(m.alerts[i].key);
    }
    pd__alert_msg_release(&m);
    return 0;
}
