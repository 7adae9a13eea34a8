/*
 * pprof/pprof_int.h — declarations shared by the files of src/pprof only.
 */
#ifndef PD_PPROF_PPROF_INT_H
#define PD_PPROF_PPROF_INT_H

#include "pprof/pprof.h"

/* Field numbers of profile.proto (see pprof.h). */
enum {
    PF_SAMPLE_TYPE = 1,
    PF_SAMPLE = 2,
    PF_MAPPING = 3,
    PF_LOCATION = 4,
    PF_FUNCTION = 5,
    PF_STRING_TABLE = 6,
    PF_DROP_FRAMES = 7,
    PF_KEEP_FRAMES = 8,
    PF_TIME_NANOS = 9,
    PF_DURATION_NANOS = 10,
    PF_PERIOD_TYPE = 11,
    PF_PERIOD = 12,
    PF_COMMENT = 13,
    PF_DEFAULT_SAMPLE_TYPE = 14,
    PF_DOC_URL = 15,
};

/* Protobuf wire types. */
enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_SGROUP = 3, WT_EGROUP = 4, WT_I32 = 5 };

/* *lim with every 0 field replaced by its default (lim may be NULL). */
pd_pprof_limits pd__pprof_limits_effective(const pd_pprof_limits *lim);

/* Decodes raw protobuf bytes (no gzip) into p without validating or
 * indexing. On failure p is released. */
int pd__pprof_decode_raw(pd_profile *p /* OUT */, const uint8_t *data, size_t len,
                         const pd_pprof_limits *lim, pd_err *err);

#endif
