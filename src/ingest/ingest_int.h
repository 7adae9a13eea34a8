/*
 * ingest/ingest_int.h — declarations shared by the files of src/ingest only.
 */
#ifndef PD_INGEST_INGEST_INT_H
#define PD_INGEST_INGEST_INT_H

#include "ingest/ingest.h"

/* opts (or the defaults when NULL) with every 0 cap replaced by its
 * default. */
pd_ingest_limits pd__ingest_limits_effective(const pd_ingest_opts *opts);

/* Splits the next line off *pos within data[0..len): sets *line and *line_len
 * (without "\n" or "\r\n") and advances *pos. Returns 1 for a line, 0 at
 * the end of data. */
int pd__ingest_next_line(const char *data, size_t len, size_t *pos, const char **line,
                         size_t *line_len);

#endif
