/*
 * agent/ebpf/process.c — drained samples to one pprof `process_cpu` profile
 * per process, and those to a push.v1.PushRequest.
 *
 * Per process (first entry of a drain): its labels (below) and its
 * executable mappings from /proc/PID/maps. Per user frame: the mapping
 * holding it (file, build ID and PT_LOAD segments of the file read through
 * /proc/PID/root so that a container's files are the ones read; cached per
 * (device, inode) for the agent's life, at most FILE_CACHE entries), its
 * function from the file's .symtab/.dynsym when it has one; a frame in an
 * anonymous executable mapping is looked up in /tmp/perf-PID.map (JIT
 * compilers' symbol files: Node --perf-basic-prof, Java perf-map-agent);
 * others stay bare addresses in their mapping, for profd to name by build
 * ID (symbolize/). Kernel frames are named from /proc/kallsyms (read once;
 * all addresses 0 under kptr_restrict: then "[kernel] 0x...").
 *
 * Addresses: a frame other than the sampled instruction is a return
 * address; its location holds address - 1 (inside the call instruction, as
 * profile.proto allows), so that every symbolizer names the caller.
 *
 * Labels: __name__=process_cpu, service_name = the executable's base name
 * (the comm for kernel threads and processes gone before the drain), pid,
 * comm (/proc/PID/comm: the main thread's name), exe, cgroup (the cgroup v2 path), container_id (64 hex digits in
 * the cgroup path: docker, containerd, cri-o), systemd_unit (the cgroup's
 * last *.service component).
 */
#include "agent/ebpf/ebpf_int.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/u64map.h"
#include "pprof/pprof.h"
#include "push/v1/push.pb-c.h"
#include "symbolize/elf.h"

#define FILE_CACHE 1024
#define MAX_MAPS 8192
#define MAX_PROCS 4096
#define MAX_PERF_MAP_LINES 2000000

typedef struct kallsym {
    uint64_t addr;
    char *name;
} kallsym;

typedef struct file_ent {
    uint64_t dev, ino;
    pd_elf_info info;
    bool ok;
} file_ent;

typedef struct vmap {
    uint64_t start, end, pgoff, dev, ino;
    char path[PATH_MAX];
    bool anon_exec; /* no file: JIT code */
    file_ent *file;
    uint64_t id; /* builder mapping id, 0 until used */
} vmap;

typedef struct perf_sym {
    uint64_t lo, hi;
    char *name;
} perf_sym;

typedef struct proc {
    uint32_t pid;
    char comm[17];
    pd_profile_builder *b;
    vmap *maps;
    size_t n_maps;
    bool perf_read;
    perf_sym *perf;
    size_t n_perf;
    uint64_t samples;
} proc;

struct pd_ebpf_procs {
    int64_t period_ns;
    kallsym *ksyms;
    size_t n_ksyms;
    bool ksyms_read;
    file_ent *files[FILE_CACHE];
    size_t n_files;
    proc *procs;
    size_t n_procs;
    pd_u64map by_pid; /* pid -> index + 1 */
};

/* ---- kallsyms ---- */

