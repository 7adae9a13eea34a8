/*
 * main.c — the profd command line.
 *
 *   profd [serve] [flags]   run the server (the default command)
 *   profd convert ...       convert folded stacks / perf script text to pprof (ingest/)
 *   profd push ...          validate profiles locally and push them (profefe API)
 *   profd debuginfo upload FILE...   debug files to a profd (symbolize/upload_main.c)
 *   profd tsdb import|analyze|check|repair ...   block tools (storage/tsdb/tsdb_cli.c)
 *   profd check config|web-config FILE...        configuration checks
 *   profd --help | -h       usage on stdout, exit 0 (every command and
 *                           subcommand takes -h/--help too: its own usage on
 *                           stdout, exit 0)
 *   an unknown command      one line naming it and pointing to --help, exit 2
 *   profd --version         version on stdout, exit 0
 *
 * Flags take `--flag=value` or `--flag value` (Prometheus' names).
 * Exit codes (DESIGN.md §6): 0 ok, 1 runtime failure (storage cannot be
 * opened, port in use), 2 usage or configuration error.
 *
 * Process model of `serve`: the main thread blocks SIGHUP, SIGINT and SIGTERM
 * before any other thread exists (so every thread inherits the mask), starts
 * storage, the scrape manager (only with --config.file), the API and the
 * HTTP server, then waits in sigwaitinfo(): SIGHUP reloads the config file
 * (on error: logged, the old config stays), SIGINT/SIGTERM stop the HTTP
 * server, then scraping, then close the storage. No work happens in a signal
 * handler. POST /-/reload runs the same reload on an HTTP thread; a mutex
 * serialises the two.
 */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <curl/curl.h>

#include "ingest/ingest.h"
#include "api/api.h"
#include "base/buildinfo.h"
#include "base/cancel.h"
#include "base/log.h"
#include "agent/profd_agent.h"
#include "base/time.h"
#include "http/guard.h"
#include "http/server.h"
#include "http/auth.h"
#include "pprof/pprof.h"
#include "rules/rules.h"
#include "scrape/config.h"
#include "scrape/adaptive.h"
#include "scrape/manager.h"
#include "storage/storage.h"
#include "symbolize/symbolize.h"
#include "storage/tsdb/tsdb_cli_int.h"

#define PD_VERSION (pd_build_info_profd.version)

#define EXIT_RUNTIME 1
#define EXIT_USAGE 2

