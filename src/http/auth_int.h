/*
 * http/auth_int.h — internals of the request gate (auth.c) shared with its
 * tests.
 */
#ifndef PD_HTTP_AUTH_INT_H
#define PD_HTTP_AUTH_INT_H

#include <stdint.h>

/* Test hook, NULL outside tests: called by pd_http_gate_check, on the
 * worker thread, with the bcrypt hash a password is about to be verified
 * against — once per verification that actually runs bcrypt (a cache miss;
 * a cached user:hash:password answers without one). For an unknown user the
 * hash is the gate's dummy hash (the highest cost in the file), so the
 * hook shows that an unknown user costs one bcrypt, as a known user's wrong
 * password does. Set it only while no request is in flight. */
extern void (*pd__http_bcrypt_hook)(const char *hash);

/* Test hook, NULL outside tests: the monotonic clock (nanoseconds) of the
 * per-address login backoff, so a test moves time instead of sleeping. */
extern int64_t (*pd__http_auth_clock)(void);

#endif
