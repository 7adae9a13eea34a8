/*
 * symbolize/symbolize.c — see symbolize.h for where debug info comes from
 * and what a frame gets.
 *
 * Memory: one entry per build ID asked about (at most MAX_ENTRIES; when
 * full, the least recently used entry not being fetched is closed), each
 * holding the file's symbols (pd_elf_info) and, when it has DWARF, an open
 * libdw handle for lines and inlined frames, with two sorted indexes built
 * on first use: the CUs' ranges (no .debug_aranges) and the functions'
 * ranges (the scopes an address's inlined frames are read from). Entries
 * that found nothing remember when to ask again (RETRY_MS).
 *
 * DWARF comes from uploads and debuginfod: untrusted. libdw checks its
 * reads; the walks here are bounded (scope nesting MAX_SCOPE_DEPTH,
 * siblings only forward, MAX_FN_RANGES, MAX_FRAMES lines a location).
 *
 * Locking: one mutex over the entries; file lookups on this host run under
 * it, a debuginfod fetch never does. pd_symbolizer_profile (1) under the
 * lock finds each build ID's entry from local files and marks the ones due
 * for a fetch `fetching` (taking them over: no other thread fetches that
 * build ID meanwhile, and a fetching entry is neither evicted nor freed by
 * an upload); (2) without the lock fetches those (into the cache
 * directory); (3) under the lock loads what came, clears `fetching` and
 * wakes the waiters; (4) waits (condition variable) for the build IDs it
 * needs that other threads are fetching; (5) names the frames. So an
 * answer that needs a build ID being fetched waits for that one fetch, and
 * answers that do not are never held up by it.
 *
 * Addresses: a location's file offset is address - memory_start +
 * file_offset of its mapping; the symbol table's address is that offset
 * through the debug file's PT_LOAD segments (objcopy --only-keep-debug and
 * Debian's dh_strip keep the program headers of the binary).
 */
#include "symbolize/symbolize.h"

#include <elfutils/debuginfod.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "base/metrics.h"
#include "base/time.h"
#include "base/u64map.h"
#include "symbolize/elf.h"
#include "symbolize/symcache.h"

#define MAX_ENTRIES 256
#define RETRY_MS (5 * 60 * 1000)
#define DEFAULT_MAX_UPLOAD ((size_t)1 << 30)
#define MAX_FRAMES 64 /* lines of one location: the function and what is inlined in it */
#define MAX_CACHES 64 /* results caches (symcache.h) in memory: LRU */
/* their file bytes together, in memory (~2.1x that: strings, lines, map) */
#define DEFAULT_CACHE_MEM ((size_t)64 << 20)

typedef struct entry {
    char build_id[129];
    bool found;
    int64_t retry_at_ms; /* !found: ask again after */
    pd_elf_info info;
    pd_symcache_source src; /* found: the file's identity (the results cache's header) */
    int fd;                 /* for libdw, -1 when none */
    Dwarf *dw;              /* NULL when the file has no DWARF */
    int64_t used;           /* LRU clock */
    bool fetching;          /* a thread fetches it from debuginfod without the lock */
    /* the CUs' address ranges, sorted by lo, built on the first address
       dwarf_addrdie cannot place (no .debug_aranges: clang's default) */
    struct cu_range *cus;
    size_t n_cus;
    bool cus_built;
    /* the functions' (outermost scopes') address ranges over every CU,
       sorted by lo, built on the first frame asked of the file: an answer
       then reads one function's scopes, not its CU's (dwarf_frames) */
    struct cu_range *fns;
    size_t n_fns;
    bool fns_built;
} entry;

typedef struct cu_range {
    Dwarf_Addr lo, hi; /* [lo, hi) */
    Dwarf_Die cu;      /* the CU (entry.cus) or the function (entry.fns) */
} cu_range;

struct pd_symbolizer {
    char *cache_dir;
    char *debug_dir;
    bool use_debuginfod;
    size_t max_upload;
    pthread_mutex_t mu;
    pthread_cond_t fetched; /* broadcast when an entry's fetch ends */
    entry *ents[MAX_ENTRIES];
    size_t n_ents;
    int64_t clock;
    size_t max_cache_bytes;
    uint64_t max_cache_mem;          /* file bytes of the caches in memory together */
    pd_symcache *caches[MAX_CACHES]; /* results caches loaded, LRU by used */
    size_t n_caches;
};

static pd_symbolizer *global_sym;

void pd_symbolizer_set_global(pd_symbolizer *s)
{
    global_sym = s;
}
pd_symbolizer *pd_symbolizer_global(void)
{
    return global_sym;
}

static int mkdir_p(const char *path)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
            return -errno;
        *p = '/';
    }
    if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
        return -errno;
    return 0;
}

int pd_symbolizer_new(const pd_symbolizer_opts *o, pd_symbolizer **out, pd_err *err)
{
    *out = NULL;
    int rc = mkdir_p(o->cache_dir);
    if (rc < 0)
        return pd_err_set(err, rc, "debug info cache %s: %s", o->cache_dir, strerror(-rc));
    pd_symbolizer *s = calloc(1, sizeof *s);
    if (!s)
        return PD_ENOMEM;
    s->cache_dir = strdup(o->cache_dir);
    s->debug_dir = strdup(o->debug_dir ? o->debug_dir : "/usr/lib/debug");
    if (!s->cache_dir || !s->debug_dir) {
        free(s->cache_dir);
        free(s->debug_dir);
        free(s);
        return PD_ENOMEM;
    }
    s->use_debuginfod = o->use_debuginfod;
    s->max_upload = o->max_upload_bytes ? o->max_upload_bytes : DEFAULT_MAX_UPLOAD;
    s->max_cache_bytes = o->max_cache_bytes ? o->max_cache_bytes : PD_SYMCACHE_DEFAULT_MAX_BYTES;
    s->max_cache_mem = o->max_cache_mem_bytes ? o->max_cache_mem_bytes : DEFAULT_CACHE_MEM;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->fetched, NULL);
    if (!getenv("DEBUGINFOD_CACHE_PATH")) {
        char p[4200];
        snprintf(p, sizeof p, "%s/.debuginfod-client", s->cache_dir);
        setenv("DEBUGINFOD_CACHE_PATH", p, 0);
    }
    *out = s;
    return 0;
}

static void entry_free(entry *e)
{
    if (!e)
        return;
    if (e->dw)
        dwarf_end(e->dw);
    if (e->fd >= 0)
        close(e->fd);
    pd_elf_info_release(&e->info);
    free(e->cus);
    free(e->fns);
    free(e);
}

