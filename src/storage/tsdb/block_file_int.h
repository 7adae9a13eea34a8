/*
 * storage/tsdb/block_file_int.h — what block_write.c (the writer) and
 * block.c (the reader and check) share: the chunks file's framing
 * constants and the durable-file helpers. Private to src/storage/tsdb.
 * Layouts: the top of block.c, docs/format/{index,symbols,chunks}.md.
 */
#ifndef PD_STORAGE_TSDB_BLOCK_FILE_INT_H
#define PD_STORAGE_TSDB_BLOCK_FILE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HDR 8 /* magic 4 + version 1 + reserved 3, every block file */
/* chunks/000001 has its own version (docs/format/chunks.md): 4 = as 3 with
 * time chunks whose ts column holds each interval minus the median interval
 * and whose columns of non-negative values skip zigzag (written); 3 = time
 * chunks of columns holding time_nanos, value groups of sparse residuals
 * whose profiles may repeat the previous header and take time_nanos and
 * their last listed sample's values from the time chunk (read); 2 = time
 * chunks of rows, value groups without those (read); 1 (dense value deltas)
 * is refused. */
#define PD_CHUNKS_VERSION 4
#define PD_CHUNKS_VERSION_MIN 2
#define FRAME_HDR 5                /* chunk frame: u32 length + u8 kind */
#define MAX_FILE (4ull << 30)      /* index/symbols files read whole: cap */
#define MAX_GROUP_RAW (1ull << 31) /* a value group's decompressed payload */
#define CHUNKS_NAME "chunks/000001"

enum { K_TIME = 1, K_TIME_ZSTD = 2, K_VALUE = 3 };

static inline void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* fsync of path (dir: a directory). 0 or -errno. */
int pd__block_fsync_path(const char *path, bool dir);
/* Writes data[0..len) to path (created or truncated) and fsyncs it.
 * 0 or -errno. */
int pd__block_write_file(const char *path, const void *data, size_t len);

#endif
