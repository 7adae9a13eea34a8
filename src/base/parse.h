/*
 * base/parse.h — strict parsing of numbers from untrusted text (query
 * parameters, flags, config values).
 *
 * strtoull alone accepts " -1" (leading blanks and a sign, wrapping to
 * 2^64 - 1) and saturates a 23-digit number at ULLONG_MAX with only errno
 * to tell: "limit=%20-1" read as "all rows" (issue 19). These functions
 * take decimal digits only.
 */
#ifndef PD_BASE_PARSE_H
#define PD_BASE_PARSE_H

#include <stdint.h>

/* Parses s, which must be 1 to 20 decimal digits and nothing else (no sign,
 * no blanks, no "0x"), into *out; the value must be <= max.
 * Returns 0, or PD_EPARSE (not digits only, or empty) or PD_ETOOBIG (over max
 * or over 2^64 - 1); *out is untouched on error. */
int pd_parse_u64(const char *s, uint64_t max, uint64_t *out /* OUT */);

/* Matches argv[*i] against the flag name ("--name"), written as
 * "--name=value" or as "--name" followed by the value in the next argument
 * (then *i is advanced past it). Returns 1 matched (*val points into argv),
 * 0 argv[*i] is another flag (a longer name that starts with name included),
 * -1 "--name" is the last argument (its value is missing). */
int pd_parse_flag(int argc, char **argv, int *i, const char *name, const char **val /* OUT */);

#endif