static void cache_free(pd_symcache *c)
{
    if (!c)
        return;
    pd_symcache_flush(c);
    pd_symcache_release(c);
    free(c);
}

void pd_symbolizer_free(pd_symbolizer *s)
{
    if (!s)
        return;
    if (global_sym == s)
        global_sym = NULL;
    for (size_t i = 0; i < s->n_ents; i++)
        entry_free(s->ents[i]);
    for (size_t i = 0; i < s->n_caches; i++)
        cache_free(s->caches[i]);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->fetched);
    free(s->cache_dir);
    free(s->debug_dir);
    free(s);
}

void pd_symbolizer_describe_metrics(void)
{
    pd_metrics_describe("profd_symbolize_frames_total", PD_METRIC_COUNTER,
                        "Address-only frames of answers named from debug info (result=named) or "
                        "shown as binary+offset (result=unnamed).");
    pd_metrics_describe("profd_debuginfod_fetches_total", PD_METRIC_COUNTER,
                        "Debug info asked of the DEBUGINFOD_URLS servers by build ID, by result.");
    pd_metrics_describe("profd_debuginfo_uploads_total", PD_METRIC_COUNTER,
                        "Debug files uploaded (POST /api/v1/debuginfo/{build_id}), stored or "
                        "rejected.");
    pd_metrics_describe("profd_symbolize_cache_lookups_total", PD_METRIC_COUNTER,
                        "Address-only frames looked up in the per-build-ID results cache: "
                        "hit (named without the debug file) or miss.");
    pd_metrics_describe("profd_symbolize_cache_corrupt_total", PD_METRIC_COUNTER,
                        "Results cache files found damaged on load, by part: header (nothing "
                        "kept, rebuilt) or record (kept up to the bad record, rest rebuilt).");
    pd_metrics_describe("profd_symbolize_cache_invalidations_total", PD_METRIC_COUNTER,
                        "Results caches dropped because their debug info changed, by reason: "
                        "upload or source_changed.");
    pd_metrics_describe("profd_symbolize_cache_full_total", PD_METRIC_COUNTER,
                        "Answers not kept because their build ID's results cache file was at "
                        "its size cap.");
}

static void lower(char *s)
{
    for (; *s; s++)
        if (*s >= 'A' && *s <= 'F')
            *s = (char)(*s - 'A' + 'a');
}

/* The results cache's identity (symcache.h) of the file at path, found at
 * kind, from its stat sb. false: path too long to record. */
static bool source_of(const struct stat *sb, const char *path, uint8_t kind,
                      pd_symcache_source *out)
{
    if (strlen(path) >= sizeof out->path)
        return false;
    *out = (pd_symcache_source){.kind = kind,
                                .size = (uint64_t)sb->st_size,
                                .mtime_ns =
                                    (int64_t)sb->st_mtim.tv_sec * 1000000000 + sb->st_mtim.tv_nsec,
                                .dev = (uint64_t)sb->st_dev,
                                .ino = (uint64_t)sb->st_ino};
    snprintf(out->path, sizeof out->path, "%s", path);
    return true;
}

/* The debug files of a build ID on this host, in the order a lookup tries
 * them: the cache directory (uploads, earlier fetches), then debug_dir's
 * .build-id tree (lookup_local; cache_source_current checks the same). */
static const uint8_t local_kinds[] = {PD_SYMCACHE_SRC_CACHE_DIR, PD_SYMCACHE_SRC_DEBUG_DIR};

/* The path of bid's debug file at kind (one of local_kinds) in out. */
static void local_path(const pd_symbolizer *s, const char *bid, uint8_t kind, char *out, size_t cap)
{
    if (kind == PD_SYMCACHE_SRC_CACHE_DIR)
        snprintf(out, cap, "%s/%s/debuginfo", s->cache_dir, bid);
    else
        snprintf(out, cap, "%s/.build-id/%.2s/%s.debug", s->debug_dir, bid, bid + 2);
}

/* Opens path as e's debug file when it is ELF with build ID e->build_id;
 * kind says where it was found (PD_SYMCACHE_SRC_*, the results cache's
 * identity of it). */
static bool try_file(entry *e, const char *path, uint8_t kind)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    pd_elf_info info;
    if (pd_elf_read_fd(fd, path, true, &info, NULL) < 0) {
        close(fd);
        return false;
    }
    if (strcmp(info.build_id, e->build_id) != 0 || (!info.n_syms)) {
        pd_elf_info_release(&info);
        close(fd);
        return false;
    }
    struct stat sb;
    if (fstat(fd, &sb) < 0 || !source_of(&sb, path, kind, &e->src)) {
        pd_elf_info_release(&info);
        close(fd);
        return false;
    }
    e->info = info;
    e->fd = fd;
    e->dw = dwarf_begin(fd, DWARF_C_READ); /* NULL: no DWARF, names only */
    e->found = true;
    return true;
}

/* Copies fd's file into dst (temp file, fsync, rename). */
static int copy_into(int fd, const char *dst)
{
    char tmp[4500];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", dst, (int)getpid());
    int out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out < 0)
        return -errno;
    char buf[65536];
    ssize_t n;
    off_t off = 0;
    int rc = 0;
    while ((n = pread(fd, buf, sizeof buf, off)) > 0) {
        if (write(out, buf, (size_t)n) != n) {
            rc = -EIO;
            break;
        }
        off += n;
    }
    if (n < 0)
        rc = -errno;
    if (!rc && fsync(out) < 0)
        rc = -errno;
    close(out);
    if (!rc && rename(tmp, dst) < 0)
        rc = -errno;
    if (rc)
        unlink(tmp);
    return rc;
}

static int hexval(char c)
{
    return c <= '9' ? c - '0' : c - 'a' + 10;
}

/* The debug files on this host (local_kinds, first found wins). Lock held. */
static bool lookup_local(pd_symbolizer *s, entry *e)
{
    char path[4400];
    for (size_t i = 0; i < sizeof local_kinds; i++) {
        local_path(s, e->build_id, local_kinds[i], path, sizeof path);
        if (try_file(e, path, local_kinds[i]))
            return true;
    }
    return false;
}

static bool debuginfod_on(const pd_symbolizer *s)
{
    const char *u = getenv("DEBUGINFOD_URLS");
    return s->use_debuginfod && u && *u;
}