static int ksym_cmp(const void *a, const void *b)
{
    const kallsym *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static void read_kallsyms(pd_ebpf_procs *p)
{
    p->ksyms_read = true;
    FILE *f = fopen("/proc/kallsyms", "re");
    if (!f)
        return;
    char line[512];
    size_t cap = 0;
    while (fgets(line, sizeof line, f)) {
        char *end;
        uint64_t a = strtoull(line, &end, 16);
        if (end == line || end[0] != ' ' || !end[1])
            continue;
        char t = end[1];
        if (t != 't' && t != 'T' && t != 'w' && t != 'W')
            continue;
        if (!a)
            continue;
        char *name = end + 3;
        name[strcspn(name, " \t\n")] = 0;
        if (p->n_ksyms == cap) {
            size_t nc = cap ? cap * 2 : 65536;
            kallsym *k = realloc(p->ksyms, nc * sizeof *k);
            if (!k)
                break;
            p->ksyms = k;
            cap = nc;
        }
        char *copy = strdup(name);
        if (!copy)
            break;
        p->ksyms[p->n_ksyms++] = (kallsym){a, copy};
    }
    fclose(f);
    if (p->n_ksyms) /* none: p->ksyms is NULL */
    qsort(p->ksyms, p->n_ksyms, sizeof *p->ksyms, ksym_cmp);
}

static const char *ksym_name(pd_ebpf_procs *p, uint64_t addr)
{
    if (!p->ksyms_read)
        read_kallsyms(p);
    size_t lo = 0, hi = p->n_ksyms;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (p->ksyms[mid].addr <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo ? p->ksyms[lo - 1].name : NULL;
}

/* ---- files ---- */

static file_ent *file_get(pd_ebpf_procs *p, uint32_t pid, const vmap *m)
{
    for (size_t i = 0; i < p->n_files; i++)
        if (p->files[i]->dev == m->dev && p->files[i]->ino == m->ino)
            return p->files[i];
    if (p->n_files == FILE_CACHE) { /* full: start again (files change rarely) */
        for (size_t i = 0; i < p->n_files; i++) {
            pd_elf_info_release(&p->files[i]->info);
            free(p->files[i]);
        }
        p->n_files = 0;
    }
    file_ent *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    f->dev = m->dev;
    f->ino = m->ino;
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "/proc/%u/root%s", pid, m->path);
    f->ok = pd_elf_read(path, true, &f->info, NULL) == 0;
    p->files[p->n_files++] = f;
    return f;
}

/* ---- processes ---- */

static int vmap_cmp(const void *a, const void *b)
{
    const vmap *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

static void read_maps(proc *pr)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%u/maps", pr->pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return;
    char line[PATH_MAX + 256];
    size_t cap = 0;
    while (fgets(line, sizeof line, f) && pr->n_maps < MAX_MAPS) {
        uint64_t start, end, off, ino;
        unsigned maj, min;
        char perms[8];
        int pos = 0;
        if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %x:%x %" SCNu64 " %n", &start,
                   &end, perms, &off, &maj, &min, &ino, &pos) < 7)
            continue;
        if (perms[2] != 'x')
            continue;
        char *name = line + pos;
        name[strcspn(name, "\n")] = 0;
        if (pr->n_maps == cap) {
            size_t nc = cap ? cap * 2 : 64;
            vmap *v = realloc(pr->maps, nc * sizeof *v);
            if (!v)
                break;
            pr->maps = v;
            cap = nc;
        }
        vmap *v = &pr->maps[pr->n_maps++];
        memset(v, 0, sizeof *v);
        v->start = start;
        v->end = end;
        v->pgoff = off;
        v->dev = ((uint64_t)maj << 32) | min;
        v->ino = ino;
        if (name[0] == '/' && ino) {
            snprintf(v->path, sizeof v->path, "%s", name);
            char *del = strstr(v->path, " (deleted)");
            if (del && !del[10])
                *del = 0;
        } else {
            v->anon_exec = name[0] != '[' || !strncmp(name, "[anon", 5);
            snprintf(v->path, sizeof v->path, "%s", name[0] ? name : "[anon]");
        }
    }
    fclose(f);
    if (pr->n_maps) /* none: pr->maps is NULL */
    qsort(pr->maps, pr->n_maps, sizeof *pr->maps, vmap_cmp);
}

