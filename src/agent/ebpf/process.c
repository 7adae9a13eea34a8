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
 * comm (/proc/PID/comm: the main thread's name), exe, cgroup (the cgroup v2
 * path), container_id (64 hex digits in the cgroup path: docker,
 * containerd, cri-o), systemd_unit (the cgroup's last *.service component);
 * with --config.file's relabel_configs applied over them and Grafana
 * Alloy's discovery.process labels (proc_labels), once per process per
 * drain, when its first entry arrives: a dropped process costs no profile.
 */
#include "agent/ebpf/ebpf_int.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
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
    pd_labels labels; /* after relabeling, without "__" labels and __name__ */
    bool dropped;     /* relabeling dropped it: its samples are not kept */
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
    pd_u64map over;   /* pids left out: past MAX_PROCS in this drain */
    const pd_relabel_rule *rules;
    size_t n_rules;
    pd_ebpf_procs_stats st;
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
    /* only a regular file, opened without blocking: the name in
     * /proc/PID/maps may now be another file (a FIFO would block the open,
     * a device would not be ELF) */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
        f->ok = pd_elf_read_fd(fd, path, true, &f->info, NULL) == 0;
    if (fd >= 0)
        close(fd);
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
    /* anyone may create /tmp/perf-PID.map for their process: only a regular
     * file, opened without blocking (a FIFO there must not stop the agent) */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    struct stat st;
    if (fd < 0)
        return;
    FILE *f = NULL;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || !(f = fdopen(fd, "r"))) {
        close(fd);
        return;
    }
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
    pd_u64map_init(&p->over);
    *out = p;
    return 0;
}

static void proc_release(proc *pr)
{
    pd_labels_release(&pr->labels);
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
    pd_u64map_release(&p->over);
    pd_u64map_init(&p->over);
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

static int proc_labels(pd_ebpf_procs *p, proc *pr);

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
    pd_labels_init(&pr->labels);
    p->st.processes++;
    if (proc_labels(p, pr) < 0) {
        pd_labels_release(&pr->labels);
        return NULL;
    }
    if (pr->dropped) {
        p->st.dropped_relabel++;
        if (pd_u64map_put(&p->by_pid, pid, p->n_procs + 1) < 0) {
            proc_release(pr);
            return NULL;
        }
        p->n_procs++;
        return pr;
    }
    if (pd_profile_builder_new(NULL, &pr->b) < 0 ||
        pd_profile_builder_sample_type(pr->b, "cpu", "nanoseconds", &err) < 0 ||
        pd_profile_builder_sample_type(pr->b, "samples", "count", &err) < 0 ||
        pd_profile_builder_period(pr->b, "cpu", "nanoseconds", p->period_ns, &err) < 0) {
        proc_release(pr);
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
        pd_pprof_mapping pm = {
            .memory_start = m->start, .memory_limit = m->end, .file_offset = m->pgoff};
        pm.has_functions = fi && fi->from_symtab;
        if ((rc = pd_profile_builder_mapping(pr->b, &pm, m->path, fi ? fi->build_id : NULL, &m->id,
                                             &err)) < 0)
            return rc;
    }
    if (fi && !name) {
        const pd_elf_sym *s =
            pd_elf_lookup(fi, pd_elf_offset_to_vaddr(fi, addr - m->start + m->pgoff));
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
    p->st.samples += e->count;
    proc *pr = get_proc(p, e->pid, e->comm);
    if (!pr) {
        uint64_t one;
        p->st.samples_unkept += e->count;
        if (!pd_u64map_get(&p->over, e->pid, &one) && pd_u64map_put(&p->over, e->pid, 1) == 0)
            p->st.dropped_max_procs++;
        return;
    }
    if (pr->dropped)
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

static bool printable(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20)
            return false;
    return true;
}

/* Sets name=value when the value is a valid label value (too long: cut at
 * a UTF-8 boundary; invalid: left out). */
static int put(pd_labels *ls, const char *name, const char *value)
{
    if (!value || !*value)
        return 0;
    char cut[PD_LABEL_MAX_VALUE + 1];
    if (strlen(value) > PD_LABEL_MAX_VALUE) {
        size_t n = PD_LABEL_MAX_VALUE;
        while (n && ((unsigned char)value[n] & 0xc0) == 0x80)
            n--;
        memcpy(cut, value, n);
        cut[n] = 0;
        value = cut;
    }
    pd_err e;
    int rc = pd_labels_set(ls, name, value, &e);
    return rc == PD_ENOMEM ? rc : 0;
}

/* /proc/PID/cmdline's arguments joined by spaces (as gopsutil's Cmdline,
 * Alloy's __meta_process_commandline). */
static void read_cmdline(uint32_t pid, char *out, size_t cap)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%u/cmdline", pid);
    out[0] = 0;
    FILE *f = fopen(path, "re");
    if (!f)
        return;
    size_t n = fread(out, 1, cap - 1, f);
    fclose(f);
    out[n] = 0;
    while (n && !out[n - 1])
        n--;
    for (size_t i = 0; i < n; i++)
        if (!out[i])
            out[i] = ' ';
    out[n] = 0;
}