/* Last resort: the mapping's own file on this host, when it has a .symtab
 * and the build ID (a stripped file's .dynsym alone would hide a later
 * debuginfod answer). Then, when still not found, the next try's time.
 * Lock held. */
static void lookup_tail(entry *e, const char *local_file, int64_t now)
{
    if (!e->found && local_file && local_file[0] == '/' &&
        try_file(e, local_file, PD_SYMCACHE_SRC_MAPPED_FILE) && !e->info.from_symtab) {
        if (e->dw)
            dwarf_end(e->dw);
        close(e->fd);
        pd_elf_info_release(&e->info);
        e->dw = NULL;
        e->fd = -1;
        e->found = false;
    }
    if (!e->found)
        e->retry_at_ms = now + RETRY_MS;
}

/*
 * Asks the debuginfod servers for build_id's debug info, WITHOUT the lock
 * (the slow part: the network). On success the file is copied into the
 * cache directory (where lookup_local finds it) and 1 is returned with
 * *got the client's own copy (malloc'd; the fallback when the copy failed);
 * 0 when no server has it.
 */
static int fetch(const pd_symbolizer *s, const char *build_id, char **got)
{
    *got = NULL;
    debuginfod_client *c = debuginfod_begin();
    if (!c)
        return 0;
    unsigned char bid[64];
    size_t n = strlen(build_id) / 2;
    for (size_t i = 0; i < n; i++)
        bid[i] = (unsigned char)(hexval(build_id[2 * i]) << 4 | hexval(build_id[2 * i + 1]));
    int fd = debuginfod_find_debuginfo(c, bid, (int)n, got);
    debuginfod_end(c);
    if (fd < 0) {
        pd_metrics_add("profd_debuginfod_fetches_total", "result=\"missing\"", 1);
        pd_log_debug("debuginfod has no debug info", "build_id=%s err=\"%s\"", build_id,
                     strerror(-fd));
        free(*got);
        *got = NULL;
        return 0;
    }
    pd_metrics_add("profd_debuginfod_fetches_total", "result=\"found\"", 1);
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", s->cache_dir, build_id);
    int rc = mkdir_p(path);
    local_path(s, build_id, PD_SYMCACHE_SRC_CACHE_DIR, path, sizeof path);
    if (rc == 0)
        rc = copy_into(fd, path);
    close(fd);
    if (rc < 0)
        pd_log_warn("cannot keep debug info fetched from debuginfod",
                    "build_id=%s path=%s err=\"%s\"", build_id, path, strerror(-rc));
    return 1;
}

static entry *find_entry(pd_symbolizer *s, const char *bid)
{
    for (size_t i = 0; i < s->n_ents; i++)
        if (!strcmp(s->ents[i]->build_id, bid))
            return s->ents[i];
    return NULL;
}

/*
 * The entry of build_id (lowercase), looked up on this host when new or due
 * again. When a debuginfod fetch is due and may_fetch, the entry is marked
 * fetching and *fetch_it set: the caller fetches it (without the lock) and
 * calls fetch_done. An entry another thread is fetching is returned as is
 * (e->fetching). NULL: out of memory, or every entry is being fetched.
 * Lock held.
 */
static entry *get_entry(pd_symbolizer *s, const char *bid, const char *local_file, bool may_fetch,
                        bool *fetch_it)
{
    int64_t now = pd_now_ms();
    *fetch_it = false;
    entry *e = find_entry(s, bid);
    if (e) {
        e->used = ++s->clock;
        if (e->found || e->fetching || now < e->retry_at_ms)
            return e;
    } else {
        if (s->n_ents == MAX_ENTRIES) { /* close the least recently used not being fetched */
            size_t lru = MAX_ENTRIES;
            for (size_t i = 0; i < s->n_ents; i++)
                if (!s->ents[i]->fetching &&
                    (lru == MAX_ENTRIES || s->ents[i]->used < s->ents[lru]->used))
                    lru = i;
            if (lru == MAX_ENTRIES)
                return NULL;
            entry_free(s->ents[lru]);
            s->ents[lru] = s->ents[--s->n_ents];
        }
        e = calloc(1, sizeof *e);
        if (!e)
            return NULL;
        snprintf(e->build_id, sizeof e->build_id, "%s", bid);
        e->fd = -1;
        e->used = ++s->clock;
        s->ents[s->n_ents++] = e;
    }
    if (lookup_local(s, e))
        return e;
    if (may_fetch && debuginfod_on(s)) {
        e->fetching = true;
        *fetch_it = true;
        return e;
    }
    lookup_tail(e, local_file, now);
    return e;
}

/* After fetch (lock held again): load what came, clear fetching, wake the
 * waiters. e cannot have gone: fetching entries are not evicted or freed. */
static void fetch_done(pd_symbolizer *s, entry *e, int found, const char *got,
                       const char *local_file)
{
    /* the cache directory first: the fetched copy, or an upload made meanwhile */
    if (lookup_local(s, e) || (found && got && try_file(e, got, PD_SYMCACHE_SRC_DEBUGINFOD)))
        pd_log_info("debug info fetched from debuginfod", "build_id=%s", e->build_id);
    lookup_tail(e, local_file, pd_now_ms());
    e->fetching = false;
    pthread_cond_broadcast(&s->fetched);
}

/* ---- results caches (symcache.h): <cache dir>/<bid>/symbols.cache ---- */

static void cache_path(const pd_symbolizer *s, const char *bid, char *out, size_t cap)
{
    snprintf(out, cap, "%s/%s/symbols.cache", s->cache_dir, bid);
}

/* The identity of the file at path now, as try_file records it. */
static bool stat_source(const char *path, uint8_t kind, pd_symcache_source *out)
{
    struct stat sb;
    return stat(path, &sb) == 0 && source_of(&sb, path, kind, out);
}

/* True when the debug file c's answers came from is still the one a lookup
 * would use, checked with stat only (no ELF opened): the cache directory's
 * file when there is one, else the debug directory's, else (the header
 * names the mapping's file or the debuginfod client's copy) that file, each
 * unchanged (size, mtime, device, inode) — or when none of them is there
 * any more: the answers were made from a file of this very build ID and
 * stay the best known (the binary was deleted, the package removed) until
 * another file of it comes. */
