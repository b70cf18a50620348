/* grubbs.c - Student's t quantile, Grubbs critical values, generalized ESD.
 *
 * The t upper tail is the regularized incomplete beta function,
 * P(T > t) = I_x(dof/2, 1/2) / 2 with x = dof / (dof + t^2), evaluated by its
 * continued fraction (modified Lentz); the quantile solves log P(T > t) =
 * log q by Newton's method kept inside a bisection bracket. Working on the
 * upper tail q = 1 - p, never on p, keeps q's relative precision down to tiny
 * alpha / (2n). */
#include "base/grubbs.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* Past this many degrees of freedom t is the normal to 1e-9, and the
 * continued fraction would need ~sqrt(dof) terms. */
#define T_NORMAL_DOF 1e9

/* One step of the modified Lentz recurrence: h *= the step's factor. */
static double lentz_step(double aa, double *c, double *d)
{
    const double tiny = 1e-300;

    *d = 1.0 + aa * *d;
    *d = 1.0 / (fabs(*d) < tiny ? tiny : *d);
    *c = 1.0 + aa / *c;
    *c = fabs(*c) < tiny ? tiny : *c;
    return *d * *c;
}

/* The continued fraction of I_x(a, b), converging fast for
 * x < (a+1)/(a+b+2); ~sqrt(a) terms near that bound. */
static double beta_cf(double a, double b, double x)
{
    double c = 1.0, d = 1.0 - (a + b) * x / (a + 1.0), h;

    d = 1.0 / (fabs(d) < 1e-300 ? 1e-300 : d);
    h = d;
    for (int m = 1; m <= 200000; m++) {
        double m2 = 2.0 * m, del;

        h *= lentz_step(m * (b - m) * x / ((a - 1.0 + m2) * (a + m2)), &c, &d);
        del = lentz_step(-(a + m) * (a + b + m) * x / ((a + m2) * (a + 1.0 + m2)), &c, &d);
        h *= del;
        if (fabs(del - 1.0) < 1e-16)
            break;
    }
    return h;
}

/* log(Gamma(a + 1/2) / Gamma(a)); for large a by its asymptotic series, as
 * the difference of two lgamma near a log a would lose digits. */
static double lgamma_half_ratio(double a)
{
    double r = 1.0 / (a * a);

    if (a < 50.0)
        return lgamma(a + 0.5) - lgamma(a);
    return 0.5 * log(a) - (1.0 / 8 - r * (1.0 / 192 - r / 640)) / a; /* error < 2e-15 */
}

/* P(T > t) for t >= 0; *central = P(0 < T <= t) = 0.5 - P(T > t), computed
 * without cancellation near t = 0 where P(T > t) is close to 0.5. */
static double t_upper(double t, double dof, double *central)
{
    if (dof > T_NORMAL_DOF) {
        *central = 0.5 * erf(t / M_SQRT2);
        return 0.5 * erfc(t / M_SQRT2);
    }
    double r = t * t / dof; /* x = dof / (dof + t^2) = 1 / (1 + r) */
    double x = 1.0 / (1.0 + r), y = isinf(r) ? 1.0 : r / (1.0 + r), a = 0.5 * dof, b = 0.5;
    double lfront = lgamma_half_ratio(a) - 0.5 * log(M_PI) - a * log1p(r) + b * log(y);
    double w;

    if (x < (a + 1.0) / (a + b + 2.0)) {
        w        = 0.5 * exp(lfront) * beta_cf(a, b, x) / a;
        *central = 0.5 - w;
        return w;
    }
    w        = 0.5 * exp(lfront) * beta_cf(b, a, y) / b;
    *central = w;
    return 0.5 - w;
}

static double t_pdf(double t, double dof)
{
    if (dof > T_NORMAL_DOF)
        return exp(-0.5 * t * t) / sqrt(2.0 * M_PI);
    return exp(lgamma_half_ratio(0.5 * dof) - 0.5 * log(dof * M_PI) -
               0.5 * (dof + 1.0) * log1p(t * t / dof));
}

/* t >= 0 with P(T > t) = q, q in (0, 0.5]. Past q = 0.25 it solves
 * P(0 < T <= t) = 0.5 - q instead (exact there), for relative precision in t
 * near 0. */
