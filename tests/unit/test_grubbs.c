/* test_grubbs.c - the t quantile against closed forms and independently
 * computed values, Grubbs critical values, and the generalized ESD on data
 * with known outliers, clean data (false-positive rate near alpha), ties,
 * too few values, non-finite values and one-sided tests.
 *
 * The reference numbers were computed with mpmath 1.2.1 at 40 digits: the t
 * quantile by bisection on betainc (checked against quad of the density), the
 * critical values from those quantiles, the ESD statistics with Python's
 * exact-fraction statistics module. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "base/grubbs.h"

static void check_rel(double got, double want, double tol, const char *what)
{
    double rel = fabs(got - want) / fabs(want);

    if (!(rel <= tol))
        fail_msg("%s: got %.17g want %.17g (rel %.3g > %.3g)", what, got, want, rel, tol);
}

static void test_t_quantile_table(void **state)
{
    static const struct {
        double p, dof, t;
    } ref[] = {
        {0.975, 1, 12.706204736174693},        {0.975, 10, 2.2281388519862742},
        {0.95, 5, 2.0150483733330235},         {0.999, 30, 3.3851848668293048},
        {0.99, 2.5, 5.3531111730308723},       {0.975, 10000, 1.9602012398906259},
        {0.975, 1e6, 1.9599663568141067},      {1 - 1e-9, 3, 1033.1096842432755},
        {1 - 1e-9, 10000, 6.0033554525536179}, {0.5 + 1e-6, 7, 2.5974602757236802e-6},
    };
    char what[64];

    (void)state;
    for (size_t i = 0; i < sizeof(ref) / sizeof(ref[0]); i++) {
        snprintf(what, sizeof(what), "t(%g, %g)", ref[i].p, ref[i].dof);
        check_rel(hc_student_t_quantile(ref[i].p, ref[i].dof), ref[i].t, 1e-9, what);
        check_rel(hc_student_t_quantile(1 - ref[i].p, ref[i].dof), -ref[i].t, 1e-9, what);
    }
    /* the normal quantile in the limit */
    check_rel(hc_student_t_quantile(0.975, 1e12), 1.9599639845400539, 1e-9, "t(0.975, 1e12)");
}

/* dof 1 (Cauchy) and 2 have closed forms, at p up to 1 - 1e-9; written in
 * q = 1 - p, as tan(pi (p - 1/2)) near pi/2 would lose the digits checked. */
static void test_t_quantile_closed_forms(void **state)
{
    (void)state;
    for (int i = 0; i <= 40; i++) {
        double p = 1 - 0.5 * pow(1e-9 / 0.5, i / 40.0), q = 1 - p; /* q exact, 0.5 to 1e-9 */
        double cauchy = 1 / tan(M_PI * q), two = (1 - 2 * q) / sqrt(2 * p * q);

        if (q == 0.5) {
            assert_true(hc_student_t_quantile(p, 1) == 0.0);
            continue;
        }
        check_rel(hc_student_t_quantile(p, 1), cauchy, 1e-9, "t(p, 1)");
        check_rel(hc_student_t_quantile(p, 2), two, 1e-9, "t(p, 2)");
    }
}

static void test_t_quantile_edges(void **state)
{
    (void)state;
    assert_true(hc_student_t_quantile(0.0, 5) == -INFINITY);
    assert_true(hc_student_t_quantile(1.0, 5) == INFINITY);
    assert_true(isnan(hc_student_t_quantile(0.9, 0)));
    assert_true(isnan(hc_student_t_quantile(0.9, -1)));
    assert_true(isnan(hc_student_t_quantile(NAN, 5)));
    assert_true(isnan(hc_student_t_quantile(0.9, NAN)));
}

static void test_grubbs_critical_table(void **state)
{
    (void)state;
    check_rel(hc_grubbs_critical(10, 0.05, 0), 2.2899540844796004, 1e-9, "G(10, two)");
    check_rel(hc_grubbs_critical(20, 0.05, 0), 2.7082456458057543, 1e-9, "G(20, two)");
    check_rel(hc_grubbs_critical(10, 0.05, 1), 2.1760683941942214, 1e-9, "G(10, one)");
    check_rel(hc_grubbs_critical(20, 0.05, 1), 2.5565813344927571, 1e-9, "G(20, one)");
    check_rel(hc_grubbs_critical(10, 0.01, 0), 2.4820832497153322, 1e-9, "G(10, .01)");
    check_rel(hc_grubbs_critical(3, 0.05, 0), 1.1543048513440384, 1e-9, "G(3, two)");
    check_rel(hc_grubbs_critical(100, 0.05, 0), 3.3840829011548909, 1e-9, "G(100, two)");
    check_rel(hc_grubbs_critical(1000, 0.05, 0), 4.0399781637615097, 1e-9, "G(1000, two)");
    assert_true(hc_grubbs_critical(2, 0.05, 0) == INFINITY);
    assert_true(hc_grubbs_critical(0, 0.05, 1) == INFINITY);
    assert_true(isnan(hc_grubbs_critical(10, 0.0, 0)));
    assert_true(isnan(hc_grubbs_critical(10, 1.0, 0)));
    /* below the largest G that n values allow, (n-1)/sqrt(n), and rising with n */
    double prev = 0;
    for (int n = 3; n <= 4096; n = n * 3 / 2 + 1) {
        double g = hc_grubbs_critical(n, 0.05, 0);

        assert_true(g > prev && g < (n - 1) / sqrt(n));
        prev = g;
    }
}