static bool cache_source_current(const pd_symbolizer *s, const pd_symcache *c)
{
    char path[4400];
    pd_symcache_source now;
    for (size_t i = 0; i < sizeof local_kinds; i++) {
        local_path(s, c->build_id, local_kinds[i], path, sizeof path);
        if (stat_source(path, local_kinds[i], &now))
            return pd_symcache_source_equal(&now, &c->src);
    }
    if (c->src.kind != PD_SYMCACHE_SRC_MAPPED_FILE && c->src.kind != PD_SYMCACHE_SRC_DEBUGINFOD)
        return true; /* its file in the cache or debug directory is gone */
    if (stat_source(c->src.path, c->src.kind, &now))
        return pd_symcache_source_equal(&now, &c->src);
    return true;
}

static pd_symcache *find_cache(pd_symbolizer *s, const char *bid, size_t *at)
{
    for (size_t i = 0; i < s->n_caches; i++)
        if (!strcmp(s->caches[i]->build_id, bid)) {
            if (at)
                *at = i;
            return s->caches[i];
        }
    return NULL;
}

/*
 * The results cache of bid (lowercase), read from its file on first use
 * (the least recently used ones closed when MAX_CACHES are open or their
 * files' bytes would pass max_cache_mem; other cache pointers are then
 * invalid). A file
 * with a bad header or tail is counted (the good records kept: symcache.h);
 * one whose debug file changed since is dropped (cache_source_current).
 * NULL: out of memory. Lock held.
 */
static uint64_t caches_bytes(const pd_symbolizer *s)
{
    uint64_t n = 0;
    for (size_t i = 0; i < s->n_caches; i++)
        n += s->caches[i]->file_bytes + s->caches[i]->pending.len;
    return n;
}

/* Closes the least recently used caches (written first) while more than
 * keep are open and they hold more than `room` below max_cache_mem. Lock
 * held; no pointer to a cache may be kept over it. */
static void caches_trim(pd_symbolizer *s, size_t keep, uint64_t room)
{
    while (s->n_caches > keep &&
           (s->n_caches >= MAX_CACHES || caches_bytes(s) + room > s->max_cache_mem)) {
        size_t lru = 0;
        for (size_t i = 1; i < s->n_caches; i++)
            if (s->caches[i]->used < s->caches[lru]->used)
                lru = i;
        cache_free(s->caches[lru]);
        s->caches[lru] = s->caches[--s->n_caches];
    }
}

static pd_symcache *get_cache(pd_symbolizer *s, const char *bid)
{
    pd_symcache *c = find_cache(s, bid, NULL);
    if (c) {
        c->used = ++s->clock;
        return c;
    }
    char path[4400];
    cache_path(s, bid, path, sizeof path);
    c = malloc(sizeof *c);
    if (!c || pd_symcache_init(c, bid, path, s->max_cache_bytes) < 0) {
        free(c);
        return NULL;
    }
    pd_symcache_stats st;
    int rc = pd_symcache_load(c, &st);
    if (rc < 0 && rc != PD_ENOMEM)
        pd_log_warn("cannot read the symbolization cache, rebuilding it", "path=%s err=\"%s\"",
                    path, strerror(-rc));
    if (st.bad_header || st.bad_record) {
        pd_metrics_add("profd_symbolize_cache_corrupt_total",
                       st.bad_header ? "part=\"header\"" : "part=\"record\"", 1);
        pd_log_warn("symbolization cache damaged: kept what precedes the damage, rebuilding the "
                    "rest",
                    "path=%s records_kept=%zu good_bytes=%" PRIu64, path, st.records,
                    st.good_bytes);
    }
    if (c->has_source && !cache_source_current(s, c)) {
        pd_metrics_add("profd_symbolize_cache_invalidations_total", "reason=\"source_changed\"", 1);
        pd_log_info("symbolization cache dropped: its debug info changed", "build_id=%s", bid);
        pd_symcache_reset(c, NULL);
    }
    c->used = ++s->clock;
    caches_trim(s, 0, c->file_bytes); /* room for c: under MAX_CACHES and max_cache_mem */
    s->caches[s->n_caches++] = c;
    return c;
}

/* Keeps the answer lines[0..n) of off made from e's debug file in c (reset
 * first when c's answers came from another file). Lock held. */
static void cache_add(pd_symcache *c, const entry *e, uint64_t off, const pd_symcache_line *lines,
                      size_t n)
{
    if (!c->has_source || !pd_symcache_source_equal(&c->src, &e->src)) {
        if (c->has_source)
            pd_metrics_add("profd_symbolize_cache_invalidations_total", "reason=\"source_changed\"",
                           1);
        pd_symcache_reset(c, &e->src);
    }
    if (pd_symcache_add(c, off, lines, n) == PD_ETOOBIG)
        pd_metrics_add("profd_symbolize_cache_full_total", NULL, 1);
}

/* Writes what the caches gained (one append each). Lock held. */
static void cache_flush_all(pd_symbolizer *s)
{
    for (size_t i = 0; i < s->n_caches; i++) {
        pd_symcache *c = s->caches[i];
        if (!c->pending.len)
            continue;
        if (c->rewrite) {
            char dir[4400];
            snprintf(dir, sizeof dir, "%s/%s", s->cache_dir, c->build_id);
            mkdir_p(dir);
        }
        int rc = pd_symcache_flush(c);
        if (rc < 0)
            pd_log_warn("cannot write the symbolization cache", "path=%s err=\"%s\"", c->path,
                        strerror(-rc));
    }
    caches_trim(s, 1, 0); /* what the answers added may pass max_cache_mem */
}

/* Forgets what build_id's entry knew (an upload), and its results cache
 * (memory and file: the answers came from another file). An entry being
 * fetched is kept (its fetcher holds it) and looks at the cache directory
 * when the fetch ends. */
static void forget(pd_symbolizer *s, const char *bid)
{
    size_t at;
    pd_symcache *c = find_cache(s, bid, &at);
    char path[4400];
    cache_path(s, bid, path, sizeof path);
    bool dropped = unlink(path) == 0;
    if (c) {
        pd_symcache_release(c); /* not flushed: pending answers are the old file's */
        free(c);
        s->caches[at] = s->caches[--s->n_caches];
        dropped = true;
    }
    if (dropped)
        pd_metrics_add("profd_symbolize_cache_invalidations_total", "reason=\"upload\"", 1);
    for (size_t i = 0; i < s->n_ents; i++)
        if (!strcmp(s->ents[i]->build_id, bid)) {
            if (s->ents[i]->fetching)
                return;
            entry_free(s->ents[i]);
            s->ents[i] = s->ents[--s->n_ents];
            return;
        }
}

