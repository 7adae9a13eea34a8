/*
 * tests/unit/scrape/store_fixture.h — the embedded store the scrape
 * manager's tests store into (test_manager.c, test_store.c): opened in a
 * new directory under /tmp (no fsync), closed and removed after. Include
 * after <ftw.h>, <stdio.h>, <stdlib.h> and storage/storage.h.
 */
#ifndef PD_TESTS_UNIT_SCRAPE_STORE_FIXTURE_H
#define PD_TESTS_UNIT_SCRAPE_STORE_FIXTURE_H

static int store_fixture_rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

/* Opens an embedded store in a directory made from the mkdtemp template
 * dir (rewritten in place) into *st; 0, or -1 with the error on stderr. */
static int store_fixture_open(char *dir, pd_storage **st)
{
    if (!mkdtemp(dir))
        return -1;
    pd_storage_options o = pd_storage_options_default();
    o.path = dir;
    o.fsync = PD_FSYNC_NEVER;
    pd_err e;
    pd_err_clear(&e);
    if (pd_storage_open(&o, st, &e)) {
        fprintf(stderr, "storage open: %s\n", e.msg);
        return -1;
    }
    return 0;
}

/* Closes st and removes its directory dir. */
static void store_fixture_close(pd_storage *st, const char *dir)
{
    pd_storage_close(st);
    nftw(dir, store_fixture_rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

#endif
