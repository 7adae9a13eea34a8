/*
 * fuzz_headsnap — libFuzzer target for the head snapshot reader of the
 * embedded store (src/storage/tsdb/headsnap.c, docs/format/head_snapshot.md):
 * pd__headsnap_parse (header, checksums, symbol tables, series and groups)
 * and pd__headsnap_verify (every group decoded against its table).
 *
 * Input: byte 0 bit 0 set: fix the checksums (the payload length in the
 * header, the header's and the payload's crc32c) so that mutations reach
 * the parsers behind them; bytes 1..: the file. Parsing must return 0 or an
 * error code, never crash, hang or leak.
 *
 * Seeds (fuzz/corpus/headsnap): a snapshot written by profd at a clean stop
 * (3 real Go heap profiles, two series), behind a selector byte.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "base/crc32c.h"
#include "base/error.h"
#include "storage/tsdb/headsnap_int.h"

static void le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t len = size - 1;
    uint8_t *p = malloc(len ? len : 1);
    if (!p)
        return 0;
    memcpy(p, data + 1, len);
    if ((data[0] & 1) && len >= 36) {
        uint64_t plen = len - 36;
        for (int i = 0; i < 8; i++)
            p[20 + i] = (uint8_t)(plen >> (8 * i));
        le32(p + 28, pd_crc32c(0, p, 28));
        le32(p + 32 + plen, pd_crc32c(0, p + 32, (size_t)plen));
    }
    pd_headsnap *h = NULL;
    pd_err err;
    pd_err_clear(&err);
    if (pd__headsnap_parse(p, len, &h, &err) == 0) {
        pd_err_clear(&err);
        (void)pd__headsnap_verify(h, &err);
        pd__headsnap_free(h);
    }
    free(p);
    return 0;
}
