/*
 * ingest/otlp.h — OTLP profiles (opentelemetry-proto v1.11.0,
 * profiles/v1development, vendored under third_party/opentelemetry-proto)
 * into pprof profiles, for POST /v1development/profiles.
 *
 * An ExportProfilesServiceRequest holds a shared dictionary (mapping,
 * location, function, link, string, attribute and stack tables; index 0
 * of each is the zero value meaning "none") and resource -> scope ->
 * profile. Exactly as the vendored profiles.proto says:
 *
 * - Profiles of one scope with the same time_unix_nano, duration_nano,
 *   period_type and period (the standard conversion of one pprof with n
 *   sample types, opentelemetry-collector-contrib pkg/translator/pprof:
 *   one Profile per sample type) become ONE pprof profile with their n
 *   sample types in request order; a sample of the k-th carries value k
 *   (others 0), samples with equal stack and attributes are joined. A
 *   profile whose sample type the group already has starts a new group.
 *   A lone profile is one pprof with one sample type.
 * - A sample's value (Sample's three shapes): the sum of `values` (one
 *   aggregated value, or one value per timestamp: [2,2,3,3] is 10), else
 *   the number of timestamps_unix_nano (each worth 1). A sample with
 *   neither, or with values and timestamps of different counts, is refused
 *   (MUST in the spec) with its profile's group, named in partial_success.
 * - Stacks: stack table -> location indices, leaf first as pprof; each
 *   location's mapping, address and lines -> functions (name, system
 *   name, file, start line, line, column).
 * - Mapping attributes of the pprof conversion are pprof's mapping fields
 *   again: pprof.mapping.has_functions / has_filenames / has_line_numbers /
 *   has_inline_frames (bool true) set the has_* flags (so `go tool pprof`
 *   does not re-symbolize), process.executable.build_id.* the build id.
 * - Profile attributes pprof.profile.comment, [pprof.profile.]doc_url,
 *   drop_frames, keep_frames: pprof's fields of the same names.
 * - Sample attributes: pprof labels (string values as str, int values as
 *   num with the attribute's unit, bool and double as their text); an
 *   attribute index naming the zero entry (no key) is refused.
 * - A request of another release (v1.9.0 and older number Sample's values
 *   2, attribute_indices 3, link_index 4) is refused as a whole when its
 *   wire types give it away (a packed field 3); when they do not (no
 *   attributes: its values then read as attribute_indices, and its samples
 *   have no values), the neither-values-nor-timestamps rule refuses it.
 *
 * Series labels of a profile: the resource's string/int/bool attributes,
 * service.name as service_name, other names as given (UTF-8 label names,
 * base/labels.h: "host.name", "k8s.pod.name"; "__" names and names the label
 * rules refuse are left out); __name__ is the sample type's name, or the
 * period type's when the sample type is "samples" (the eBPF profiler's
 * samples/count with period type cpu); for a group of several profiles the
 * period type's name ("space" as "memory": Go's heap and allocs), else the
 * first profile's rule; characters outside [a-zA-Z0-9_] as '_'.
 *
 * Every index is checked against its table; a bad one rejects that profile
 * and those joined with it (the others of the request are converted:
 * OTLP's partial success).
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
    size_t max_nesting;    /* AnyValue/message nesting on the wire; default 16 */
    size_t max_table;      /* entries of any dictionary table; default 1,000,000 */
    size_t max_profiles;   /* profiles per request; default 10,000 */
    size_t max_attributes; /* attribute_table entries and resource attributes; default 10,000 */
    pd_pprof_limits pprof; /* per built profile */
} pd_otlp_limits;

pd_otlp_limits pd_otlp_limits_default(void);

/* One converted profile with the series labels it belongs to. */
typedef struct pd_otlp_profile {
    pd_labels labels;
    pd_profile profile;
    int64_t time_ms; /* time_unix_nano / 1e6 (0 when unset) */
    size_t n_joined; /* OTLP profiles joined into it (its sample types) */
} pd_otlp_profile;

typedef struct pd_otlp_result {
    pd_otlp_profile *p; /* n converted */
    size_t n;
    size_t rejected;       /* OTLP profiles refused (bad indices, caps, samples) */
    char first_error[512]; /* the first refusal, "resource 0 scope 0: profile 2 sample 5 ..." */
} pd_otlp_result;

/* Decodes the protobuf ExportProfilesServiceRequest body[0..len) (not
 * compressed) and converts every profile into *out (release with
 * pd_otlp_result_release). Errors of the whole request: PD_EPARSE (not
 * a request, or a request of another opentelemetry-proto release; err
 * says so), PD_ETOOBIG (nesting or a table over its cap, named),
 * PD_ENOMEM; then *out holds nothing. Refused profiles are counted
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
int pd_otlp_json_to_protobuf(const char *json, size_t len, size_t max_depth, pd_buf *out,
                             pd_err *err);

/* A google.rpc.Status (code, message; no details) for a refused request,
 * as OTLP/HTTP answers a 4xx/5xx: protobuf (google/rpc/status.proto field
 * numbers: 1 code int32, 2 message string) or, json, its JSON form
 * {"code":N,"message":"..."}. Appended to out. 0 or PD_ENOMEM. */
int pd_otlp_status(int code, const char *msg, bool json, pd_buf *out);

/* The JSON ExportProfilesServiceResponse: {} or {"partialSuccess":
 * {"rejectedProfiles":"N","errorMessage":"..."}}, appended. 0 or PD_ENOMEM. */
int pd_otlp_json_response(int64_t rejected, const char *msg, pd_buf *out);

#endif