static void test_single_outlier(void **state)
{
    const double x[] = {9.8, 10.1, 10.0, 9.9, 10.2, 10.0, 9.7, 10.3, 10.1, 25.0};
    int          idx[3];
    double       score[3];

    (void)state;
    assert_int_equal(hc_grubbs_outliers(x, 10, 0.05, 3, 0, idx, score), 1);
    assert_int_equal(idx[0], 9);
    assert_true(score[0] > 1.0);
    assert_int_equal(hc_grubbs_outliers(x, 10, 0.05, 3, 1, idx, NULL), 1);
    assert_int_equal(idx[0], 9);
}

/* Two equal outliers: together they inflate the sd so that the first step
 * fails (plain Grubbs stops there); the second passes, so ESD flags both. */
static void test_masking(void **state)
{
    const double x[] = {0.0, 1.0, -1.0, 0.5, -0.5, 0.2, -0.2, 0.8, -0.8, 0.1, 3.0, 3.0};
    int          idx[3];
    double       score[3];

    (void)state;
    assert_int_equal(hc_grubbs_outliers(x, 12, 0.05, 1, 0, idx, score), 0);
    assert_int_equal(hc_grubbs_outliers(x, 12, 0.05, 3, 0, idx, score), 2);
    assert_int_equal(idx[0], 10); /* the lower index of a tie first */
    assert_int_equal(idx[1], 11);
    check_rel(score[0], 0.7909805500667223, 1e-9, "masked score");
    check_rel(score[1], 1.0539319391803519, 1e-9, "second score");
}

/* splitmix64, then Box-Muller: a fixed-seed standard normal. */
static uint64_t rng = 0x9e3779b97f4a7c15ull;