static double t_upper_inv(double q, double dof)
{
    int    by_central = q > 0.25;
    double lo = 0.0, hi = 1.0, t, c;
    double ltarget = log(by_central ? 0.5 - q : q);

    if (q >= 0.5)
        return 0.0;
    while (t_upper(hi, dof, &c) > q) {
        lo = hi;
        hi *= 2.0;
        if (isinf(hi))
            return INFINITY;
    }
    t = hi;
    for (int it = 0; it < 400; it++) {
        double u = t_upper(t, dof, &c), v = by_central ? c : u, tn;
        /* f > 0: t too small; Newton on the log, d/dt log P(T > t) = -pdf / P */
        double f = by_central ? ltarget - log(v) : log(v) - ltarget;

        if (f > 0.0)
            lo = t;
        else
            hi = t;
        tn = t + f * v / t_pdf(t, dof);
        if (!(tn > lo && tn < hi))
            tn = 0.5 * (lo + hi);
        if (fabs(tn - t) <= 1e-15 * tn || hi - lo <= 1e-15 * hi)
            return tn;
        t = tn;
    }
    return t;
}

double hc_student_t_quantile(double p, double dof)
{
    if (isnan(p) || !(dof > 0.0))
        return NAN;
    if (p <= 0.0)
        return -INFINITY;
    if (p >= 1.0)
        return INFINITY;
    if (p < 0.5)
        return -t_upper_inv(p, dof);
    return t_upper_inv(1.0 - p, dof); /* exact for p in [0.5, 1) */
}

double hc_grubbs_critical(int n, double alpha, int one_sided)
{
    if (!(alpha > 0.0 && alpha < 1.0))
        return NAN;
    if (n < 3)
        return INFINITY;
    double t  = t_upper_inv(alpha / (one_sided ? n : 2.0 * n), n - 2.0);
    double t2 = t * t;

    return (n - 1) / sqrt((double)n) * sqrt(t2 / (n - 2 + t2));
}

int hc_grubbs_outliers(const double *x, int n, double alpha, int max_out, int high_only,
                       int *out_idx, double *out_score)
{
    uint64_t gone[HC_GRUBBS_MAX_N / 64];
    double   amax = 0.0;
    int      m = 0, k = 0, e;

    if (!(alpha > 0.0 && alpha < 1.0) || max_out < 0 || n < 0 || n > HC_GRUBBS_MAX_N)
        return -1;
    if (n < 3 || max_out == 0)
        return 0;
    if (!x || !out_idx)
        return -1;
    memset(gone, 0, (size_t)(n + 63) / 64 * sizeof(gone[0]));
    for (int j = 0; j < n; j++) {
        if (!isfinite(x[j])) {
            gone[j / 64] |= 1ull << (j % 64);
            continue;
        }
        m++;
        amax = fmax(amax, fabs(x[j]));
    }
    /* Scaled by a power of two so that sums and squares neither overflow nor
     * underflow; G does not change (exact but for values 1e-308 times the
     * largest, negligible anyway). */
    frexp(amax, &e);
    for (int i = 0; i < max_out && m >= 3; i++) {
        double sum = 0.0, dsum = 0.0, ss = 0.0, best_key = -INFINITY;
        double vmin = INFINITY, vmax = -INFINITY, mean, crit, g;
        int    best = -1;

        for (int j = 0; j < n; j++)
            if (!(gone[j / 64] >> (j % 64) & 1))
                sum += ldexp(x[j], -e);
        mean = sum / m;
        for (int j = 0; j < n; j++) {
            if (gone[j / 64] >> (j % 64) & 1)
                continue;
            double v = ldexp(x[j], -e), d = v - mean, key = high_only ? d : fabs(d);

            dsum += d;
            ss += d * d;
            vmin = fmin(vmin, v);
            vmax = fmax(vmax, v);
            if (key > best_key) {
                best_key = key;
                best     = j;
            }
        }
        ss -= dsum * dsum / m; /* corrected two-pass variance */
        if (vmin == vmax || !(ss > 0.0))
            break; /* the rest are equal: nothing stands out */
        g          = best_key / sqrt(ss / (m - 1));
        crit       = hc_grubbs_critical(m, alpha, high_only);
        out_idx[i] = best;
        if (out_score)
            out_score[i] = g / crit;
        if (g > crit)
            k = i + 1; /* ESD: the last step that exceeds counts, not the first */
        gone[best / 64] |= 1ull << (best % 64);
        m--;
    }
    return k;
}