typedef struct flags {
    const char *config_file;
    const char *storage_path;
    const char *listen;
    const char *log_level;
    const char *fsync;
    size_t max_body;          /* --scrape.max-body-bytes: cap on a profile body (scrape and push) */
    unsigned threads;         /* --web.threads */
    unsigned query_threads;   /* --query.max-concurrency */
    int merge_conc;           /* --query.max-merge-concurrency (0: auto) */
    int64_t read_timeout_ms;  /* --web.read-timeout */
    unsigned max_conns;       /* --web.max-connections */
    unsigned max_conns_ip;    /* --web.max-connections-per-ip */
    int64_t query_timeout_ms; /* --query.timeout (0: the api's default, 2m) */
    size_t query_max_samples; /* --query.max-samples (0: the api's default, 1M) */
    size_t max_series_svc;    /* --ingest.max-series-per-service (0: the api's default) */
    int64_t block_ms;         /* --storage.block-duration (0: storage default, 2h) */
    int64_t retention_ms;     /* --storage.retention.time (0: storage default, 15d) */
    int64_t grace_ms;         /* --storage.future-grace (0: storage default, 10m) */
    size_t retention_bytes;   /* --storage.retention.size (0: no limit) */
    size_t segment_bytes;     /* --storage.wal.segment-size (0: storage default, 32 MiB) */
    int agg_workers;          /* --storage.aggregate-workers (0: storage default, the cores <= 4) */
    int enable_pprof;         /* --web.enable-pprof: 1 on, 0 off, -1 default (on for loopback) */
    const char *web_config;   /* --web.config.file (issue 20): TLS, basic auth, ... */
    bool enable_lifecycle;    /* --web.enable-lifecycle: POST /-/reload (issue 20 item 4) */
    const char *allowed_hosts; /* --web.allowed-hosts (http/guard.h; NULL: the default rule) */
    /* issue 16: --storage.backend=clickhouse and its --clickhouse.* flags */
    pd_storage_backend backend;
    const char *ch_urls[16]; /* --clickhouse.url, repeatable (failover order) */
    size_t n_ch_urls;
    const char *ch_user, *ch_password_file, *ch_database, *ch_cluster;
    bool ch_replicated;               /* --clickhouse.replicated (issue 35 item 4) */
    int64_t ch_flush_ms;              /* --clickhouse.flush-interval (-1: none; 0: default 1 s) */
    int64_t ch_batch_wait_ms;         /* --clickhouse.batch-wait (0: none) */
    unsigned long long ch_batch_rows; /* --clickhouse.batch-rows (0: default) */
    int64_t ch_cache_bytes;           /* --clickhouse.cache-size (0: default 64 MiB; -1: none) */
    int64_t ch_agg_idle_ms; /* --clickhouse.agg-flush-idle (-1: every batch; 0: default 60 s) */
    /* issue 31 item 7: --ui.source-dir=[PREFIX=]DIR, repeatable; each value
       copied into src_arg and split there (symbolize/source.h) */
    char src_arg[16][1024];
    pd_source_dir src_dirs[16];
    size_t n_src_dirs;
} flags;

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: profd [serve] [flags]\n"
        "       profd COMMAND [flags] [ARGS]\n"
        "       profd --help | --version\n"
        "\n"
        "Commands (each takes -h/--help for its own usage):\n"
        "  serve                  run the server (the default: flags below)\n"
        "  push                   validate profiles locally and push them to a profd\n"
        "  convert                folded stacks / perf script text to pprof\n"
        "  debuginfo upload       send debug files (by build ID) for symbolization\n"
        "  check config           what a scrape configuration means, its warnings\n"
        "  check web-config       check a --web.config.file (TLS, auth)\n"
        "  tsdb import            write pprof files into a store as one block\n"
        "  tsdb analyze           blocks, series and bytes of a store\n"
        "  tsdb check             verify a store's checksums, name any damage\n"
        "  tsdb repair            rebuild a store's damaged blocks\n"
        "\n"
        "profd collects pprof profiles (scraped per --config.file, or pushed to\n"
        "POST /api/0/profiles), stores them under --storage.path, and serves queries,\n"
        "the web UI and /metrics at --web.listen-address.\n"
        "\n"
        "Flags (--flag=value or --flag value):\n"
        "  --config.file=FILE              scrape configuration (YAML); without it profd\n"
        "                                  only serves stored data and takes pushes\n"
        "  --storage.backend=B             tsdb (embedded, default) or clickhouse\n"
        "  --storage.path=DIR              storage directory (default ./data)\n"
        "  --clickhouse.url=URL            ClickHouse HTTP interface, e.g.\n"
        "                                  http://127.0.0.1:8123; repeat for failover\n"
        "  --clickhouse.database=NAME      database (default profd; created if missing)\n"
        "  --clickhouse.user=NAME          user (default \"default\")\n"
        "  --clickhouse.password-file=FILE file holding the user's password\n"
        "  --clickhouse.cluster=NAME       cluster of remote_servers: Distributed tables\n"
        "                                  over its shards (docs/clickhouse.md)\n"
        "  --clickhouse.replicated         with --clickhouse.cluster: ReplicatedMergeTree\n"
        "                                  tables, two or more replicas per shard\n"
        "  --clickhouse.flush-interval=DUR longest wait for concurrent pushes to gather\n"
        "                                  into one insert batch (default 1s; a lone\n"
        "                                  push waits none; 0: no wait)\n"
        "  --clickhouse.batch-wait=DUR     every insert batch gathers at least this long,\n"
        "                                  for fleets of few pushes per interval\n"
        "                                  (default 0: none; at most the flush interval)\n"
        "  --clickhouse.batch-rows=N       a gathering batch goes at once at N samples\n"
        "                                  rows (default 1000000)\n"
        "  --clickhouse.cache-size=SIZE    read cache: stack, location and sample-type rows\n"
        "                                  and merges' summed whole buckets (default 64MiB;\n"
        "                                  0: none)\n"
        "  --clickhouse.agg-flush-idle=DUR write a series' 10-minute sums (aggs_v1) once\n"
        "                                  it got no push for DUR (default 1m; 0: with\n"
        "                                  every insert batch)\n"
        "  --storage.wal.fsync=POLICY      always|batch|never (default batch)\n"
        "  --storage.wal.segment-size=SIZE WAL segment file size (default 32M)\n"
        "  --storage.block-duration=DUR    head time range cut into a block (default 2h)\n"
        "  --storage.retention.time=DUR    delete blocks older than this (default 15d)\n"
        "  --storage.retention.size=SIZE   delete oldest blocks while the store is larger\n"
        "                                  (e.g. 10GB; default: no limit)\n"
        "  --storage.aggregate-workers=N   threads a merge sums its blocks on, 1 to 16\n"
        "                                  (default: the cores, at most 4; 1: one by one)\n"
        "  --storage.future-grace=DUR      refuse profiles dated more than this after the\n"
        "                                  clock (default 10m); profiles older than the\n"
        "                                  retention time are refused too\n"
        "  --web.listen-address=HOST:PORT  default 127.0.0.1:10902 (port 0: any free port);\n"
        "                                  a name is served on every address it resolves\n"
        "                                  to (localhost: 127.0.0.1 and ::1), ':PORT' on\n"
        "                                  all interfaces of both families\n"
        "  --web.threads=N                 HTTP workers for pushes, admin, /metrics (default 4;\n"
        "                                  64 with --storage.backend=clickhouse)\n"
        "  --query.max-concurrency=N       HTTP workers for queries and the UI (default 4)\n"
        "  --query.max-merge-concurrency=N merges computed at once, the others wait their\n"
        "                                  turn, leaving CPU to ingestion (default 0: half\n"
        "                                  the CPUs, at least 1)\n"
        "  --web.read-timeout=DURATION     whole-request deadline: headers and body must\n"
        "                                  arrive within it (idle connections closed after it;\n"
        "                                  default 30s)\n"
        "  --web.max-connections=N         open connections at most (default 4096)\n"
        "  --web.max-connections-per-ip=N  per client address (default 512; 0: no cap)\n"
        "  --web.config.file=FILE          TLS, basic auth, headers, rate limit: Prometheus'\n"
        "                                  web config format (docs/security.md)\n"
        "  --web.enable-lifecycle          allow POST /-/reload (off: 403, as Prometheus)\n"
        "  --web.allowed-hosts=H1,H2       Host names served (DNS rebinding protection);\n"
        "                                  default: the listen host, plus localhost,\n"
        "                                  127.0.0.1 and [::1] on loopback; any on 0.0.0.0\n"
        "  --[no-]web.enable-pprof         serve profd's own /debug/pprof/profile and /heap\n"
        "                                  (default: on when listening on loopback)\n"
        "  --query.timeout=DURATION        merge/diff queries stop after it (default 2m)\n"
        "  --query.max-samples=N           distinct samples a merge may hold (default 1000000)\n"
        "  --ingest.max-series-per-service=N  series one service_name may have through the\n"
        "                                  push APIs, dynamic labels included; a push past it\n"
        "                                  is refused with 429 (default 10000, 0 = no cap)\n"
        "  --scrape.max-body-bytes=SIZE    largest profile body accepted, scraped or\n"
        "                                  pushed; bytes or with K/M/G suffix (default 16M)\n"
        "  --ui.source-dir=[PREFIX=]DIR    where the UI's source view reads source files\n"
        "                                  (after debuginfod); repeatable; PREFIX: only\n"
        "                                  paths under it, looked up as DIR + the rest\n"
        "  --log.level=LEVEL               debug|info|warn|error (default info)\n"
        "  -h, --help                      this text\n"
        "  --version                       print the version\n"
        "\n"
        "Signals: SIGHUP reloads --config.file; SIGINT/SIGTERM shut down.\n"
        "Exit codes: 0 ok, 1 runtime failure, 2 usage or configuration error.\n");
}

/* `profd --version`: Prometheus' layout (base/buildinfo.h). */
static int print_version(void)
{
    pd_buf b;
    pd_buf_init(&b, 0);
    if (pd_build_info_write_text(&pd_build_info_profd, "profd", &b) < 0) {
        pd_buf_release(&b);
        fprintf(stderr, "profd: out of memory\n");
        return EXIT_RUNTIME;
    }
    fwrite(b.data, 1, b.len, stdout);
    pd_buf_release(&b);
    return 0;
}

static bool is_help(const char *a)
{
    return !strcmp(a, "-h") || !strcmp(a, "--help") || !strcmp(a, "-help");
}

/* `profd check`: its two commands, or one line for an unknown one. */
static int check_main(int argc, char **argv)
{
    static const char text[] =
        "usage: profd check config FILE...       what a scrape configuration means\n"
        "       profd check web-config FILE...   check a --web.config.file\n"
        "Each takes -h/--help: profd check COMMAND --help.\n";
    if (argc < 2) {
        fputs(text, stderr);
        return EXIT_USAGE;
    }
    if (is_help(argv[1])) {
        fputs(text, stdout);
        return 0;
    }
    if (!strcmp(argv[1], "web-config"))
        return pd_webcfg_check_main(argc - 1, argv + 1);
    if (!strcmp(argv[1], "config")) {
        int status = pd_config_check_main(argc, argv);
        /* issue 30: the recording rules and remote_write of each file */
        bool help = false;
        for (int i = 2; i < argc; i++)
            help |= argv[i][0] == '-';
        for (int i = 2; !help && i < argc; i++) {
            pd_rules_config rc;
            pd_err err = {{0}};
            if (pd_rules_config_load_file(argv[i], &rc, &err) < 0) {
                fprintf(stderr, "FAILED: %s\n", err.msg[0] ? err.msg : "cannot read the rules");
                status = EXIT_USAGE;
                continue;
            }
            if (rc.n_rules || rc.n_remotes || rc.n_warnings) {
                printf("%s: %zu recording rule%s, %zu remote_write\n", argv[i], rc.n_rules,
                       rc.n_rules == 1 ? "" : "s", rc.n_remotes);
                pd_rules_config_print(&rc, stdout);
            }
            pd_rules_config_release(&rc);
        }
        return status;
    }
    fprintf(stderr, "profd check: unknown command \"%s\"; see 'profd check --help'\n", argv[1]);
    return EXIT_USAGE;
}

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "profd: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n\n");
    usage(stderr);
    return EXIT_USAGE;
}