static double uniform(void)
{
    uint64_t z = (rng += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return ((z ^ (z >> 31)) >> 11) * 0x1.0p-53 + 0x1.0p-54; /* (0, 1) */
}

static double normal(void)
{
    return sqrt(-2 * log(uniform())) * cos(2 * M_PI * uniform());
}

/* The fraction of clean normal samples of 30 in which anything is flagged. */
static double false_rate(double alpha, int max_out, int high_only, int trials)
{
    double x[30];
    int    idx[5], hits = 0;

    for (int t = 0; t < trials; t++) {
        for (int i = 0; i < 30; i++)
            x[i] = 5.0 + 0.3 * normal();
        hits += hc_grubbs_outliers(x, 30, alpha, max_out, high_only, idx, NULL) > 0;
    }
    return (double)hits / trials;
}

/* The test's size is alpha (Bonferroni, a hair under); 4000 trials put the
 * rate within +-0.013 of 0.05 at 3.5 sigma. Halving the tail (alpha/n for a
 * two-sided test) would show as ~0.1, doubling it as ~0.025. */
static void test_clean_data_rate(void **state)
{
    double r;

    (void)state;
    rng = 0x9e3779b97f4a7c15ull;
    r   = false_rate(0.05, 1, 0, 4000);
    print_message("two-sided Grubbs rate %.4f\n", r);
    assert_true(r > 0.037 && r < 0.063);
    r = false_rate(0.05, 1, 1, 4000);
    print_message("one-sided Grubbs rate %.4f\n", r);
    assert_true(r > 0.037 && r < 0.063);
    r = false_rate(0.05, 5, 0, 4000);
    print_message("ESD (5) rate %.4f\n", r);
    assert_true(r > 0.037 && r < 0.063);
    r = false_rate(0.01, 5, 0, 4000);
    print_message("ESD (5) rate at 0.01 %.4f\n", r);
    assert_true(r > 0.004 && r < 0.016);
}

static void test_equal_values(void **state)
{
    const double same[] = {5, 5, 5, 5, 5, 5, 5, 5};
    const double one[]  = {5, 5, 5, 5, 100, 5, 5};
    int          idx[4];

    (void)state;
    assert_int_equal(hc_grubbs_outliers(same, 8, 0.05, 4, 0, idx, NULL), 0);
    assert_int_equal(hc_grubbs_outliers(same, 8, 0.05, 4, 1, idx, NULL), 0);
    /* the rest equal after the first: one flagged, then the iteration stops */
    assert_int_equal(hc_grubbs_outliers(one, 7, 0.05, 4, 0, idx, NULL), 1);
    assert_int_equal(idx[0], 4);
}

static void test_too_few_and_bad_args(void **state)
{
    const double x[] = {1, 100, 1, 1, 1};
    int          idx[2];

    (void)state;
    assert_int_equal(hc_grubbs_outliers(NULL, 0, 0.05, 2, 0, NULL, NULL), 0);
    assert_int_equal(hc_grubbs_outliers(x, 2, 0.05, 2, 0, idx, NULL), 0);
    assert_int_equal(hc_grubbs_outliers(x, 5, 0.05, 0, 0, idx, NULL), 0);
    assert_int_equal(hc_grubbs_outliers(x, 5, 0.0, 2, 0, idx, NULL), -1);
    assert_int_equal(hc_grubbs_outliers(x, 5, 1.0, 2, 0, idx, NULL), -1);
    assert_int_equal(hc_grubbs_outliers(x, 5, NAN, 2, 0, idx, NULL), -1);
    assert_int_equal(hc_grubbs_outliers(x, 5, 0.05, -1, 0, idx, NULL), -1);
    assert_int_equal(hc_grubbs_outliers(x, -1, 0.05, 2, 0, idx, NULL), -1);
    assert_int_equal(hc_grubbs_outliers(x, HC_GRUBBS_MAX_N + 1, 0.05, 2, 0, idx, NULL), -1);
    assert_int_equal(hc_grubbs_outliers(x, 5, 0.05, 2, 0, NULL, NULL), -1);
    assert_int_equal(hc_grubbs_outliers(NULL, 5, 0.05, 2, 0, idx, NULL), -1);
}

/* NaN and inf are skipped: the indices still refer to x. */
static void test_non_finite_skipped(void **state)
{
    const double x[]   = {9.8,  NAN, 10.1, 10.0,      9.9,  INFINITY, 10.2,
                          10.0, 9.7, 10.3, -INFINITY, 10.1, 25.0,     NAN};
    const double few[] = {1.0, NAN, 50.0, INFINITY};
    int          idx[3];
    double       score[3], clean_score[3];
    const double clean[] = {9.8, 10.1, 10.0, 9.9, 10.2, 10.0, 9.7, 10.3, 10.1, 25.0};

    (void)state;
    assert_int_equal(hc_grubbs_outliers(x, 14, 0.05, 3, 0, idx, score), 1);
    assert_int_equal(idx[0], 12);
    assert_int_equal(hc_grubbs_outliers(clean, 10, 0.05, 3, 0, idx, clean_score), 1);
    check_rel(score[0], clean_score[0], 1e-15, "score with NaNs skipped");
    assert_int_equal(hc_grubbs_outliers(few, 4, 0.05, 2, 0, idx, NULL), 0);
}

static void test_high_only_ignores_low(void **state)
{
    double x[] = {9.8, 10.1, 10.0, 9.9, 10.2, 10.0, 9.7, 10.3, 10.1, -5.0};
    int    idx[3];

    (void)state;
    assert_int_equal(hc_grubbs_outliers(x, 10, 0.05, 3, 1, idx, NULL), 0);
    assert_int_equal(hc_grubbs_outliers(x, 10, 0.05, 3, 0, idx, NULL), 1);
    assert_int_equal(idx[0], 9);
    for (int i = 0; i < 10; i++)
        x[i] = -x[i]; /* low throughput, negated, is high */
    assert_int_equal(hc_grubbs_outliers(x, 10, 0.05, 3, 1, idx, NULL), 1);
    assert_int_equal(idx[0], 9);
}

/* G is scale-free: huge and tiny values (whose squares would overflow or
 * underflow) give the same answer. */
static void test_scale_free(void **state)
{
    const double base[]   = {0.0, 1.0, -1.0, 0.5, -0.5, 0.2, -0.2, 0.8, -0.8, 0.1, 3.0, 3.0};
    const double scales[] = {1e300, 1e-300, 0x1p-1020};
    double       x[12], score[3];
    int          idx[3];

    (void)state;
    for (size_t s = 0; s < sizeof(scales) / sizeof(scales[0]); s++) {
        for (int i = 0; i < 12; i++)
            x[i] = base[i] * scales[s] + scales[s]; /* shifted: the mean is not 0 */
        assert_int_equal(hc_grubbs_outliers(x, 12, 0.05, 3, 0, idx, score), 2);
        assert_int_equal(idx[0], 10);
        assert_int_equal(idx[1], 11);
        check_rel(score[1], 1.0539319391803519, 1e-9, "scaled score");
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_t_quantile_table),
        cmocka_unit_test(test_t_quantile_closed_forms),
        cmocka_unit_test(test_t_quantile_edges),
        cmocka_unit_test(test_grubbs_critical_table),
        cmocka_unit_test(test_single_outlier),
        cmocka_unit_test(test_masking),
        cmocka_unit_test(test_clean_data_rate),
        cmocka_unit_test(test_equal_values),
        cmocka_unit_test(test_too_few_and_bad_args),
        cmocka_unit_test(test_non_finite_skipped),
        cmocka_unit_test(test_high_only_ignores_low),
        cmocka_unit_test(test_scale_free),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