/* The real uid of /proc/PID/status ("Uid:\treal\teffective..."), or -1. */
static long read_uid(uint32_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%u/status", pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    long uid = -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "Uid:", 4)) {
            uid = strtol(line + 4, NULL, 10);
            break;
        }
    fclose(f);
    return uid;
}

/*
 * The labels of a process before relabeling: the visible ones (service_name,
 * pid, comm, exe, cgroup, container_id, systemd_unit) and the "__" ones of
 * Grafana Alloy's discovery.process (__process_pid__, __meta_process_exe,
 * __meta_process_cwd, __meta_process_commandline, __meta_process_username,
 * __meta_process_uid, __meta_process_cgroup_path: every line of
 * /proc/PID/cgroup joined by "|", __container_id__), plus
 * __meta_process_pid and __meta_process_container_id (the same values under
 * __meta_process_ names). Then relabel_configs; a kept set loses its "__"
 * labels (as Prometheus' targets). 0 or PD_ENOMEM; pr->dropped is set when
 * a rule dropped the process (or a rule failed on it: logged at debug).
 */
static int proc_labels(pd_ebpf_procs *p, proc *pr)
{
    static char exe[PATH_MAX], cwd[PATH_MAX], cg[8192], cgall[8192], cmd[8192];
    char path[64], tmp[128];
    pd_labels *ls = &pr->labels;
    int rc = 0;
    snprintf(path, sizeof path, "/proc/%u/exe", pr->pid);
    ssize_t n = readlink(path, exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = 0;
    char *del = strstr(exe, " (deleted)");
    if (del && !del[10])
        *del = 0;
    snprintf(path, sizeof path, "/proc/%u/cwd", pr->pid);
    n = readlink(path, cwd, sizeof cwd - 1);
    cwd[n > 0 ? n : 0] = 0;
    const char *base = strrchr(exe, '/');
    base = base ? base + 1 : exe;
    char pid[16];
    snprintf(pid, sizeof pid, "%u", pr->pid);
    if ((rc = put(ls, "service_name", *base && printable(base) ? base : pr->comm)) ||
        (rc = put(ls, "pid", pid)) || (rc = put(ls, "comm", pr->comm)) ||
        (rc = put(ls, "exe", exe)) || (rc = put(ls, "__process_pid__", pid)) ||
        (rc = put(ls, "__meta_process_pid", pid)) || (rc = put(ls, "__meta_process_exe", exe)) ||
        (rc = put(ls, "__meta_process_cwd", cwd)))
        return rc;
    if (p->n_rules) { /* costly to read and only for relabeling */
        read_cmdline(pr->pid, cmd, sizeof cmd);
        if ((rc = put(ls, "__meta_process_commandline", cmd)))
            return rc;
        long uid = read_uid(pr->pid);
        if (uid >= 0) {
            snprintf(tmp, sizeof tmp, "%ld", uid);
            if ((rc = put(ls, "__meta_process_uid", tmp)))
                return rc;
            struct passwd pw, *pwp = NULL;
            char pwbuf[4096];
            if (getpwuid_r((uid_t)uid, &pw, pwbuf, sizeof pwbuf, &pwp) == 0 && pwp &&
                (rc = put(ls, "__meta_process_username", pw.pw_name)))
                return rc;
        }
    }
    snprintf(path, sizeof path, "/proc/%u/cgroup", pr->pid);
    FILE *f = fopen(path, "re");
    cg[0] = cgall[0] = 0;
    if (f) {
        char line[4096];
        size_t used = 0;
        while (fgets(line, sizeof line, f)) {
            line[strcspn(line, "\n")] = 0;
            if (!strncmp(line, "0::", 3) && !cg[0])
                snprintf(cg, sizeof cg, "%s", line + 3);
            int w = snprintf(cgall + used, sizeof cgall - used, "%s%s", used ? "|" : "", line);
            if (w < 0 || (size_t)w >= sizeof cgall - used)
                break;
            used += (size_t)w;
        }
        fclose(f);
    }
    if ((rc = put(ls, "__meta_process_cgroup_path", cgall)) || (rc = put(ls, "cgroup", cg)))
        return rc;
    /* container ID: a run of 64 hex digits in the path */
    for (const char *s = cg; *s; s++) {
        size_t k = 0;
        while (isxdigit((unsigned char)s[k]) && !isupper((unsigned char)s[k]))
            k++;
        if (k == 64) {
            char id[65];
            memcpy(id, s, 64);
            id[64] = 0;
            if ((rc = put(ls, "container_id", id)) || (rc = put(ls, "__container_id__", id)) ||
                (rc = put(ls, "__meta_process_container_id", id)))
                return rc;
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
    if (unit && (rc = put(ls, "systemd_unit", unit)))
        return rc;
    if (p->n_rules) {
        bool keep = true;
        pd_err e;
        pd_err_clear(&e);
        rc = pd_relabel_process(p->rules, p->n_rules, ls, &keep, &e);
        if (rc == PD_ENOMEM)
            return rc;
        if (rc) {
            pd_log_debug("relabeling failed, process left out", "pid=%u err=\"%s\"", pr->pid,
                         e.msg);
            keep = false;
        }
        if (!keep) {
            pr->dropped = true;
            return 0;
        }
    }
    /* "__" labels are gone after relabeling (Prometheus' targets) */
    for (size_t i = ls->n; i-- > 0;)
        if (!strncmp(ls->v[i].name, "__", 2) && (rc = pd_labels_set(ls, ls->v[i].name, "", NULL)))
            return rc;
    return 0;
}

/* Bytes of a length-delimited field of len bytes (tag + varint length). */
static size_t field_size(size_t len)
{
    size_t n = 1, v = len;
    do {
        n++;
        v >>= 7;
    } while (v);
    return n + len;
}

typedef struct series_ent {
    Push__V1__RawProfileSeries series;
    Push__V1__RawSample sample, *samplep;
    Types__V1__LabelPair **pairs;
    Types__V1__LabelPair *pair_store;
    pd_buf body;
    size_t packed;
} series_ent;

static int emit(Push__V1__RawProfileSeries **sp, size_t k, pd_ebpf_emit_fn fn, void *ctx)
{
    if (!k)
        return 0;
    Push__V1__PushRequest req = PUSH__V1__PUSH_REQUEST__INIT;
    req.series = sp;
    req.n_series = k;
    size_t len = push__v1__push_request__get_packed_size(&req);
    pd_buf out;
    pd_buf_init(&out, 0);
    int rc = pd_buf_reserve(&out, len);
    if (rc < 0)
        return rc;
    push__v1__push_request__pack(&req, (uint8_t *)out.data);
    out.len = len;
    fn(ctx, &out, k);
    pd_buf_release(&out);
    return 0;
}

int pd_ebpf_procs_encode(pd_ebpf_procs *p, int64_t start_ns, int64_t dur_ns, size_t max_req_bytes,
                         pd_ebpf_emit_fn fn, void *ctx, pd_ebpf_procs_stats *st, pd_err *err)
{
    size_t n = p->n_procs;
    series_ent *ents = calloc(n ? n : 1, sizeof *ents);
    Push__V1__RawProfileSeries **sp = calloc(n ? n : 1, sizeof *sp);
    int rc = 0;
    size_t k = 0;
    if (!ents || !sp) {
        rc = PD_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        proc *pr = &p->procs[i];
        if (pr->dropped)
            continue;
        pd_profile_builder_profile(pr->b)->time_nanos = start_ns;
        pd_profile_builder_profile(pr->b)->duration_nanos = dur_ns;
        pd_profile prof;
        if (pd_profile_builder_finish(pr->b, &prof, err) < 0)
            continue;
        series_ent *se = &ents[k];
        pd_buf_init(&se->body, 0);
        rc = pd_profile_encode(&prof, true, &se->body);
        pd_profile_release(&prof);
        if (rc < 0) {
            pd_buf_release(&se->body);
            goto out;
        }
        size_t nl = pr->labels.n + 1;
        se->pairs = calloc(nl, sizeof *se->pairs);
        se->pair_store = calloc(nl, sizeof *se->pair_store);
        Types__V1__LabelPair **pp = se->pairs;
        k++; /* se's memory is released at out from here on */
        if (!se->pairs || !se->pair_store) {
            rc = PD_ENOMEM;
            goto out;
        }
        types__v1__label_pair__init(&se->pair_store[0]);
        se->pair_store[0].name = "__name__";
        se->pair_store[0].value = "process_cpu";
        pp[0] = &se->pair_store[0];
        for (size_t j = 0; j < pr->labels.n; j++) {
            types__v1__label_pair__init(&se->pair_store[j + 1]);
            se->pair_store[j + 1].name = pr->labels.v[j].name;
            se->pair_store[j + 1].value = pr->labels.v[j].value;
            pp[j + 1] = &se->pair_store[j + 1];
        }
        push__v1__raw_profile_series__init(&se->series);
        push__v1__raw_sample__init(&se->sample);
        se->sample.raw_profile.data = (uint8_t *)se->body.data;
        se->sample.raw_profile.len = se->body.len;
        se->samplep = &se->sample;
        se->series.samples = &se->samplep;
        se->series.n_samples = 1;
        se->series.labels = pp;
        se->series.n_labels = nl;
        se->packed = field_size(push__v1__raw_profile_series__get_packed_size(&se->series));
    }
    /* requests of at most max_req_bytes each, processes in order */
    size_t first = 0, used = 0, m = 0;
    for (size_t i = 0; i < k; i++) {
        if (ents[i].packed > max_req_bytes) {
            st->dropped_too_large++;
            continue;
        }
        if (used + ents[i].packed > max_req_bytes) {
            if ((rc = emit(sp + first, m - first, fn, ctx)) < 0)
                goto out;
            st->requests++;
            first = m;
            used = 0;
        }
        sp[m++] = &ents[i].series;
        used += ents[i].packed;
        st->profiles++;
    }
    if (m > first) {
        if ((rc = emit(sp + first, m - first, fn, ctx)) < 0)
            goto out;
        st->requests++;
    }
out:
    if (ents)
        for (size_t i = 0; i < k; i++) {
            pd_buf_release(&ents[i].body);
            free(ents[i].pairs);
            free(ents[i].pair_store);
        }
    free(ents);
    free(sp);
    st->processes += p->st.processes;
    st->dropped_relabel += p->st.dropped_relabel;
    st->samples += p->st.samples;
    st->samples_unkept += p->st.samples_unkept;
    st->dropped_max_procs += p->st.dropped_max_procs;
    memset(&p->st, 0, sizeof p->st);
    clear_procs(p);
    if (rc == PD_ENOMEM)
        pd_err_set(err, rc, "out of memory");
    return rc;
}

void pd_ebpf_procs_set_relabel(pd_ebpf_procs *p, const pd_relabel_rule *rules, size_t n)
{
    p->rules = rules;
    p->n_rules = n;
}