static int cmp_cu_range(const void *a, const void *b)
{
    const cu_range *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Every CU's ranges (DW_AT_low_pc/high_pc or DW_AT_ranges, through
 * dwarf_ranges) into e->cus, sorted; once per entry. Files whose linker or
 * compiler wrote no .debug_aranges (clang does not by default) leave
 * dwarf_addrdie nothing to look in. At most 1M ranges. */
static void build_cu_ranges(entry *e)
{
    e->cus_built = true;
    size_t cap = 0;
    Dwarf_CU *cu = NULL;
    Dwarf_Die cudie;
    Dwarf_Half ver;
    uint8_t ut;
    while (dwarf_get_units(e->dw, cu, &cu, &ver, &ut, &cudie, NULL) == 0) {
        Dwarf_Addr base, lo, hi;
        ptrdiff_t off = 0;
        while ((off = dwarf_ranges(&cudie, off, &base, &lo, &hi)) > 0) {
            if (hi <= lo)
                continue;
            if (e->n_cus == cap) {
                size_t nc = cap ? cap * 2 : 64;
                cu_range *nv = nc <= (1u << 20) ? realloc(e->cus, nc * sizeof *nv) : NULL;
                if (!nv)
                    goto done;
                e->cus = nv;
                cap = nc;
            }
            e->cus[e->n_cus++] = (cu_range){lo, hi, cudie};
        }
    }
done:
    if (e->n_cus)
        qsort(e->cus, e->n_cus, sizeof *e->cus, cmp_cu_range);
}

/* The CU holding vaddr: .debug_aranges (dwarf_addrdie), else the CU
 * ranges. */
static bool cu_of(entry *e, uint64_t vaddr, Dwarf_Die *cu)
{
    if (dwarf_addrdie(e->dw, vaddr, cu))
        return true;
    if (!e->cus_built)
        build_cu_ranges(e);
    size_t lo = 0, hi = e->n_cus; /* last range with lo <= vaddr, then back over overlaps */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (e->cus[mid].lo <= vaddr)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t i = lo; i-- > 0;)
        if (vaddr < e->cus[i].hi) {
            *cu = e->cus[i].cu;
            return true;
        } else if (lo - i > 64) {
            break;
        }
    return false;
}

/* One frame of an address, as pprof's Line: innermost first. */
typedef struct frame {
    const char *name; /* NULL: the symbol table's (the outermost frame) */
    const char *file; /* NULL: unknown; relative: to dir */
    const char *dir;  /* the CU's DW_AT_comp_dir when absolute, else NULL */
    int line;         /* 0: unknown */
} frame;

/* The name of a function's DIE, through DW_AT_abstract_origin and
 * DW_AT_specification (dwarf_attr_integrate): the linkage name when there
 * is one (what the symbol table says of C++ and Rust), else DW_AT_name. */
static const char *die_name(Dwarf_Die *die)
{
    Dwarf_Attribute at;
    const char *n = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &at));
    if (!n)
        n = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &at));
    if (!n)
        n = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_name, &at));
    return n && *n ? n : NULL;
}

/* Moves d to its next sibling; false at the end, or when the DWARF points
 * back (a DW_AT_sibling of a crafted file: walks end). */
static bool next_sibling(Dwarf_Die *d)
{
    Dwarf_Off at = dwarf_dieoffset(d);
    return dwarf_siblingof(d, d) == 0 && dwarf_dieoffset(d) > at;
}

/* DIEs that may hold code below them without a pc range of their own (C++
 * namespaces and classes, Fortran modules): searched through, never frames. */
static bool is_container(int tag)
{
    return tag == DW_TAG_namespace || tag == DW_TAG_module || tag == DW_TAG_class_type ||
           tag == DW_TAG_structure_type || tag == DW_TAG_union_type;
}

/* DIEs whose pc ranges scope code: followed down when they hold pc. */
static bool is_scope(int tag)
{
    return tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine ||
           tag == DW_TAG_lexical_block || tag == DW_TAG_entry_point || tag == DW_TAG_try_block ||
           tag == DW_TAG_catch_block || tag == DW_TAG_with_stmt;
}

#define MAX_SCOPE_DEPTH 256 /* nesting of DIEs followed (corrupt DWARF may loop) */

/*
 * The chain of scopes holding pc below parent, outermost first, into
 * chain[*n..cap): each child that is a scope and holds pc (dwarf_haspc) is
 * taken and followed down; its siblings are not (scopes of one parent do
 * not overlap), nor are children of DIEs that do not hold pc — so one
 * answer reads the parent's children and the path to pc, not the whole
 * CU (dwarf_getscopes_die would). Containers without ranges (namespaces,
 * classes) are searched through. True when something held pc.
 */
static bool scope_chain(Dwarf_Die *parent, Dwarf_Addr pc, Dwarf_Die *chain, size_t *n, size_t cap,
                        int depth)
{
    Dwarf_Die child;
    if (depth > MAX_SCOPE_DEPTH || dwarf_child(parent, &child) != 0)
        return false;
    do {
        int tag = dwarf_tag(&child);
        if (is_scope(tag)) {
            if (dwarf_haspc(&child, pc) <= 0)
                continue;
            if (*n < cap)
                chain[(*n)++] = child;
            scope_chain(&child, pc, chain, n, cap, depth + 1);
            return true;
        }
        if (is_container(tag) && scope_chain(&child, pc, chain, n, cap, depth + 1))
            return true;
    } while (next_sibling(&child));
    return false;
}

#define MAX_FN_RANGES (1u << 22)

/* Adds die's ranges to e->fns (grown to *cap). False: out of memory or
 * past MAX_FN_RANGES (the index stays as it is). */
static bool add_fn_ranges(entry *e, Dwarf_Die *die, size_t *cap)
{
    Dwarf_Addr base, lo, hi;
    ptrdiff_t off = 0;
    while ((off = dwarf_ranges(die, off, &base, &lo, &hi)) > 0) {
        if (hi <= lo)
            continue;
        if (e->n_fns == *cap) {
            size_t nc = *cap ? *cap * 2 : 256;
            cu_range *nv = nc <= MAX_FN_RANGES ? realloc(e->fns, nc * sizeof *nv) : NULL;
            if (!nv)
                return false;
            e->fns = nv;
            *cap = nc;
        }
        e->fns[e->n_fns++] = (cu_range){lo, hi, *die};
    }
    return true;
}

/* The outermost scopes (functions) with code below parent: its scope
 * children, and those inside containers (namespaces, classes). */
