/*
 * Tests of src/ui/ui.c and the assets cmake/embed.cmake embeds: the page is
 * served at its routes, every asset is byte-identical to its source file,
 * and every /static/ URL the page refers to exists.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ui.h"

static char *read_file(const char *name, size_t *len)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", PD_UI_ASSET_DIR, name);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n == cap) {
            cap = cap ? cap * 2 : 65536;
            buf = realloc(buf, cap + 1);
            assert_non_null(buf);
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        if (r == 0)
            break;
        n += r;
    }
    fclose(f);
    buf[n] = 0;
    *len = n;
    return buf;
}

static void test_routes_give_the_page(void **state)
{
    (void)state;
    const pd_ui_asset *page = pd_ui_find("/static/index.html");
    assert_non_null(page);
    assert_string_equal(page->content_type, "text/html; charset=utf-8");
    const char *routes[] = {"/", "/index.html", "/targets", "/graph", "/status"};
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++)
        assert_ptr_equal(pd_ui_find(routes[i]), page);
}

static void test_unknown_paths(void **state)
{
    (void)state;
    assert_null(pd_ui_find(NULL));
    assert_null(pd_ui_find("/static/nope.js"));
    assert_null(pd_ui_find("/static/"));
    assert_null(pd_ui_find("/static/../ui.c"));
    assert_null(pd_ui_find("/targets/x"));
    assert_null(pd_ui_find(""));
}

static void test_assets_match_sources(void **state)
{
    (void)state;
    const struct {
        const char *file, *type;
    } want[] = {
        {"index.html", "text/html; charset=utf-8"},
        {"app.js", "text/javascript; charset=utf-8"},
        {"style.css", "text/css; charset=utf-8"},
        {"favicon.svg", "image/svg+xml"},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        char url[256];
        snprintf(url, sizeof url, "/static/%s", want[i].file);
        const pd_ui_asset *a = pd_ui_find(url);
        assert_non_null(a);
        assert_string_equal(a->path, url);
        assert_string_equal(a->content_type, want[i].type);
        size_t len;
        char *src = read_file(want[i].file, &len);
        assert_int_equal(a->len, len);
        assert_memory_equal(a->data, src, len);
        free(src);
    }
}

/* Every "/static/NAME" the page and the script refer to is embedded. */
static void test_referenced_assets_exist(void **state)
{
    (void)state;
    const char *files[] = {"index.html", "app.js"};
    int found = 0;
    for (size_t f = 0; f < 2; f++) {
        size_t len;
        char *text = read_file(files[f], &len);
        for (char *p = strstr(text, "/static/"); p; p = strstr(p + 1, "/static/")) {
            size_t n =
                strspn(p, "/abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-");
            char url[256];
            assert_true(n < sizeof url);
            memcpy(url, p, n);
            url[n] = 0;
            if (strcmp(url, "/static/") == 0)
                continue;
            if (!pd_ui_find(url))
                fail_msg("%s refers to %s, which is not embedded", files[f], url);
            found++;
        }
        free(text);
    }
    assert_true(found >= 3); /* style.css, favicon.svg, app.js at least */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_routes_give_the_page),
        cmocka_unit_test(test_unknown_paths),
        cmocka_unit_test(test_assets_match_sources),
        cmocka_unit_test(test_referenced_assets_exist),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