/* "123", "16K", "16MB", "16MiB", "1G", "2T" -> bytes (powers of 1024, as
 * Prometheus' --storage.tsdb.retention.size); at most 1 PiB. 0 or -1. */
static int parse_size(const char *s, size_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || errno || *s == '-')
        return -1;
    unsigned long long mul = 1;
    if (*end == 'K' || *end == 'k')
        mul = 1ULL << 10;
    else if (*end == 'M' || *end == 'm')
        mul = 1ULL << 20;
    else if (*end == 'G' || *end == 'g')
        mul = 1ULL << 30;
    else if (*end == 'T' || *end == 't')
        mul = 1ULL << 40;
    if (mul != 1)
        end++;
    if (mul != 1 && (strcmp(end, "iB") == 0 || strcmp(end, "B") == 0))
        end += strlen(end);
    else if (mul == 1 && strcmp(end, "B") == 0)
        end++;
    if (*end || v == 0 || v > (1ULL << 50) / mul)
        return -1;
    *out = (size_t)(v * mul);
    return 0;
}

/* Parses argv into f. Returns -1 to go on, else an exit code. */
static int parse_flags(int argc, char **argv, flags *f)
{
    int i = 1;
    if (i < argc && argv[i][0] != '-') {
        if (strcmp(argv[i], "serve") != 0) { /* one line, as git and promtool */
            fprintf(stderr, "profd: unknown command \"%s\"; see 'profd --help'\n", argv[i]);
            return EXIT_USAGE;
        }
        i++;
    }
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (is_help(a)) {
            usage(stdout);
            return 0;
        }
        if (strcmp(a, "--version") == 0)
            return print_version();
        if (strncmp(a, "--", 2) != 0)
            return usage_error("unexpected argument \"%s\"", a);
        /* issue 17: --web.enable-pprof[=true|false], --no-web.enable-pprof */
        if (strcmp(a, "--web.enable-pprof") == 0 || strcmp(a, "--web.enable-pprof=true") == 0 ||
            strcmp(a, "--no-web.enable-pprof") == 0 || strcmp(a, "--web.enable-pprof=false") == 0) {
            f->enable_pprof = strstr(a, "true") || strcmp(a, "--web.enable-pprof") == 0;
            continue;
        }
        /* issue 20 item 4: --web.enable-lifecycle[=true|false], as Prometheus */
        if (strcmp(a, "--web.enable-lifecycle") == 0 ||
            strcmp(a, "--web.enable-lifecycle=true") == 0 ||
            strcmp(a, "--web.enable-lifecycle=false") == 0 ||
            strcmp(a, "--no-web.enable-lifecycle") == 0) {
            f->enable_lifecycle = strstr(a, "false") == NULL && strncmp(a, "--no-", 5) != 0;
            continue;
        }
        /* issue 35 item 4: --clickhouse.replicated[=true|false] */
        if (strcmp(a, "--clickhouse.replicated") == 0 ||
            strcmp(a, "--clickhouse.replicated=true") == 0 ||
            strcmp(a, "--clickhouse.replicated=false") == 0) {
            f->ch_replicated = strstr(a, "false") == NULL;
            continue;
        }
        if (strncmp(a, "--clickhouse.replicated=", 24) == 0)
            return usage_error("--clickhouse.replicated: \"%s\" is not true or false", a + 24);
        if (strncmp(a, "--web.enable-lifecycle=", 23) == 0)
            return usage_error("--web.enable-lifecycle: \"%s\" is not true or false", a + 23);
        if (strncmp(a, "--web.enable-pprof=", 19) == 0)
            return usage_error("--web.enable-pprof: \"%s\" is not true or false", a + 19);
        char name[64];
        const char *val;
        const char *eq = strchr(a, '=');
        size_t nl = eq ? (size_t)(eq - a) : strlen(a);
        if (nl >= sizeof name)
            return usage_error("unknown flag \"%s\"", a);
        memcpy(name, a, nl);
        name[nl] = 0;
        static const char *known[] = {"--config.file",
                                      "--storage.path",
                                      "--web.listen-address",
                                      "--log.level",
                                      "--storage.wal.fsync",
                                      "--scrape.max-body-bytes",
                                      "--web.threads",
                                      "--query.timeout",
                                      "--query.max-samples",
                                      "--storage.block-duration",
                                      "--ingest.max-series-per-service",
                                      "--storage.retention.time",
                                      "--storage.retention.size",
                                      "--storage.wal.segment-size",
                                      "--storage.future-grace",
                                      "--query.max-concurrency",
                                      "--web.read-timeout",
                                      "--web.max-connections",
                                      "--web.max-connections-per-ip",
                                      "--web.config.file",
                                      "--web.allowed-hosts",
                                      "--storage.backend",
                                      "--clickhouse.url",
                                      "--clickhouse.database",
                                      "--clickhouse.user",
                                      "--clickhouse.password-file",
                                      "--clickhouse.cluster",
                                      "--clickhouse.flush-interval",
                                      "--clickhouse.batch-wait",
                                      "--clickhouse.batch-rows",
                                      "--clickhouse.cache-size",
                                      "--clickhouse.agg-flush-idle",
                                      "--query.max-merge-concurrency",
                                      "--storage.aggregate-workers",
                                      "--ui.source-dir"};
        bool ok = false;
        for (size_t k = 0; k < sizeof known / sizeof *known; k++)
            ok |= strcmp(name, known[k]) == 0;
        if (!ok)
            return usage_error("unknown flag \"%s\"", name);
        if (eq) {
            val = eq + 1;
        } else {
            if (i + 1 >= argc)
                return usage_error("flag %s needs a value", name);
            val = argv[++i];
        }
        if (strcmp(name, "--config.file") == 0) {
            if (!*val)
                return usage_error("flag %s needs a file name", name);
            f->config_file = val;
        } else if (strcmp(name, "--storage.path") == 0) {
            if (!*val)
                return usage_error("flag %s needs a directory", name);
            f->storage_path = val;
        } else if (strcmp(name, "--web.listen-address") == 0) {
            f->listen = val;
        } else if (strcmp(name, "--web.allowed-hosts") == 0) {
            f->allowed_hosts = val;
        } else if (strcmp(name, "--storage.backend") == 0) {
            if (strcmp(val, "tsdb") == 0)
                f->backend = PD_STORAGE_TSDB;
            else if (strcmp(val, "clickhouse") == 0)
                f->backend = PD_STORAGE_CLICKHOUSE;
            else
                return usage_error("--storage.backend: \"%s\" is not one of tsdb, clickhouse", val);
        } else if (strcmp(name, "--clickhouse.url") == 0) {
            if (strncmp(val, "http://", 7) != 0 && strncmp(val, "https://", 8) != 0)
                return usage_error("--clickhouse.url: \"%s\" is not an http:// or https:// URL",
                                   val);
            if (f->n_ch_urls == sizeof f->ch_urls / sizeof f->ch_urls[0])
                return usage_error("--clickhouse.url: at most 16 URLs (\"%s\" is one more)", val);
            f->ch_urls[f->n_ch_urls++] = val;
        } else if (strcmp(name, "--clickhouse.database") == 0) {
            f->ch_database = val;
        } else if (strcmp(name, "--clickhouse.user") == 0) {
            f->ch_user = val;
        } else if (strcmp(name, "--clickhouse.password-file") == 0) {
            f->ch_password_file = val;
        } else if (strcmp(name, "--clickhouse.cluster") == 0) {
            f->ch_cluster = val;
        } else if (strcmp(name, "--clickhouse.flush-interval") == 0) {
            pd_err derr;
            int64_t ms;
            if (pd_parse_duration(val, &ms, &derr) < 0 || ms < 0 || ms > 60000)
                return usage_error("--clickhouse.flush-interval: \"%s\" is not a duration from "
                                   "0 to 1m",
                                   val);
            f->ch_flush_ms = ms ? ms : -1;
        } else if (strcmp(name, "--clickhouse.batch-wait") == 0) {
            pd_err derr;
            int64_t ms;
            if (pd_parse_duration(val, &ms, &derr) < 0 || ms < 0 || ms > 60000)
                return usage_error("--clickhouse.batch-wait: \"%s\" is not a duration from "
                                   "0 to 1m",
                                   val);
            f->ch_batch_wait_ms = ms;
        } else if (strcmp(name, "--clickhouse.batch-rows") == 0) {
            char *end;
            unsigned long long v = strtoull(val, &end, 10);
            if (*end || end == val || val[0] == '-' || v < 1 || v > 100000000)
                return usage_error("--clickhouse.batch-rows: \"%s\" is not a number from 1 to "
                                   "100000000",
                                   val);
            f->ch_batch_rows = v;
        } else if (strcmp(name, "--clickhouse.cache-size") == 0) {
            size_t v = 0;
            if ((strcmp(val, "0") != 0 && parse_size(val, &v) < 0) || v > (64ull << 30))
                return usage_error("--clickhouse.cache-size: \"%s\" is not a size from 0 to 64GiB "
                                   "(e.g. 64MiB; 0: no cache)",
                                   val);
            f->ch_cache_bytes = v ? (int64_t)v : -1;
        } else if (strcmp(name, "--clickhouse.agg-flush-idle") == 0) {
            pd_err derr;
            int64_t ms;
            if (pd_parse_duration(val, &ms, &derr) < 0 || ms < 0 || ms > 3600000)
                return usage_error("--clickhouse.agg-flush-idle: \"%s\" is not a duration from "
                                   "0 to 1h",
                                   val);
            f->ch_agg_idle_ms = ms ? ms : -1;
        } else if (strcmp(name, "--log.level") == 0) {
            if (strcmp(val, "debug") && strcmp(val, "info") && strcmp(val, "warn") &&
                strcmp(val, "error"))
                return usage_error("--log.level: \"%s\" is not one of debug, info, warn, error",
                                   val);
            f->log_level = val;
        } else if (strcmp(name, "--storage.wal.fsync") == 0) {
            if (strcmp(val, "always") && strcmp(val, "batch") && strcmp(val, "never"))
                return usage_error("--storage.wal.fsync: \"%s\" is not one of always, batch, never",
                                   val);
            f->fsync = val;
        } else if (strcmp(name, "--scrape.max-body-bytes") == 0) {
            if (parse_size(val, &f->max_body) < 0)
                return usage_error("--scrape.max-body-bytes: \"%s\" is not a size (e.g. 16M)", val);
        } else if (strcmp(name, "--web.threads") == 0) {
            char *end;
            long t = strtol(val, &end, 10);
            if (*end || end == val || t < 1 || t > 256)
                return usage_error("--web.threads: \"%s\" is not a number from 1 to 256", val);
            f->threads = (unsigned)t;
        } else if (strcmp(name, "--query.max-concurrency") == 0 ||
                   strcmp(name, "--web.max-connections") == 0 ||
                   strcmp(name, "--web.max-connections-per-ip") == 0) {
            char *end;
            long t = strtol(val, &end, 10);
            bool per_ip = strcmp(name, "--web.max-connections-per-ip") == 0;
            long lo = per_ip ? 0 : 1,
                 hi = strcmp(name, "--query.max-concurrency") == 0 ? 256 : 1000000;
            if (*end || end == val || t < lo || t > hi) {
                char what[256];
                snprintf(what, sizeof what, "%s: \"%.64s\" is not a number from %ld to %ld", name,
                         val, lo, hi);
                return usage_error("%s", what);
            }
            if (strcmp(name, "--query.max-concurrency") == 0)
                f->query_threads = (unsigned)t;
            else if (per_ip)
                f->max_conns_ip = (unsigned)t;
            else
                f->max_conns = (unsigned)t;
        } else if (strcmp(name, "--query.max-merge-concurrency") == 0) {
            char *end;
            long t = strtol(val, &end, 10);
            if (*end || end == val || t < 0 || t > 256)
                return usage_error("--query.max-merge-concurrency: \"%.64s\" is not a number "
                                   "from 0 to 256",
                                   val);
            f->merge_conc = (int)t;
        } else if (strcmp(name, "--web.config.file") == 0) {
            if (!*val)
                return usage_error("flag %s needs a file name", name);
            f->web_config = val;
        } else if (strcmp(name, "--web.read-timeout") == 0) {
            pd_err derr = {{0}};
            if (pd_parse_duration(val, &f->read_timeout_ms, &derr) < 0 || f->read_timeout_ms < 100)
                return usage_error("--web.read-timeout: \"%s\" is not a duration of at least 100ms "
                                   "(e.g. 30s)",
                                   val);
        } else if (strcmp(name, "--query.timeout") == 0) {
            pd_err derr = {{0}};
            if (pd_parse_duration(val, &f->query_timeout_ms, &derr) < 0 || f->query_timeout_ms <= 0)
                return usage_error("--query.timeout: \"%s\" is not a duration (e.g. 2m)", val);
        } else if (strcmp(name, "--storage.block-duration") == 0) {
            pd_err derr = {{0}};
            if (pd_parse_duration(val, &f->block_ms, &derr) < 0 || f->block_ms < 1000)
                return usage_error("--storage.block-duration: \"%s\" is not a duration of at "
                                   "least 1s (e.g. 2h)",
                                   val);
        } else if (strcmp(name, "--storage.retention.time") == 0) {
            pd_err derr = {{0}};
            if (pd_parse_duration(val, &f->retention_ms, &derr) < 0 || f->retention_ms < 0)
                return usage_error("--storage.retention.time: \"%s\" is not a duration (e.g. 15d)",
                                   val);
        } else if (strcmp(name, "--storage.future-grace") == 0) {
            pd_err derr = {{0}};
            if (pd_parse_duration(val, &f->grace_ms, &derr) < 0 || f->grace_ms <= 0)
                return usage_error("--storage.future-grace: \"%s\" is not a duration above 0 "
                                   "(e.g. 10m)",
                                   val);
        } else if (strcmp(name, "--storage.wal.segment-size") == 0) {
            if (parse_size(val, &f->segment_bytes) < 0 || f->segment_bytes < 64 * 1024 ||
                f->segment_bytes > (1ull << 32))
                return usage_error("--storage.wal.segment-size: \"%s\" is not a size from 64K to "
                                   "4G (e.g. 32M)",
                                   val);
        } else if (strcmp(name, "--storage.aggregate-workers") == 0) {
            char *end;
            long v = strtol(val, &end, 10);
            if (*end || end == val || v < 1 || v > PD_STORAGE_MAX_AGG_WORKERS)
                return usage_error("--storage.aggregate-workers: \"%s\" is not a number from 1 "
                                   "to 16",
                                   val);
            f->agg_workers = (int)v;
        } else if (strcmp(name, "--ui.source-dir") == 0) {
            if (f->n_src_dirs == sizeof f->src_dirs / sizeof f->src_dirs[0])
                return usage_error("--ui.source-dir: at most 16 (\"%s\" is one more)", val);
            if (strlen(val) >= sizeof f->src_arg[0])
                return usage_error("--ui.source-dir: \"%.200s\" is over 1023 bytes", val);
            char *copy = f->src_arg[f->n_src_dirs];
            snprintf(copy, sizeof f->src_arg[0], "%s", val);
            if (pd_source_dir_parse(copy, &f->src_dirs[f->n_src_dirs]) < 0)
                return usage_error("--ui.source-dir: \"%s\" is not DIR or /PREFIX=DIR (an "
                                   "absolute prefix, a directory)",
                                   val);
            f->n_src_dirs++;
        } else if (strcmp(name, "--storage.retention.size") == 0) {
            if (parse_size(val, &f->retention_bytes) < 0)
                return usage_error("--storage.retention.size: \"%s\" is not a size (e.g. 10GB)",
                                   val);
        } else if (strcmp(name, "--query.max-samples") == 0) {
            char *end;
            unsigned long long v = strtoull(val, &end, 10);
            if (*end || end == val || *val == '-' || v == 0)
                return usage_error("--query.max-samples: \"%s\" is not a positive number", val);
            f->query_max_samples = (size_t)v;
        } else if (strcmp(name, "--ingest.max-series-per-service") == 0) {
            char *end;
            unsigned long long v = strtoull(val, &end, 10);
            if (*end || end == val || *val == '-')
                return usage_error("--ingest.max-series-per-service: \"%s\" is not a number "
                                   "(0: no cap)",
                                   val);
            f->max_series_svc = v == 0 ? SIZE_MAX : (size_t)v;
        }
    }
    return -1;
}