static bool index_children(entry *e, Dwarf_Die *parent, size_t *cap, int depth)
{
    Dwarf_Die child;
    if (depth > MAX_SCOPE_DEPTH || dwarf_child(parent, &child) != 0)
        return true;
    do {
        int tag = dwarf_tag(&child);
        if (is_scope(tag)) {
            if (!add_fn_ranges(e, &child, cap))
                return false;
        } else if (is_container(tag) && !index_children(e, &child, cap, depth + 1)) {
            return false;
        }
    } while (next_sibling(&child));
    return true;
}

/* Every CU's functions into e->fns, sorted; once per entry. */
static void build_fn_ranges(entry *e)
{
    e->fns_built = true;
    size_t cap = 0;
    Dwarf_CU *cu = NULL;
    Dwarf_Die cudie;
    Dwarf_Half ver;
    uint8_t ut;
    while (dwarf_get_units(e->dw, cu, &cu, &ver, &ut, &cudie, NULL) == 0)
        if (!index_children(e, &cudie, &cap, 0))
            break;
    if (e->n_fns)
        qsort(e->fns, e->n_fns, sizeof *e->fns, cmp_cu_range);
}

/* The function (outermost scope) holding vaddr from e->fns: the last range
 * with lo <= vaddr that holds it (back over at most 64 overlaps). */
static bool fn_of(entry *e, uint64_t vaddr, Dwarf_Die *fn)
{
    if (!e->fns_built)
        build_fn_ranges(e);
    size_t lo = 0, hi = e->n_fns;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (e->fns[mid].lo <= vaddr)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t i = lo; i-- > 0 && lo - i <= 64;)
        if (vaddr < e->fns[i].hi) {
            *fn = e->fns[i].cu;
            return true;
        }
    return false;
}

/*
 * The frames of vaddr from DWARF into fr[0..cap) (cap >= 1), innermost
 * first; returns how many (0: no DWARF for it, the caller names one frame
 * from the symbol table). As eu-addr2line -i, on the concrete tree of
 * scopes: the function holding vaddr (fn_of), then the inlined subroutines
 * and blocks in it that hold it (scope_chain). Each DW_TAG_inlined_subroutine below the
 * innermost DW_TAG_subprogram names the frame inside it (its abstract
 * origin's name) and adds its caller, whose file and line are the
 * subroutine's DW_AT_call_file and DW_AT_call_line. The innermost frame's
 * file and line are the line table's for vaddr; the outermost frame's name
 * is left NULL (the symbol table's). Past cap frames the outer inlined
 * ones are left out. Strings point into the DWARF data (valid while the
 * entry's libdw handle is open: under the lock).
 */
static size_t dwarf_frames(entry *e, uint64_t vaddr, frame *fr, size_t cap)
{
    if (!e->dw)
        return 0;
    Dwarf_Die cu;
    if (!cu_of(e, vaddr, &cu))
        return 0;
    Dwarf_Attribute at;
    const char *dir = dwarf_formstring(dwarf_attr(&cu, DW_AT_comp_dir, &at));
    if (dir && dir[0] != '/')
        dir = NULL;
    fr[0] = (frame){.dir = dir};
    Dwarf_Line *l = dwarf_getsrc_die(&cu, vaddr);
    int ln = 0;
    const char *f = l ? dwarf_linesrc(l, NULL, NULL) : NULL;
    if (f && dwarf_lineno(l, &ln) == 0) {
        fr[0].file = f;
        fr[0].line = ln;
    }
    Dwarf_Die sc[MAX_SCOPE_DEPTH];
    size_t ns = 0;
    if (fn_of(e, vaddr, &sc[0])) { /* the function, then the scopes in it */
        ns = 1;
        scope_chain(&sc[0], vaddr, sc, &ns, MAX_SCOPE_DEPTH, 0);
    } else { /* not indexed (out of memory): the CU's children */
        scope_chain(&cu, vaddr, sc, &ns, MAX_SCOPE_DEPTH, 0);
    }
    size_t n = 1;
    Dwarf_Files *files = NULL;
    bool files_read = false;
    for (size_t i = ns; i-- > 0 && n < cap;) { /* innermost first */
        int tag = dwarf_tag(&sc[i]);
        if (tag == DW_TAG_subprogram)
            break;
        if (tag != DW_TAG_inlined_subroutine)
            continue;
        const char *nm = die_name(&sc[i]);
        fr[n - 1].name = nm ? nm : "[inlined]";
        frame *c = &fr[n++];
        *c = (frame){.dir = dir};
        if (!files_read) { /* the file table of the CU holding the scopes */
            files_read = true;
            Dwarf_Die scu;
            if (!dwarf_diecu(&sc[i], &scu, NULL, NULL) ||
                dwarf_getsrcfiles(&scu, &files, NULL) != 0)
                files = NULL;
        }
        Dwarf_Word v;
        if (files && dwarf_formudata(dwarf_attr(&sc[i], DW_AT_call_file, &at), &v) == 0)
            c->file = dwarf_filesrc(files, v, NULL, NULL);
        if (dwarf_formudata(dwarf_attr(&sc[i], DW_AT_call_line, &at), &v) == 0 && v <= INT32_MAX)
            c->line = (int)v;
    }
    return n;
}

/* A frame's file as the answer shows it: a relative name (clang writes
 * directories relative to the CU's DW_AT_comp_dir, and libdw leaves them
 * so) made absolute with the comp dir (in a), as addr2line does: the path a
 * debuginfod /source request needs. "": unknown. */
static const char *frame_file(const frame *f, pd_arena *a)
{
    if (!f->file)
        return "";
    if (f->file[0] == '/' || !f->dir)
        return f->file;
    size_t n = strlen(f->dir) + strlen(f->file) + 2;
    char *p = pd_arena_alloc(a, n);
    if (!p)
        return f->file;
    snprintf(p, n, "%s/%s", f->dir, f->file);
    return p;
}

/* A build ID one answer needs (pd_symbolizer_profile). */
typedef struct want {
    char bid[129];    /* lowercase */
    const char *file; /* the mapping's file (the profile's string) */
    bool need;        /* an address of it is not in its results cache: the debug file is */
    bool mine;        /* this answer fetches it */
    int found;        /* the fetch's result */
    char *got;        /* the debuginfod client's copy */
} want;