static vmap *find_map(proc *pr, uint64_t addr)
{
    size_t lo = 0, hi = pr->n_maps;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (pr->maps[mid].start <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (!lo)
        return NULL;
    vmap *m = &pr->maps[lo - 1];
    return addr < m->end ? m : NULL;
}

static int perf_cmp(const void *a, const void *b)
{
    const perf_sym *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* /tmp/perf-PID.map: "START SIZE NAME" per line, hex without 0x (or with) */
static void read_perf_map(proc *pr)
{
    pr->perf_read = true;
    char path[96];
    snprintf(path, sizeof path, "/proc/%u/root/tmp/perf-%u.map", pr->pid, pr->pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return;
    char line[4096];
    size_t cap = 0;
    while (fgets(line, sizeof line, f) && pr->n_perf < MAX_PERF_MAP_LINES) {
        char *e1, *e2;
        uint64_t lo = strtoull(line, &e1, 16);
        if (e1 == line || *e1 != ' ')
            continue;
        uint64_t sz = strtoull(e1 + 1, &e2, 16);
        if (e2 == e1 + 1 || *e2 != ' ')
            continue;
        char *name = e2 + 1;
        name[strcspn(name, "\n")] = 0;
        if (pr->n_perf == cap) {
            size_t nc = cap ? cap * 2 : 1024;
            perf_sym *ps = realloc(pr->perf, nc * sizeof *ps);
            if (!ps)
                break;
            pr->perf = ps;
            cap = nc;
        }
        char *copy = strdup(name);
        if (!copy)
            break;
        pr->perf[pr->n_perf++] = (perf_sym){lo, lo + sz, copy};
    }
    fclose(f);
    if (pr->n_perf) /* none: pr->perf is NULL */
    qsort(pr->perf, pr->n_perf, sizeof *pr->perf, perf_cmp);
}

static const char *perf_name(proc *pr, uint64_t addr)
{
    if (!pr->perf_read)
        read_perf_map(pr);
    const char *best = NULL;
    size_t lo = 0, hi = pr->n_perf;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (pr->perf[mid].lo <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    /* later lines may redefine (V8 moves code): the last that holds addr */
    for (size_t i = lo; i > 0 && lo - i < 8; i--)
        if (addr < pr->perf[i - 1].hi) {
            best = pr->perf[i - 1].name;
            break;
        }
    return best;
}

int pd_ebpf_procs_new(int64_t period_ns, pd_ebpf_procs **out)
{
    pd_ebpf_procs *p = calloc(1, sizeof *p);
    if (!p)
        return PD_ENOMEM;
    p->period_ns = period_ns;
    pd_u64map_init(&p->by_pid);
    *out = p;
    return 0;
}

static void proc_release(proc *pr)
{
    pd_profile_builder_free(pr->b);
    free(pr->maps);
    for (size_t i = 0; i < pr->n_perf; i++)
        free(pr->perf[i].name);
    free(pr->perf);
}

static void clear_procs(pd_ebpf_procs *p)
{
    for (size_t i = 0; i < p->n_procs; i++)
        proc_release(&p->procs[i]);
    free(p->procs);
    p->procs = NULL;
    p->n_procs = 0;
    pd_u64map_release(&p->by_pid);
    pd_u64map_init(&p->by_pid);
}

void pd_ebpf_procs_free(pd_ebpf_procs *p)
{
    if (!p)
        return;
    clear_procs(p);
    for (size_t i = 0; i < p->n_files; i++) {
        pd_elf_info_release(&p->files[i]->info);
        free(p->files[i]);
    }
    for (size_t i = 0; i < p->n_ksyms; i++)
        free(p->ksyms[i].name);
    free(p->ksyms);
    free(p);
}

static proc *get_proc(pd_ebpf_procs *p, uint32_t pid, const char *comm)
{
    uint64_t idx;
    if (pd_u64map_get(&p->by_pid, pid, &idx))
        return &p->procs[idx - 1];
    if (p->n_procs >= MAX_PROCS)
        return NULL;
    proc *np = realloc(p->procs, (p->n_procs + 1) * sizeof *np);
    if (!np)
        return NULL;
    p->procs = np;
    proc *pr = &p->procs[p->n_procs];
    memset(pr, 0, sizeof *pr);
    pr->pid = pid;
    /* the process's (main thread's) name; the sampled thread's when gone */
    char cpath[64], cbuf[32] = "";
    snprintf(cpath, sizeof cpath, "/proc/%u/comm", pid);
    FILE *cf = fopen(cpath, "re");
    if (cf) {
        if (!fgets(cbuf, sizeof cbuf, cf))
            cbuf[0] = 0;
        fclose(cf);
        cbuf[strcspn(cbuf, "\n")] = 0;
    }
    snprintf(pr->comm, sizeof pr->comm, "%.16s", cbuf[0] ? cbuf : comm);
    pd_err err;
    if (pd_profile_builder_new(NULL, &pr->b) < 0 ||
        pd_profile_builder_sample_type(pr->b, "cpu", "nanoseconds", &err) < 0 ||
        pd_profile_builder_sample_type(pr->b, "samples", "count", &err) < 0 ||
        pd_profile_builder_period(pr->b, "cpu", "nanoseconds", p->period_ns, &err) < 0) {
        pd_profile_builder_free(pr->b);
        return NULL;
    }
    read_maps(pr);
    if (pd_u64map_put(&p->by_pid, pid, p->n_procs + 1) < 0) {
        proc_release(pr);
        return NULL;
    }
    p->n_procs++;
    return pr;
}

/* A location of a function by name with no mapping (kernel, lost stacks). */
static int named_loc(pd_profile_builder *b, const char *name, uint64_t addr, uint64_t *id)
{
    uint64_t fid;
    pd_err err;
    int rc = pd_profile_builder_function(b, name, name, NULL, 0, &fid, &err);
    if (rc < 0)
        return rc;
    pd_pprof_line ln = {.function_id = fid};
    return pd_profile_builder_location(b, 0, addr, &ln, 1, id, &err);
}

static int user_loc(pd_ebpf_procs *p, proc *pr, uint64_t addr, uint64_t *id)
{
    pd_err err;
    int rc;
    vmap *m = find_map(pr, addr);
    const char *name = NULL;
    if (!m || m->anon_exec)
        name = perf_name(pr, addr);
    if (!m) {
        if (name)
            return named_loc(pr->b, name, addr, id);
        return pd_profile_builder_location(pr->b, 0, addr, NULL, 0, id, &err);
    }
    if (!m->anon_exec && !m->file)
        m->file = file_get(p, pr->pid, m);
    const pd_elf_info *fi = m->file && m->file->ok ? &m->file->info : NULL;
    if (!m->id) {
        pd_pprof_mapping pm = {.memory_start = m->start,
                               .memory_limit = m->end,
                               .file_offset = m->pgoff};
        pm.has_functions = fi && fi->from_symtab;
        if ((rc = pd_profile_builder_mapping(pr->b, &pm, m->path, fi ? fi->build_id : NULL, &m->id,
                                             &err)) < 0)
            return rc;
    }
    if (fi && !name) {
        const pd_elf_sym *s = pd_elf_lookup(fi, pd_elf_offset_to_vaddr(fi, addr - m->start + m->pgoff));
        if (s)
            name = s->name;
    }
    if (name) {
        uint64_t fid;
        if ((rc = pd_profile_builder_function(pr->b, name, name, NULL, 0, &fid, &err)) < 0)
            return rc;
        pd_pprof_line ln = {.function_id = fid};
        return pd_profile_builder_location(pr->b, m->id, addr, &ln, 1, id, &err);
    }
    return pd_profile_builder_location(pr->b, m->id, addr, NULL, 0, id, &err);
}

void pd_ebpf_procs_add(void *ctx, const pd_ebpf_entry *e)
{
    pd_ebpf_procs *p = ctx;
    proc *pr = get_proc(p, e->pid, e->comm);
    if (!pr)
        return;
    uint64_t locs[2 * PD_EBPF_MAX_DEPTH + 2];
    size_t n = 0;
    char buf[64];
    for (size_t i = 0; i < e->n_kern; i++) {
        uint64_t a = i ? e->kern[i] - 1 : e->kern[i];
        const char *name = ksym_name(p, a);
        if (!name) {
            snprintf(buf, sizeof buf, "[kernel] 0x%" PRIx64, a);
            name = buf;
        }
        if (named_loc(pr->b, name, a, &locs[n]) == 0)
            n++;
    }
    if (e->kern_lost && named_loc(pr->b, "[kernel stack lost]", 0, &locs[n]) == 0)
        n++;
    for (size_t i = 0; i < e->n_user; i++) {
        uint64_t a = (i || e->n_kern) ? e->user[i] - 1 : e->user[i];
        if (user_loc(p, pr, a, &locs[n]) == 0)
            n++;
    }
    if (e->user_lost && named_loc(pr->b, "[user stack lost]", 0, &locs[n]) == 0)
        n++;
    if (!n && named_loc(pr->b, "[no stack]", 0, &locs[n]) == 0)
        n++;
    int64_t v[2] = {(int64_t)e->count * p->period_ns, (int64_t)e->count};
    pd_err err;
    if (pd_profile_builder_sample(pr->b, locs, n, v, NULL, 0, &err) == 0)
        pr->samples += e->count;
}

/* ---- labels ---- */

typedef struct lbl {
    Types__V1__LabelPair *pairs[16];
    Types__V1__LabelPair store[16];
    char *owned[16];
    size_t n, n_owned;
} lbl;

static void lbl_add(lbl *l, const char *name, const char *value, bool copy)
{
    if (l->n == 16 || !value || !*value)
        return;
    Types__V1__LabelPair *lp = &l->store[l->n];
    types__v1__label_pair__init(lp);
    lp->name = (char *)name;
    if (copy) {
        char *c = strdup(value);
        if (!c)
            return;
        l->owned[l->n_owned++] = c;
        lp->value = c;
    } else {
        lp->value = (char *)value;
    }
    l->pairs[l->n++] = lp;
}

static void lbl_release(lbl *l)
{
    for (size_t i = 0; i < l->n_owned; i++)
        free(l->owned[i]);
}

static bool utf8ish(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20)
            return false;
    return true;
}

static void proc_labels(const proc *pr, lbl *l)
{
    char path[64], exe[PATH_MAX], cg[4096], tmp[128];
    lbl_add(l, "__name__", "process_cpu", false);
    snprintf(path, sizeof path, "/proc/%u/exe", pr->pid);
    ssize_t n = readlink(path, exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = 0;
    char *del = strstr(exe, " (deleted)");
    if (del && !del[10])
        *del = 0;
    const char *base = strrchr(exe, '/');
    base = base ? base + 1 : exe;
    lbl_add(l, "service_name", *base && utf8ish(base) ? base : pr->comm, true);
    snprintf(tmp, sizeof tmp, "%u", pr->pid);
    lbl_add(l, "pid", tmp, true);
    if (utf8ish(pr->comm))
        lbl_add(l, "comm", pr->comm, true);
    if (utf8ish(exe))
        lbl_add(l, "exe", exe, true);
    snprintf(path, sizeof path, "/proc/%u/cgroup", pr->pid);
    FILE *f = fopen(path, "re");
    cg[0] = 0;
    if (f) {
        char line[4096];
        while (fgets(line, sizeof line, f)) {
            if (!strncmp(line, "0::", 3)) {
                line[strcspn(line, "\n")] = 0;
                snprintf(cg, sizeof cg, "%s", line + 3);
                break;
            }
        }
        fclose(f);
    }
    if (!cg[0] || !utf8ish(cg))
        return;
    lbl_add(l, "cgroup", cg, true);
    /* container ID: a run of 64 hex digits in the path */
    for (const char *s = cg; *s; s++) {
        size_t k = 0;
        while (isxdigit((unsigned char)s[k]) && !isupper((unsigned char)s[k]))
            k++;
        if (k == 64) {
            char id[65];
            memcpy(id, s, 64);
            id[64] = 0;
            lbl_add(l, "container_id", id, true);
            break;
        }
        s += k ? k - 1 : 0;
    }
    /* systemd unit: the last component ending in .service */
    char *unit = NULL;
    for (char *c = strtok(cg, "/"); c; c = strtok(NULL, "/")) {
        size_t len = strlen(c);
        if (len > 8 && !strcmp(c + len - 8, ".service"))
            unit = c;
    }
    if (unit)
        lbl_add(l, "systemd_unit", unit, true);
}

int pd_ebpf_procs_encode(pd_ebpf_procs *p, int64_t start_ns, int64_t dur_ns, pd_buf *out,
                         size_t *n_series, pd_err *err)
{
    *n_series = 0;
    size_t n = p->n_procs;
    Push__V1__RawProfileSeries *series = calloc(n ? n : 1, sizeof *series);
    Push__V1__RawProfileSeries **sp = calloc(n ? n : 1, sizeof *sp);
    Push__V1__RawSample *samples = calloc(n ? n : 1, sizeof *samples);
    Push__V1__RawSample **smp = calloc(n ? n : 1, sizeof *smp);
    lbl *labels = calloc(n ? n : 1, sizeof *labels);
    pd_buf *bodies = calloc(n ? n : 1, sizeof *bodies);
    int rc = 0;
    size_t k = 0;
    if (!series || !sp || !samples || !smp || !labels || !bodies) {
        rc = PD_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        proc *pr = &p->procs[i];
        pd_profile_builder_profile(pr->b)->time_nanos = start_ns;
        pd_profile_builder_profile(pr->b)->duration_nanos = dur_ns;
        pd_profile prof;
        if (pd_profile_builder_finish(pr->b, &prof, err) < 0)
            continue;
        pd_buf_init(&bodies[k], 0);
        rc = pd_profile_encode(&prof, true, &bodies[k]);
        pd_profile_release(&prof);
        if (rc < 0) {
            pd_buf_release(&bodies[k]);
            goto out;
        }
        proc_labels(pr, &labels[k]);
        push__v1__raw_profile_series__init(&series[k]);
        push__v1__raw_sample__init(&samples[k]);
        samples[k].raw_profile.data = (uint8_t *)bodies[k].data;
        samples[k].raw_profile.len = bodies[k].len;
        smp[k] = &samples[k];
        series[k].samples = &smp[k];
        series[k].n_samples = 1;
        series[k].labels = labels[k].pairs;
        series[k].n_labels = labels[k].n;
        sp[k] = &series[k];
        k++;
    }
    Push__V1__PushRequest req = PUSH__V1__PUSH_REQUEST__INIT;
    req.series = sp;
    req.n_series = k;
    size_t len = push__v1__push_request__get_packed_size(&req);
    if ((rc = pd_buf_reserve(out, len)) < 0)
        goto out;
    push__v1__push_request__pack(&req, (uint8_t *)out->data + out->len);
    out->len += len;
    *n_series = k;
out:
    if (bodies)
        for (size_t i = 0; i < k; i++)
            pd_buf_release(&bodies[i]);
    if (labels)
        for (size_t i = 0; i < k; i++)
            lbl_release(&labels[i]);
    free(series);
    free(sp);
    free(samples);
    free(smp);
    free(labels);
    free(bodies);
    clear_procs(p);
    return rc;
}