/* ---- reload ---- */

typedef struct app {
    const char *config_file;
    pd_scrape_manager *sm;
    pd_rules *rules; /* issue 30: recording rules and remote write */
    pd_api *api;     /* for /api/v1/status/config: the text as last loaded */
    pthread_mutex_t mu;
} app;

/* Tells the api the outcome of a (re)load of --config.file and, when it
 * worked, the file's text (read again: at most 4 MiB). */
static void record_config(app *a, bool ok)
{
    if (!a->api || !a->config_file)
        return;
    char *text = NULL;
    size_t len = 0;
    FILE *f = ok ? fopen(a->config_file, "rb") : NULL;
    if (f) {
        text = malloc(4u << 20);
        len = text ? fread(text, 1, 4u << 20, f) : 0;
        fclose(f);
    }
    pd_api_set_config(a->api, text, len, ok && text, pd_now_ms());
    free(text);
}

static int do_reload(void *ctx, pd_err *err)
{
    app *a = ctx;
    if (!a->config_file || !a->sm) {
        pd_log(PD_LOG_INFO, "reload: no --config.file, nothing to reload", NULL);
        return 0;
    }
    pthread_mutex_lock(&a->mu);
    pd_config cfg;
    pd_config_init(&cfg);
    pd_rules_config rcfg;
    pd_rules_config_init(&rcfg);
    int rc = pd_config_load_file(a->config_file, &cfg, err);
    if (rc == 0) /* both parts load before either applies */
        rc = pd_rules_config_load_file(a->config_file, &rcfg, err);
    if (rc == 0)
        rc = pd_scrape_manager_apply(a->sm, &cfg, err);
    if (rc == 0 && a->rules)
        rc = pd_rules_apply(a->rules, &rcfg, err);
    pd_config_release(&cfg);
    pd_rules_config_release(&rcfg);
    pthread_mutex_unlock(&a->mu);
    if (rc < 0) {
        char q[600];
        size_t o = 0;
        for (const char *s = err ? err->msg : ""; *s && o + 2 < sizeof q; s++)
            if (*s != '\n')
                q[o++] = *s == '"' ? '\'' : *s;
        q[o] = 0;
        pd_log(PD_LOG_ERROR, "reload failed, keeping the old configuration", "file=%s err=\"%s\"",
               a->config_file, q);
    } else {
        pd_log(PD_LOG_INFO, "configuration reloaded", "file=%s", a->config_file);
    }
    record_config(a, rc == 0);
    return rc;
}