int pd_symbolizer_profile(pd_symbolizer *s, pd_profile *p, pd_err *err)
{
    /* which locations need a name */
    size_t need = 0;
    for (size_t i = 0; i < p->n_location; i++)
        if (p->location[i].n_line == 0 && p->location[i].mapping_id)
            need++;
    if (!need)
        return 0;
    /* the functions: the profile's, then the new ones (grown on the heap,
       copied into p's arena at the end) */
    size_t n_fn = p->n_function, cap_fn = p->n_function + need;
    pd_pprof_function *fns = malloc(cap_fn * sizeof *fns);
    if (!fns)
        return pd_err_set(err, PD_ENOMEM, "out of memory naming frames");
    if (p->n_function)
        memcpy(fns, p->function, p->n_function * sizeof *fns);
    uint64_t next_id = 0;
    for (size_t i = 0; i < p->n_function; i++)
        if (p->function[i].id > next_id)
            next_id = p->function[i].id;
    const uint64_t first_new_id = next_id; /* new functions' ids are above */
    pd_u64map by_name; /* (name string index << 32 | file string index) -> function index */
    pd_u64map_init(&by_name);
    int rc = 0;
    uint64_t named = 0, unnamed = 0;
    want *ws = calloc(need, sizeof *ws);
    size_t n_ws = 0;
    if (!ws) {
        pd_u64map_release(&by_name);
        free(fns);
        return pd_err_set(err, PD_ENOMEM, "out of memory naming frames");
    }
    pthread_mutex_lock(&s->mu);
    /* (1) the build IDs of this profile; those with an address not in their
       results cache: local lookups, fetches to make (an answer all in the
       caches opens no debug file) */
    for (size_t i = 0; i < p->n_location; i++) {
        pd_pprof_location *l = &p->location[i];
        const pd_pprof_mapping *m =
            l->n_line || !l->mapping_id ? NULL : pd_profile_mapping(p, l->mapping_id);
        const char *bid = m ? pd_profile_str(p, m->build_id) : "";
        if (!m || !pd_elf_build_id_valid(bid) || l->address < m->memory_start)
            continue;
        char low[129];
        snprintf(low, sizeof low, "%s", bid);
        lower(low);
        size_t j = 0;
        while (j < n_ws && strcmp(ws[j].bid, low))
            j++;
        want *w = &ws[j];
        if (j == n_ws) {
            n_ws++;
            memcpy(w->bid, low, sizeof low);
            w->file = pd_profile_str(p, m->filename);
        }
        if (w->need)
            continue;
        pd_symcache *c = get_cache(s, w->bid);
        if (!c || !pd_symcache_get(c, l->address - m->memory_start + m->file_offset))
            w->need = true;
    }
    for (size_t j = 0; j < n_ws; j++)
        if (ws[j].need)
            get_entry(s, ws[j].bid, ws[j].file, true, &ws[j].mine);
    /* (2) fetch without the lock */
    bool any = false;
    for (size_t j = 0; j < n_ws; j++)
        any |= ws[j].mine;
    if (any) {
        pthread_mutex_unlock(&s->mu);
        for (size_t j = 0; j < n_ws; j++)
            if (ws[j].mine)
                ws[j].found = fetch(s, ws[j].bid, &ws[j].got);
        pthread_mutex_lock(&s->mu);
        /* (3) load what came; wake the waiters */
        for (size_t j = 0; j < n_ws; j++)
            if (ws[j].mine) {
                entry *e = find_entry(s, ws[j].bid);
                if (e)
                    fetch_done(s, e, ws[j].found, ws[j].got, ws[j].file);
                free(ws[j].got);
            }
    }
    /* (4) wait for the fetches other threads make of the build IDs needed */
    for (size_t j = 0; j < n_ws; j++) {
        entry *e;
        while ((e = find_entry(s, ws[j].bid)) && e->fetching)
            pthread_cond_wait(&s->fetched, &s->mu);
    }
    free(ws);
    /* (5) name the frames: from the results cache, else from the debug file
       (the answer then kept in the cache) */
    pd_arena scratch; /* files made absolute (frame_file) */
    pd_arena_init_small(&scratch, 4096);
    pd_symcache *cc = NULL; /* the results cache of build ID string cc_bid */
    int64_t cc_bid = -1;
    uint64_t hits = 0, misses = 0;
    for (size_t i = 0; i < p->n_location && rc == 0; i++) {
        pd_pprof_location *l = &p->location[i];
        if (l->n_line || !l->mapping_id)
            continue;
        const pd_pprof_mapping *m = pd_profile_mapping(p, l->mapping_id);
        if (!m || l->address < m->memory_start)
            continue;
        uint64_t off = l->address - m->memory_start + m->file_offset;
        const char *bid = pd_profile_str(p, m->build_id);
        const char *file = pd_profile_str(p, m->filename);
        char name_buf[512];
        pd_symcache_line lbuf[MAX_FRAMES];
        const pd_symcache_line *lines = NULL;
        size_t nfr = 0;
        if (pd_elf_build_id_valid(bid)) {
            char low[129];
            bool no;
            snprintf(low, sizeof low, "%s", bid);
            lower(low);
            if (cc_bid != m->build_id) {
                cc = get_cache(s, low);
                cc_bid = m->build_id;
            }
            const pd_symcache_rec *r = cc ? pd_symcache_get(cc, off) : NULL;
            entry *e = NULL;
            if (r) {
                hits++;
                lines = r->lines;
                nfr = r->n_lines;
            } else {
                misses++;
                e = get_entry(s, low, file, false, &no);
            }
            if (e && e->found) {
                uint64_t va = pd_elf_offset_to_vaddr(&e->info, off);
                const pd_elf_sym *sym = pd_elf_lookup(&e->info, va);
                /* a symbol without a name (a crafted symbol table) names
                   nothing: the frame shows the binary and offset */
                if (sym && sym->name && *sym->name) {
                    frame fr[MAX_FRAMES];
                    nfr = dwarf_frames(e, va, fr, MAX_FRAMES);
                    if (nfr == 0) {
                        fr[0] = (frame){0};
                        nfr = 1;
                    }
                    for (size_t j = 0; j < nfr; j++) {
                        const char *nm = fr[j].name ? fr[j].name : sym->name;
                        lbuf[j] = (pd_symcache_line){.name = nm,
                                                     .system_name = nm,
                                                     .file = frame_file(&fr[j], &scratch),
                                                     .line = fr[j].line};
                    }
                    lines = lbuf;
                    /* kept: named answers only (an unnamed one may be named
                       by debug info that comes later) */
                    if (cc)
                        cache_add(cc, e, off, lines, nfr);
                }
            }
        }
        if (lines) {
            named++;
        } else {
            unnamed++;
            const char *base = strrchr(file, '/');
            base = base ? base + 1 : file;
            snprintf(name_buf, sizeof name_buf, "%s+0x%" PRIx64, *base ? base : "[unknown]", off);
            lbuf[0] = (pd_symcache_line){.name = name_buf, .system_name = name_buf, .file = ""};
            lines = lbuf;
            nfr = 1;
        }
        pd_pprof_line *ls = pd_arena_calloc(&p->arena, nfr, sizeof *ls);
        if (!ls) {
            rc = pd_err_set(err, PD_ENOMEM, "out of memory naming frames");
            break;
        }
        for (size_t j = 0; j < nfr && rc == 0; j++) {
            const char *name = lines[j].name, *src = lines[j].file;
            int64_t ni = pd_profile_intern(p, name, strlen(name));
            int64_t si =
                strcmp(lines[j].system_name, name)
                    ? pd_profile_intern(p, lines[j].system_name, strlen(lines[j].system_name))
                    : ni;
            int64_t fi = *src ? pd_profile_intern(p, src, strlen(src)) : 0;
            if (ni < 0 || fi < 0 || si < 0) {
                rc = pd_err_set(err, PD_ENOMEM, "out of memory naming frames");
                break;
            }
            uint64_t key = (uint64_t)ni << 32 | (uint64_t)fi, idx;
            if (!pd_u64map_get(&by_name, key, &idx)) {
                if (n_fn == cap_fn) {
                    size_t nc = cap_fn * 2;
                    pd_pprof_function *nv = realloc(fns, nc * sizeof *nv);
                    if (!nv) {
                        rc = pd_err_set(err, PD_ENOMEM, "out of memory naming frames");
                        break;
                    }
                    fns = nv;
                    cap_fn = nc;
                }
                idx = n_fn;
                fns[n_fn] = (pd_pprof_function){
                    .id = ++next_id, .name = ni, .system_name = si, .filename = fi};
                n_fn++;
                if (pd_u64map_put(&by_name, key, idx) < 0) {
                    rc = pd_err_set(err, PD_ENOMEM, "out of memory naming frames");
                    break;
                }
            }
            ls[j] = (pd_pprof_line){.function_id = fns[idx].id, .line = lines[j].line};
        }
        if (rc)
            break;
        l->line = ls;
        l->n_line = nfr;
    }
    cache_flush_all(s);
    pthread_mutex_unlock(&s->mu);
    pd_arena_release(&scratch);
    if (hits)
        pd_metrics_add("profd_symbolize_cache_lookups_total", "result=\"hit\"", (double)hits);
    if (misses)
        pd_metrics_add("profd_symbolize_cache_lookups_total", "result=\"miss\"", (double)misses);
    if (named)
        pd_metrics_add("profd_symbolize_frames_total", "result=\"named\"", (double)named);
    if (unnamed)
        pd_metrics_add("profd_symbolize_frames_total", "result=\"unnamed\"", (double)unnamed);
    pd_u64map_release(&by_name);
    pd_pprof_function *kept = pd_arena_calloc(&p->arena, n_fn ? n_fn : 1, sizeof *kept);
    if (kept) {
        memcpy(kept, fns, n_fn * sizeof *kept);
        p->function = kept;
        p->n_function = n_fn;
    } else {
        /* p stays valid: the locations named here lose their lines again */
        for (size_t i = 0; i < p->n_location; i++) {
            pd_pprof_location *l = &p->location[i];
            for (size_t j = 0; j < l->n_line; j++)
                if (l->line[j].function_id > first_new_id) {
                    l->line = NULL;
                    l->n_line = 0;
                    break;
                }
        }
        rc = pd_err_set(err, PD_ENOMEM, "out of memory naming frames");
    }
    free(fns);
    int rc2 = pd_profile_index(p, err);
    return rc ? rc : rc2;
}

