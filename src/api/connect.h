/*
 * api/connect.h — a small server side of the Connect protocol (connectrpc.com,
 * "Connect protocol reference"), unary RPCs only, over protobuf-c messages
 * generated from vendored upstream .proto files (third_party/).
 *
 *   request:  POST /<package>.<Service>/<Method>
 *             Content-Type: application/proto | application/json
 *             (";charset=utf-8" and the aliases application/protobuf and
 *             application/x-protobuf accepted)
 *             Content-Encoding (or Connect-Content-Encoding): gzip | identity
 *   response: 200 with the same codec; gzip when Accept-Encoding names gzip
 *             and the body is over 1 KiB.
 *   error:    HTTP status by Connect's table (invalid_argument 400,
 *             not_found 404, resource_exhausted 429, deadline_exceeded 504,
 *             unimplemented 501, unavailable 503, internal 500, ...) with
 *             application/json {"code":"invalid_argument","message":"..."}.
 *             A media type that is neither codec gets 415, another method
 *             than POST 405 (as connect-go does).
 *
 * JSON is proto3's canonical JSON mapping done by reflection over the
 * protobuf-c descriptors (connect_json.c): field names in lowerCamelCase on
 * output, both lowerCamelCase and the proto name accepted on input; int64 and
 * uint64 as strings on output (numbers or strings on input); bytes as base64
 * (standard or URL-safe, padding optional); enums by name (numbers accepted);
 * default values omitted on output; unknown fields are an error.
 *
 * Caps: the HTTP server caps the body as received; a gzip body is held to
 * PD_CONNECT_MAX_DECOMPRESSED bytes after inflating; JSON nesting to 64.
 */
#ifndef PD_API_CONNECT_H
#define PD_API_CONNECT_H

#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>
#include <stddef.h>
#include "base/buf.h"
#include "base/error.h"
#include "http/server.h"

/* Largest request body after gzip decoding, bytes. */
#define PD_CONNECT_MAX_DECOMPRESSED ((size_t)64 << 20)

typedef enum { PD_CONNECT_PROTO = 0, PD_CONNECT_JSON = 1 } pd_connect_codec;

/* Connect error codes (the names are Connect's wire strings). */
typedef enum {
    PD_CONNECT_CANCELED,
    PD_CONNECT_UNKNOWN,
    PD_CONNECT_INVALID_ARGUMENT,
    PD_CONNECT_DEADLINE_EXCEEDED,
    PD_CONNECT_NOT_FOUND,
    PD_CONNECT_ALREADY_EXISTS,
    PD_CONNECT_PERMISSION_DENIED,
    PD_CONNECT_RESOURCE_EXHAUSTED,
    PD_CONNECT_FAILED_PRECONDITION,
    PD_CONNECT_ABORTED,
    PD_CONNECT_OUT_OF_RANGE,
    PD_CONNECT_UNIMPLEMENTED,
    PD_CONNECT_INTERNAL,
    PD_CONNECT_UNAVAILABLE,
    PD_CONNECT_DATA_LOSS,
    PD_CONNECT_UNAUTHENTICATED,
} pd_connect_code;

/* One call: what the request asked for, kept to shape the reply. */
typedef struct pd_connect_call {
    pd_connect_codec codec;
    bool gzip_reply; /* Accept-Encoding names gzip */
} pd_connect_call;

/* The wire name of code ("invalid_argument") and its HTTP status (400). */
const char *pd_connect_code_name(pd_connect_code code);
int pd_connect_code_status(pd_connect_code code);

/* The Connect code for a profd error (PD_EPARSE/PD_EINVAL/PD_EAMBIGUOUS/
 * PD_EOUTOFBOUNDS invalid_argument,
 * PD_ENOTFOUND not_found, PD_ETOOBIG resource_exhausted, PD_ETIMEOUT
 * deadline_exceeded, PD_ECANCELED canceled, PD_ENOMEM resource_exhausted,
 * the rest internal). */
pd_connect_code pd_connect_code_of(int rc);

/* Decodes the request of a unary call into a new message of descriptor d.
 * On success *out is a malloc'd message (free with
 * protobuf_c_message_free_unpacked(*out, NULL)) and call is filled.
 * On failure nothing is held and the error reply has been written into
 * resp (status, Connect error JSON), the refusal counted in
 * profd_rejected_input_total{reason="connect_..."}; the return value is then
 * negative (PD_EINVAL method/media type/message, PD_EPARSE bad gzip/JSON/
 * protobuf, PD_ETOOBIG a cap, PD_ENOMEM). */
int pd_connect_decode(const pd_http_request *req, const ProtobufCMessageDescriptor *d,
                      ProtobufCMessage **out /* OUT */, pd_connect_call *call /* OUT */,
                      pd_http_response *resp);

/* The same decoding without HTTP: body[0..len) (after any gzip) in codec
 * into a new message, for pd_connect_decode and the fuzz target. err names
 * the field or byte offset. Errors: PD_EPARSE, PD_EINVAL, PD_ENOMEM. */
int pd_connect_unpack(pd_connect_codec codec, const uint8_t *body, size_t len,
                      const ProtobufCMessageDescriptor *d, ProtobufCMessage **out /* OUT */,
                      pd_err *err);

/* Writes msg as the successful reply of call. A reply over resp's body cap
 * becomes a resource_exhausted error. */
void pd_connect_reply(pd_http_response *resp, const pd_connect_call *call,
                      const ProtobufCMessage *msg);

/* Writes a Connect error reply: status by code, JSON body with message
 * (printf format). */
void pd_connect_error(pd_http_response *resp, pd_connect_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- JSON mapping (connect_json.c) ---- */

/* Appends msg's canonical proto3 JSON to out. PD_ENOMEM, PD_ETOOBIG. */
int pd_connect_json_encode(const ProtobufCMessage *msg, pd_buf *out);
/* Parses JSON text into a new malloc'd message of descriptor d (free with
 * protobuf_c_message_free_unpacked). Errors: PD_EPARSE (JSON syntax, err
 * with line and column), PD_EINVAL (a field of the wrong type or unknown,
 * err naming it), PD_ENOMEM. */
int pd_connect_json_decode(const char *text, size_t len, const ProtobufCMessageDescriptor *d,
                           ProtobufCMessage **out /* OUT */, pd_err *err);

#endif