/* ---- serve ---- */

/* Issue 35 (RSS flat across repeated wide queries): glibc raises its mmap
 * threshold to the size of the largest block freed (up to 32 MiB) and its
 * trim threshold to twice that, so after one query over 50k series each
 * query thread's arena kept up to ~40 MiB of free top chunk: RSS went
 * 230 -> 285 MiB and back over 20 identical rounds (bench/fleet_queries,
 * malloc_trim does not release a thread arena's top). Fixed thresholds end
 * that: blocks from 4 MiB up are mapped and unmapped, an arena's free top
 * above 1 MiB is given back (the same run: flat, 218-231 MiB). Left alone
 * when the user tunes malloc (GLIBC_TUNABLES, MALLOC_*_ environment). */
static void tune_malloc(void)
{
    if (getenv("GLIBC_TUNABLES") || getenv("MALLOC_MMAP_THRESHOLD_") ||
        getenv("MALLOC_TRIM_THRESHOLD_"))
        return;
    (void)mallopt(M_MMAP_THRESHOLD, 4 << 20);
    (void)mallopt(M_TRIM_THRESHOLD, 1 << 20);
}

static int serve(const flags *f)
{
    int code = EXIT_RUNTIME;
    pd_err err = {{0}};
    pd_config cfg;
    pd_config_init(&cfg);
    pd_rules_config rcfg;
    pd_rules_config_init(&rcfg);
    pd_rules *rules = NULL;
    pd_storage *st = NULL;
    pd_scrape_manager *sm = NULL;
    pd_api *api = NULL;
    pd_symbolizer *sym = NULL;
    pd_http_server *srv = NULL;
    pd_http_gate *gate = NULL;
    pd_http_guard *guard = NULL; /* issue 20 item 4 */
    app a = {.config_file = f->config_file};
    pthread_mutex_init(&a.mu, NULL);

    if (f->web_config) { /* issue 20 */
        int rc = pd_http_gate_new(f->web_config, &gate, &err);
        if (rc < 0) {
            fprintf(stderr, "profd: bad web config: %s\n", err.msg[0] ? err.msg : pd_strerror(rc));
            code = EXIT_USAGE;
            goto out;
        }
    }
    if (f->config_file) {
        int rc = pd_config_load_file(f->config_file, &cfg, &err);
        if (rc == 0)
            rc = pd_rules_config_load_file(f->config_file, &rcfg, &err);
        if (rc < 0) {
            fprintf(stderr, "profd: bad configuration: %s\n",
                    err.msg[0] ? err.msg : pd_strerror(rc));
            fprintf(stderr, "See 'profd --help'.\n");
            code = EXIT_USAGE;
            goto out;
        }
    }

    /* Block the signals main waits for, before any thread starts. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    tune_malloc();

    pd_pprof_limits lim = pd_pprof_limits_default();
    if (f->max_body) {
        lim.max_body_bytes = f->max_body;
        if (lim.max_decompressed_bytes < f->max_body * 4)
            lim.max_decompressed_bytes = f->max_body * 4;
    }

    pd_storage_options so = pd_storage_options_default();
    so.path = f->storage_path;
    so.fsync = strcmp(f->fsync, "always") == 0  ? PD_FSYNC_ALWAYS
               : strcmp(f->fsync, "never") == 0 ? PD_FSYNC_NEVER
                                                : PD_FSYNC_BATCH;
    so.limits = lim;
    so.block_duration_ms = f->block_ms;
    so.max_aggregations = f->merge_conc;
    so.retention_ms = f->retention_ms;
    so.future_grace_ms = f->grace_ms;
    so.retention_bytes = f->retention_bytes;
    so.aggregate_workers = f->agg_workers;
    if (f->segment_bytes)
        so.segment_bytes = f->segment_bytes;
    char ch_password[512] = "";
    /* --clickhouse.flush-interval in effect, ms (0: no wait) */
    const int64_t ch_flush_ms = f->ch_flush_ms < 0 ? 0
                                : f->ch_flush_ms   ? f->ch_flush_ms
                                                   : PD_STORAGE_CH_FLUSH_MS_DEFAULT;
    so.backend = f->backend;
    if (f->backend == PD_STORAGE_CLICKHOUSE) {
        if (f->n_ch_urls == 0) {
            fprintf(stderr, "profd: --storage.backend=clickhouse needs --clickhouse.url\n"
                            "See 'profd --help'.\n");
            code = EXIT_USAGE;
            goto out;
        }
        if (f->ch_batch_wait_ms > ch_flush_ms) {
            fprintf(stderr,
                    "profd: --clickhouse.batch-wait=%lldms is longer than "
                    "--clickhouse.flush-interval (%lldms), the longest wait\n"
                    "See 'profd --help'.\n",
                    (long long)f->ch_batch_wait_ms, (long long)ch_flush_ms);
            code = EXIT_USAGE;
            goto out;
        }
        if (f->ch_password_file) {
            FILE *pf = fopen(f->ch_password_file, "r");
            size_t pn = pf ? fread(ch_password, 1, sizeof ch_password - 1, pf) : 0;
            if (pf)
                fclose(pf);
            if (!pf) {
                fprintf(stderr, "profd: --clickhouse.password-file: cannot read %s: %s\n",
                        f->ch_password_file, strerror(errno));
                code = EXIT_USAGE;
                goto out;
            }
            ch_password[pn] = 0;
            while (pn > 0 && (ch_password[pn - 1] == '\n' || ch_password[pn - 1] == '\r'))
                ch_password[--pn] = 0;
        }
        so.clickhouse.urls = f->ch_urls;
        so.clickhouse.n_urls = f->n_ch_urls;
        so.clickhouse.user = f->ch_user;
        so.clickhouse.password = ch_password;
        so.clickhouse.database = f->ch_database;
        so.clickhouse.cluster = f->ch_cluster;
        so.clickhouse.replicated = f->ch_replicated;
        so.clickhouse.flush_interval_ms = f->ch_flush_ms;
        so.clickhouse.batch_wait_ms = f->ch_batch_wait_ms;
        so.clickhouse.cache_bytes = f->ch_cache_bytes;
        so.clickhouse.batch_profiles = f->threads;
        so.clickhouse.batch_rows = (size_t)f->ch_batch_rows;
        so.clickhouse.agg_flush_idle_ms = f->ch_agg_idle_ms;
    }
    /* The listener starts first, as Prometheus does: /-/healthy answers 200
       and /-/ready 503 while the store is opened and its WAL replayed (a due
       head cut then runs in the background, not before the listener). */
    /* the flags in effect, for /api/v1/status/flags (defaults filled in) */
    char v_seg[32], v_block[32], v_ret[32], v_grace[32], v_retsz[32], v_threads[16], v_qt[32],
        v_qms[32], v_body[32];
    snprintf(v_seg, sizeof v_seg, "%zu", f->segment_bytes ? f->segment_bytes : (size_t)32 << 20);
    pd_format_duration(f->block_ms ? f->block_ms : 2 * 3600 * 1000, v_block, sizeof v_block);
    pd_format_duration(f->retention_ms ? f->retention_ms : 15ll * 24 * 3600 * 1000, v_ret,
                       sizeof v_ret);
    pd_format_duration(f->grace_ms ? f->grace_ms : 10 * 60 * 1000, v_grace, sizeof v_grace);
    snprintf(v_retsz, sizeof v_retsz, "%zu", f->retention_bytes);
    snprintf(v_threads, sizeof v_threads, "%u", f->threads);
    pd_format_duration(f->query_timeout_ms ? f->query_timeout_ms : 120000, v_qt, sizeof v_qt);
    snprintf(v_qms, sizeof v_qms, "%zu", f->query_max_samples ? f->query_max_samples : 1000000);
    char v_msvc[32];
    snprintf(v_msvc, sizeof v_msvc, "%zu",
             f->max_series_svc == SIZE_MAX ? 0
             : f->max_series_svc           ? f->max_series_svc
                                           : (size_t)PD_API_DEFAULT_MAX_SERIES_PER_SERVICE);
    snprintf(v_body, sizeof v_body, "%zu", lim.max_body_bytes);
    char v_qconc[16], v_rto[32], v_mc[16], v_mcip[16]; /* the server's defaults when 0 */
    char v_aggw[16];
    snprintf(v_aggw, sizeof v_aggw, "%d", pd_storage_aggregate_workers(f->agg_workers));
    snprintf(v_qconc, sizeof v_qconc, "%u", f->query_threads ? f->query_threads : 4);
    pd_format_duration(f->read_timeout_ms ? f->read_timeout_ms : 30000, v_rto, sizeof v_rto);
    snprintf(v_mc, sizeof v_mc, "%u", f->max_conns ? f->max_conns : 4096);
    snprintf(v_mcip, sizeof v_mcip, "%u", f->max_conns_ip);
    char v_mmc[16];
    snprintf(v_mmc, sizeof v_mmc, "%d", f->merge_conc);
    /* issue 17: profd's own /debug/pprof, on by default when only loopback can reach it */
    bool enable_pprof = f->enable_pprof == 1 ||
                        (f->enable_pprof < 0 && (strncmp(f->listen, "127.", 4) == 0 ||
                                                 strncmp(f->listen, "localhost:", 10) == 0 ||
                                                 strncmp(f->listen, "[::1]:", 6) == 0));
    /* issue 20 item 4: the Host names served (http/guard.h) */
    char v_hosts[1024];
    if (pd_http_guard_new(f->listen, f->allowed_hosts, &guard, &err) < 0) {
        fprintf(stderr, "profd: %s\n", err.msg);
        code = EXIT_USAGE;
        goto out;
    }
    pd_http_guard_describe(guard, v_hosts, sizeof v_hosts);
    const char *fnames[] = {"config.file",
                            "storage.path",
                            "storage.wal.fsync",
                            "storage.wal.segment-size",
                            "storage.block-duration",
                            "storage.retention.time",
                            "storage.retention.size",
                            "storage.future-grace",
                            "web.listen-address",
                            "web.threads",
                            "query.timeout",
                            "query.max-samples",
                            "scrape.max-body-bytes",
                            "log.level",
                            "web.enable-pprof",
                            "query.max-concurrency",
                            "web.read-timeout",
                            "web.max-connections",
                            "web.max-connections-per-ip",
                            "web.config.file",
                            "web.enable-lifecycle",
                            "web.allowed-hosts",
                            "storage.backend",
                            "clickhouse.url",
                            "clickhouse.database",
                            "clickhouse.user",
                            "clickhouse.cluster",
                            "clickhouse.replicated",
                            "clickhouse.flush-interval",
                            "clickhouse.batch-wait",
                            "clickhouse.batch-rows",
                            "clickhouse.agg-flush-idle",
                            "query.max-merge-concurrency",
                            "storage.aggregate-workers",
                            "ingest.max-series-per-service",
                            "ui.source-dir"};
    char v_chfl[32], v_chbw[32], v_chrows[32], v_chidle[32];
    snprintf(v_chidle, sizeof v_chidle, "%lldms",
             (long long)(f->ch_agg_idle_ms < 0 ? 0
                         : f->ch_agg_idle_ms   ? f->ch_agg_idle_ms
                                               : PD_STORAGE_CH_AGG_IDLE_MS_DEFAULT));
    snprintf(v_chfl, sizeof v_chfl, "%lldms", (long long)ch_flush_ms);
    snprintf(v_chbw, sizeof v_chbw, "%lldms", (long long)f->ch_batch_wait_ms);
    snprintf(v_chrows, sizeof v_chrows, "%llu", f->ch_batch_rows ? f->ch_batch_rows : 1000000ull);
    char v_churls[1024] = "";
    for (size_t i = 0, o = 0; i < f->n_ch_urls && o < sizeof v_churls; i++)
        o += (size_t)snprintf(v_churls + o, sizeof v_churls - o, "%s%s", i ? "," : "",
                              f->ch_urls[i]);
    char v_srcdirs[2048] = "";
    for (size_t i = 0, o = 0; i < f->n_src_dirs && o < sizeof v_srcdirs; i++)
        o += (size_t)snprintf(v_srcdirs + o, sizeof v_srcdirs - o, "%s%s%s%s", i ? "," : "",
                              f->src_dirs[i].prefix ? f->src_dirs[i].prefix : "",
                              f->src_dirs[i].prefix ? "=" : "", f->src_dirs[i].dir);
    const char *fvalues[] = {f->config_file ? f->config_file : "",
                             f->storage_path,
                             f->fsync,
                             v_seg,
                             v_block,
                             v_ret,
                             v_retsz,
                             v_grace,
                             f->listen,
                             v_threads,
                             v_qt,
                             v_qms,
                             v_body,
                             f->log_level,
                             enable_pprof ? "true" : "false",
                             v_qconc,
                             v_rto,
                             v_mc,
                             v_mcip,
                             f->web_config ? f->web_config : "",
                             f->enable_lifecycle ? "true" : "false",
                             v_hosts,
                             f->backend == PD_STORAGE_CLICKHOUSE ? "clickhouse" : "tsdb",
                             v_churls,
                             f->ch_database ? f->ch_database : "profd",
                             f->ch_user ? f->ch_user : "default",
                             f->ch_cluster ? f->ch_cluster : "",
                             f->ch_replicated ? "true" : "false",
                             v_chfl,
                             v_chbw,
                             v_chrows,
                             v_chidle,
                             v_mmc,
                             v_aggw,
                             v_msvc,
                             v_srcdirs};
    pd_api_options ao = {.limits = lim,
                         .reload = do_reload,
                         .reload_ctx = &a,
                         .version = PD_VERSION,
                         .build = &pd_build_info_profd,
                         .query_timeout_ms = f->query_timeout_ms,
                         .query_max_samples = f->query_max_samples,
                         .max_series_per_service = f->max_series_svc,
                         .flag_names = fnames,
                         .flag_values = fvalues,
                         .n_flags = sizeof fnames / sizeof *fnames};
    ao.enable_pprof = enable_pprof;
    ao.enable_lifecycle = f->enable_lifecycle;
    ao.source_dirs = f->src_dirs;
    ao.n_source_dirs = f->n_src_dirs;
    /* nobody can read profd's heap profile: do not sample its allocations
       (the interposed malloc then only counts down nothing) */
    if (!ao.enable_pprof)
        pd_agent_heap_set_rate(0);
    /* issue 29: names for address-only frames, debug files under the store */
    {
        char dbgdir[4200];
        snprintf(dbgdir, sizeof dbgdir, "%s/debuginfo", f->storage_path);
        pd_symbolizer_opts sopt = {
            .cache_dir = dbgdir, .use_debuginfod = true, .max_upload_bytes = lim.max_body_bytes};
        pd_symbolizer_describe_metrics();
        if (pd_symbolizer_new(&sopt, &sym, &err) < 0) {
            pd_log(PD_LOG_WARN, "symbolization off", "err=\"%s\"", err.msg);
            pd_err_clear(&err);
        } else {
            pd_symbolizer_set_global(sym);
        }
    }
    int rc = pd_api_new(NULL, NULL, &ao, &api, &err);
    if (rc < 0) {
        fprintf(stderr, "profd: %s\n", err.msg);
        goto out;
    }
    a.api = api;
    record_config(&a, true);
    pd_http_server_options ho = {.listen_addr = f->listen,
                                 .threads = f->threads,
                                 .query_threads = f->query_threads,
                                 .max_body_bytes = lim.max_body_bytes,
                                 .read_timeout_ms = f->read_timeout_ms,
                                 .max_connections = f->max_conns,
                                 .max_connections_per_ip = f->max_conns_ip,
                                 .classify = pd_api_classify,
                                 .gate = gate,
                                 .group = pd_api_access_group,
                                 .form = pd_api_form_route,
                                 .guard = guard};
    rc = pd_http_server_start_opts(&ho, pd_api_handle, api, &srv, &err);
    if (rc < 0) {
        fprintf(stderr, "profd: cannot listen on %s: %s\n", f->listen,
                err.msg[0] ? err.msg : pd_strerror(rc));
        code = rc == PD_EINVAL ? EXIT_USAGE : EXIT_RUNTIME;
        goto out;
    }
    {
        /* the URL to open: the host as given (empty = all interfaces, shown
         * as 127.0.0.1 which reaches it), the port as bound */
        const char *colon = strrchr(f->listen, ':');
        size_t hl = colon ? (size_t)(colon - f->listen) : 0;
        char host[300];
        snprintf(host, sizeof host, "%.*s", (int)hl, f->listen);
        if (!host[0] || strcmp(host, "0.0.0.0") == 0)
            snprintf(host, sizeof host, "127.0.0.1");
        else if (strcmp(host, "[::]") == 0)
            snprintf(host, sizeof host, "[::1]");
        bool tls = gate && pd_http_gate_config(gate)->tls_enabled;
        pd_log(PD_LOG_INFO, "profd listening", "url=%s://%s:%u/ storage=%s version=%s",
               tls ? "https" : "http", host, (unsigned)pd_http_server_port(srv), f->storage_path,
               PD_VERSION);
    }

    int64_t open_t0 = pd_mono_ns();
    rc = pd_storage_open(&so, &st, &err);
    if (rc < 0) {
        pd_log(PD_LOG_ERROR, "cannot open storage", "path=%s err=\"%s\"", f->storage_path,
               err.msg[0] ? err.msg : pd_strerror(rc));
        fprintf(stderr, "profd: cannot open storage %s: %s\n", f->storage_path,
                err.msg[0] ? err.msg : pd_strerror(rc));
        goto out;
    }

    /* issue 30: recording rules see every profile stored, from now on */
    if ((rc = pd_rules_new(st, &rules, &err)) < 0 ||
        (rc = pd_rules_apply(rules, &rcfg, &err)) < 0) {
        fprintf(stderr, "profd: cannot start recording rules: %s\n",
                err.msg[0] ? err.msg : pd_strerror(rc));
        goto out;
    }
    for (size_t i = 0; i < rcfg.n_warnings; i++)
        pd_log(PD_LOG_WARN, "configuration warning", "msg=\"%s\"", rcfg.warnings[i]);
    pd_storage_on_append(st, pd_rules_observe, rules);
    pd_api_set_rules(api, rules);
    a.rules = rules;

    /* issue 18: adaptive capture's events beside the storage; issue 28: the
     * manager exists without --config.file too, so /api/v1/events serves the
     * events a run with a configuration logged (its thread starts only with
     * a configuration) */
    char evpath[4096];
    snprintf(evpath, sizeof evpath, "%s/events.log", f->storage_path);
    if ((rc = pd_scrape_manager_new(st, &lim, &sm, &err)) < 0) {
        fprintf(stderr, "profd: cannot start scraping: %s\n",
                err.msg[0] ? err.msg : pd_strerror(rc));
        goto out;
    }
    if (pd_scrape_manager_events_open(sm, evpath, &err) < 0) {
        pd_log(PD_LOG_WARN, "events kept in memory only", "err=\"%s\"", err.msg);
        pd_err_clear(&err);
    }
    if (f->config_file) {
        if ((rc = pd_scrape_manager_apply(sm, &cfg, &err)) < 0 ||
            (rc = pd_scrape_manager_start(sm, &err)) < 0) {
            fprintf(stderr, "profd: cannot start scraping: %s\n",
                    err.msg[0] ? err.msg : pd_strerror(rc));
            goto out;
        }
        a.sm = sm;
        pd_log(PD_LOG_INFO, "scraping", "file=%s jobs=%zu", f->config_file, cfg.n_jobs);
    }
    pd_api_set_ready(api, st, sm);
    pd_log(PD_LOG_INFO, "profd ready", "storage_open_seconds=%.3f",
           (double)(pd_mono_ns() - open_t0) / 1e9);

    for (;;) {
        siginfo_t si;
        int sig = sigwaitinfo(&set, &si);
        if (sig < 0) {
            if (errno == EINTR)
                continue;
            pd_log(PD_LOG_ERROR, "sigwaitinfo failed", "errno=%d", errno);
            break;
        }
        if (sig == SIGHUP) {
            pd_log(PD_LOG_INFO, "SIGHUP: reloading configuration", NULL);
            pd_err rerr = {{0}};
            do_reload(&a, &rerr);
            continue;
        }
        pd_log(PD_LOG_INFO, "shutting down", "signal=%s", sig == SIGINT ? "SIGINT" : "SIGTERM");
        break;
    }
    code = 0;
out:
    pd_cancel_shutdown(); /* running queries stop now, not when they end */
    pd_http_server_stop(srv);
    pd_http_gate_free(gate);
    pd_scrape_manager_free(sm);
    if (st)
        pd_storage_on_append(st, NULL, NULL);
    pd_api_free(api);
    pd_symbolizer_free(sym);
    pd_rules_free(rules);
    pd_rules_config_release(&rcfg);
    pd_http_guard_free(guard);
    pd_storage_close(st);
    pd_config_release(&cfg);
    pthread_mutex_destroy(&a.mu);
    if (code == 0)
        pd_log(PD_LOG_INFO, "profd stopped", NULL);
    return code;
}