int pd_symbolizer_store(pd_symbolizer *s, const char *build_id, const void *data, size_t len,
                        pd_err *err)
{
    if (!pd_elf_build_id_valid(build_id))
        return pd_err_set(err, PD_EINVAL,
                          "bad build ID \"%.140s\": want 2 to 128 hex digits, an even number",
                          build_id);
    if (len > s->max_upload) {
        pd_metrics_add("profd_debuginfo_uploads_total", "result=\"rejected\"", 1);
        return pd_err_set(err, PD_ETOOBIG, "debug file of %zu bytes: at most %zu", len,
                          s->max_upload);
    }
    char bid[129], got[129];
    snprintf(bid, sizeof bid, "%s", build_id);
    lower(bid);
    pd_err e2;
    int rc = pd_elf_build_id_mem(data, len, got, sizeof got, &e2);
    if (rc == 0 && strcmp(got, bid) != 0)
        rc = pd_err_set(&e2, PD_EINVAL, "the file's build ID is %s, not %s", got, bid);
    if (rc < 0) {
        pd_metrics_add("profd_debuginfo_uploads_total", "result=\"rejected\"", 1);
        return pd_err_set(err, PD_EINVAL, "debug file for build ID %s: %s", bid, e2.msg);
    }
    char dir[4400], path[4500], tmp[4600];
    snprintf(dir, sizeof dir, "%s/%s", s->cache_dir, bid);
    if ((rc = mkdir_p(dir)) < 0)
        return pd_err_set(err, rc, "%s: %s", dir, strerror(-rc));
    snprintf(path, sizeof path, "%s/debuginfo", dir);
    snprintf(tmp, sizeof tmp, "%s/debuginfo.tmp.%lx", dir, (unsigned long)pthread_self());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        rc = -errno;
        return pd_err_set(err, rc, "%s: %s", tmp, strerror(-rc));
    }
    const char *d = data;
    size_t left = len;
    while (left) {
        ssize_t w = write(fd, d, left);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            rc = -errno;
            break;
        }
        d += w;
        left -= (size_t)w;
    }
    if (!rc && fsync(fd) < 0)
        rc = -errno;
    close(fd);
    if (!rc && rename(tmp, path) < 0)
        rc = -errno;
    if (rc) {
        unlink(tmp);
        return pd_err_set(err, rc, "%s: %s", path, strerror(-rc));
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    pthread_mutex_lock(&s->mu);
    forget(s, bid);
    pthread_mutex_unlock(&s->mu);
    pd_metrics_add("profd_debuginfo_uploads_total", "result=\"stored\"", 1);
    pd_log_info("debug info uploaded", "build_id=%s bytes=%zu", bid, len);
    return 0;
}
