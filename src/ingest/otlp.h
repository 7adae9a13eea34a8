/*
 * ingest/otlp.h — OTLP profiles (opentelemetry-proto v1.11.0,
 * profiles/v1development, vendored under third_party/opentelemetry-proto)
 * into pprof profiles, for POST /v1development/profiles.
 *
 * An ExportProfilesServiceRequest holds a shared dictionary (mapping,
 * location, function, link, string, attribute and stack tables; index 0
 * of each is the zero value meaning "none") and resource -> scope ->
 * profile. Each Profile becomes one pprof profile: its one sample type,
 * period type and period, time and duration; each Sample's stack (stack
 * table -> location indices, leaf first as pprof) with its locations
 * (mapping, address, lines -> functions); the sample's value (values[0],
 * or the number of timestamps when values is empty) and its attributes as
 * pprof labels (string values as str, int values as num with the
 * attribute's unit; other kinds as their text).
 *
 * Series labels of a profile: the resource's string/int/bool attributes,
 * service.name as service_name, other names as given (UTF-8 label names,
 * base/labels.h: "host.name", "k8s.pod.name"; "__" names and names the label
 * rules refuse are left out); __name__ is the sample type's name, or the
 * period type's when the sample type is "samples" (the eBPF profiler's
 * samples/count with period type cpu), with characters outside
 * [a-zA-Z0-9_] as '_'.
 *
 * Every index is checked against its table; a bad one rejects that profile
 * (the others of the request are converted: OTLP's partial success).
 */
#ifndef PD_INGEST_OTLP_H
#define PD_INGEST_OTLP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "base/error.h"
#include "base/buf.h"
#include "base/labels.h"
#include "pprof/pprof.h"

/* Caps; 0 fields mean the defaults. */
typedef struct pd_otlp_limits {
    size_t max_nesting;     /* AnyValue/message nesting on the wire; default 16 */
    size_t max_table;       /* entries of any dictionary table; default 1,000,000 */
    size_t max_profiles;    /* profiles per request; default 10,000 */
    size_t max_attributes;  /* attribute_table entries and resource attributes; default 10,000 */
    pd_pprof_limits pprof;  /* per built profile */
} pd_otlp_limits;

pd_otlp_limits pd_otlp_limits_default(void);

/* One converted profile with the series labels it belongs to. */
typedef struct pd_otlp_profile {
    pd_labels labels;
    pd_profile profile;
    int64_t time_ms; /* time_unix_nano / 1e6 (0 when unset) */
} pd_otlp_profile;

typedef struct pd_otlp_result {
    pd_otlp_profile *p; /* n converted */
    size_t n;
    size_t rejected;       /* profiles refused (bad indices, caps) */
    char first_error[512]; /* the first refusal, "resource 0 scope 0 profile 2: ..." */
} pd_otlp_result;

/* Decodes the protobuf ExportProfilesServiceRequest body[0..len) (not
 * compressed) and converts every profile into *out (release with
 * pd_otlp_result_release). Errors of the whole request: PD_EPARSE (not
 * a request; err says so), PD_ETOOBIG (nesting or a table over its cap,
 * named), PD_ENOMEM; then *out holds nothing. Refused profiles are counted
 * in out->rejected, not errors. */
int pd_otlp_convert(const uint8_t *body, size_t len, const pd_otlp_limits *lim,
                    pd_otlp_result *out /* OUT */, pd_err *err);

void pd_otlp_result_release(pd_otlp_result *r);

/* The ExportProfilesServiceResponse for `rejected` profiles with message
 * msg (NULL/"" when none), protobuf, appended to out. 0 or PD_ENOMEM. */
int pd_otlp_response(int64_t rejected, const char *msg, pd_buf *out);

/* OTLP/JSON (otlp_json.c): the JSON form of an ExportProfilesServiceRequest
 * (lowerCamelCase or snake_case names, int64 as strings or numbers, enums
 * as ints, bytes base64, trace/span ids hex; unknown fields ignored)
 * re-encoded as its binary protobuf, appended to out, for pd_otlp_convert.
 * Objects nest at most max_depth deep (0: 16). PD_EPARSE (not JSON, or a
 * value of the wrong kind, named by message and field), PD_ETOOBIG, PD_ENOMEM. */
int pd_otlp_json_to_protobuf(const char *json, size_t len, size_t max_depth, pd_buf *out, pd_err *err);

/* The JSON ExportProfilesServiceResponse: {} or {"partialSuccess":
 * {"rejectedProfiles":"N","errorMessage":"..."}}, appended. 0 or PD_ENOMEM. */
int pd_otlp_json_response(int64_t rejected, const char *msg, pd_buf *out);

#endif
