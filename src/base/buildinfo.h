/*
 * base/buildinfo.h — what a profd binary says about its own build, as
 * Prometheus' common/version package does (`prometheus --version`,
 * prometheus_build_info, /api/v1/status/buildinfo).
 *
 * The values are fixed when profd is built: cmake/buildinfo.cmake writes
 * them into a generated C file (build/buildinfo/pd_buildinfo.c) that only
 * the profd executable links, defining pd_build_info_profd:
 *   version    the VERSION file at the top of the source tree (the one place
 *              the version is written; debian/changelog must agree with it)
 *   revision   `git rev-parse HEAD` of the source tree at build time, or
 *              "unknown" when the source is not a git checkout (a source
 *              package); -DPD_REVISION=... overrides it
 *   branch     `git rev-parse --abbrev-ref HEAD`, "unknown" likewise;
 *              -DPD_BRANCH=... overrides it
 *   build_user $USER@hostname; -DPD_BUILD_USER=... overrides it
 *   build_date UTC, Prometheus' layout "20060102-15:04:05"; from
 *              SOURCE_DATE_EPOCH when set (reproducible builds)
 *   compiler   e.g. "gcc 12.2.0" (where Prometheus says "go version")
 *   platform   GOOS/GOARCH style, e.g. "linux/amd64"
 *
 * Every string is static and NUL-terminated; none is NULL. Functions here
 * only format a pd_build_info: they do not know pd_build_info_profd, so
 * libraries and tests may pass any.
 */
#ifndef PD_BASE_BUILDINFO_H
#define PD_BASE_BUILDINFO_H

#include <stddef.h>
#include "base/buf.h"

typedef struct pd_build_info {
    const char *version, *revision, *branch, *build_user, *build_date, *compiler, *platform;
} pd_build_info;

/* The profd binary's own build (defined in the generated pd_buildinfo.c,
 * linked into the profd executable only). */
extern const pd_build_info pd_build_info_profd;

/* Appends the text of `profd --version`, Prometheus' layout:
 *   profd, version 0.1.0 (branch: main, revision: 89f2f34...)
 *     build user:       root@host
 *     build date:       20261127-15:35:16
 *     compiler:         gcc 12.2.0
 *     platform:         linux/amd64
 * (each line ends in '\n'). `program` names the first word. PD_ENOMEM. */
int pd_build_info_write_text(const pd_build_info *bi, const char *program, pd_buf *out);

/* Writes the label string of profd_build_info (base/metrics.h's form, the
 * values escaped as the text format wants):
 *   branch="..",compiler="..",platform="..",revision="..",version=".."
 * into out (NUL-terminated, truncated at cap). Returns the length it needed
 * (as snprintf), so a result >= cap means it was cut. */
size_t pd_build_info_labels(const pd_build_info *bi, char *out, size_t cap);

#endif