int main(int argc, char **argv)
{
    flags f = {
        .config_file = NULL,
        .storage_path = "./data",
        .listen = "127.0.0.1:10902",
        .enable_pprof = -1,
        .log_level = "info",
        .fsync = "batch",
        .max_body = 0,
        .threads = 0, /* 4, or 64 with the ClickHouse backend (after parse_flags) */
        .max_conns_ip = 512,
    };
    if (argc > 1 && strcmp(argv[1], "convert") == 0)
        return pd_ingest_convert_main(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "push") == 0)
        return pd_ingest_push_main(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "debuginfo") == 0)
        return pd_debuginfo_main(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "check") == 0)
        return check_main(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "help") == 0) { /* `profd help`, as promtool */
        usage(stdout);
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "tsdb") == 0)
        return pd_tsdb_cli_main(argc - 1, argv + 1);
    int rc = parse_flags(argc, argv, &f);
    if (rc >= 0)
        return rc;
    /* a ClickHouse-backed push holds its worker until its batch is
       acknowledged, so the workers bound a batch: more of them by default
       (docs/clickhouse.md#batches) */
    if (!f.threads)
        f.threads = f.backend == PD_STORAGE_CLICKHOUSE ? 64 : 4;
    pd_log_set_level(f.log_level);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    rc = serve(&f);
    curl_global_cleanup();
    return rc;
}
