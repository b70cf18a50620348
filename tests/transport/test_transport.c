/* test_transport.c - the transport conformance suite's driver: one cmocka group
 * per variant of tl_variants.c, with every generic case (tl_cases.c) and the
 * variant's own.
 *
 * HC_TEST_TL=tcp,shm runs only those variants; HC_TEST_CASE=pattern only
 * the cases whose "variant/case" name matches (cmocka's filter, * and ?).
 * Exits 77 (automake's SKIP) when no selected variant can run here.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tl_suite.h"

#define MAX_CASES 64
#define MAX_ENV 16

typedef struct item {
    const hc_tlt_variant_t *v;
    const hc_tlt_case_t    *c;
    const char             *why; /* the variant cannot run here */
    char                    name[64];
} item_t;

typedef struct saved_env {
    char *name, *old; /* old == NULL: was unset */
} saved_env_t;

static void run_item(void **state)
{
    const item_t *it = *state;

    hc_tlt_set_label(it->v->name, it->c->name);
    if (it->why != NULL)
        skip();
    it->c->run(it->v);
}

/* Sets the variant's environment; returns how many were saved for restoring. */
static int env_apply(const char *const *env, saved_env_t *saved)
{
    int n = 0;

    for (; env != NULL && *env != NULL && n < MAX_ENV; env++) {
        const char *eq = strchr(*env, '=');
        const char *old;
        if (eq == NULL)
            continue;
        saved[n].name = strndup(*env, (size_t)(eq - *env));
        old           = getenv(saved[n].name);
        saved[n].old  = old != NULL ? strdup(old) : NULL;
        setenv(saved[n].name, eq + 1, 1);
        n++;
    }
    hc_params_reload(); /* HCOMM_* among them */
    return n;
}

static void env_restore(saved_env_t *saved, int n)
{
    for (int i = 0; i < n; i++) {
        if (saved[i].old != NULL)
            setenv(saved[i].name, saved[i].old, 1);
        else
            unsetenv(saved[i].name);
        free(saved[i].name);
        free(saved[i].old);
    }
    hc_params_reload();
}

static int add_cases(item_t *items, int n, const hc_tlt_variant_t *v, const hc_tlt_case_t *c,
                     const char *why)
{
    for (; c != NULL && c->name != NULL && n < MAX_CASES; c++, n++) {
        items[n].v   = v;
        items[n].c   = c;
        items[n].why = why;
        snprintf(items[n].name, sizeof(items[n].name), "%s/%s", v->name, c->name);
    }
    return n;
}

/* Runs the variant's group; returns cmocka's count of failed cases. */
static int run_variant(const hc_tlt_variant_t *v, int *usable)
{
    static item_t            items[MAX_CASES];
    static struct CMUnitTest tests[MAX_CASES];
    saved_env_t              saved[MAX_ENV];
    int                      nsaved = env_apply(v->env, saved), n, failed;
    const char              *why    = v->unusable != NULL ? v->unusable() : NULL;

    if (why != NULL)
        printf("[%s] every case skipped: %s\n", v->name, why);
    else
        (*usable)++;
    n = add_cases(items, 0, v, hc_tlt_cases, why);
    n = add_cases(items, n, v, v->extra, why);
    for (int i = 0; i < n; i++)
        tests[i] = (struct CMUnitTest){
            .name = items[i].name, .test_func = run_item, .initial_state = &items[i]};
    failed = _cmocka_run_group_tests(v->name, tests, (size_t)n, NULL, NULL);
    env_restore(saved, nsaved);
    return failed;
}

/* Whether name is in the comma list sel (NULL: all). */
static int selected(const char *sel, const char *name)
{
    size_t len = strlen(name);

    for (const char *p = sel; p != NULL; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
        if (strncmp(p, name, len) == 0 && (p[len] == ',' || p[len] == '\0'))
            return 1;
    return sel == NULL;
}

/* Every name in sel must be a variant: a typo must not pass as "nothing failed". */
static int check_selection(const char *sel)
{
    int found = 0, names = 1;

    for (const char *p = sel; *p != '\0'; p++)
        names += *p == ',';
    for (const hc_tlt_variant_t *v = hc_tlt_variants; v->name != NULL; v++)
        found += selected(sel, v->name);
    if (found == names)
        return 0;
    fprintf(stderr, "HC_TEST_TL=%s: names a variant that does not exist; there are:", sel);
    for (const hc_tlt_variant_t *v = hc_tlt_variants; v->name != NULL; v++)
        fprintf(stderr, " %s", v->name);
    fputc('\n', stderr);
    return -1;
}

int main(void)
{
    char *sel    = getenv("HC_TEST_TL") ? strdup(getenv("HC_TEST_TL")) : NULL;
    char *filter = getenv("HC_TEST_CASE") ? strdup(getenv("HC_TEST_CASE")) : NULL;
    int   failed = 0, usable = 0;

    signal(SIGPIPE, SIG_IGN); /* a rank that died must not take the relay with it */
    if (sel != NULL && check_selection(sel) != 0)
        return 1;
    if (filter != NULL)
        cmocka_set_test_filter(filter);
    for (const hc_tlt_variant_t *v = hc_tlt_variants; v->name != NULL; v++)
        if (selected(sel, v->name))
            failed += run_variant(v, &usable);
    free(sel);
    free(filter);
    if (failed > 0)
        return 1;
    return usable > 0 ? 0 : 77;
}
