/* grubbs.h - outlier tests for slow-rank detection: which ranks arrive late,
 * which peers' links are slow, over a window of measurements.
 *
 * Pure functions: no allocation, no global state, safe from any thread.
 *
 * Several outliers are found with Rosner's generalized ESD, which is Grubbs'
 * test iterated: remove the most extreme value, test the rest again, up to
 * max_out times, each step against the Grubbs critical value of the values
 * left; the outliers are the candidates up to the LAST step that exceeds its
 * critical value. Stopping at the first step that does not (plain iterated
 * Grubbs) would miss two close outliers that inflate the standard deviation
 * together (masking); ESD does not. */
#ifndef HC_BASE_GRUBBS_H
#define HC_BASE_GRUBBS_H

/* The most values hc_grubbs_outliers takes (its bitmap is on the stack). */
#define HC_GRUBBS_MAX_N 65536

/* The inverse CDF of Student's t with dof > 0 degrees of freedom (not
 * necessarily whole): P(T <= t) = p. p <= 0: -INFINITY, p >= 1: INFINITY;
 * dof <= 0 or NaN arguments: NaN. Relative error below 1e-6 for dof 1..1e6
 * and p in [1e-12, 1 - 1e-12] (measured: below 1e-11 against mpmath); past
 * 1e9 degrees of freedom, the normal quantile. */
double hc_student_t_quantile(double p, double dof);

/* The Grubbs critical value for n values at significance alpha in (0, 1):
 * G_crit = (n-1)/sqrt(n) * sqrt(t^2 / (n-2 + t^2)), t the upper alpha/n
 * (one_sided, the max alone) or alpha/(2n) (two-sided) quantile of t with
 * n-2 degrees of freedom. n < 3: INFINITY (no test possible); alpha outside
 * (0, 1): NaN. */
double hc_grubbs_critical(int n, double alpha, int one_sided);

/* Generalized ESD over x[0..n): up to max_out outliers at significance alpha
 * in (0, 1) (0.05 the usual). high_only: only values above the mean are
 * tested, one-sided (late arrivals; pass low-is-bad measures such as
 * throughput negated); otherwise the farthest from the mean either way.
 * NaN and infinite values are skipped: they neither count in n nor get
 * flagged. Fewer than 3 finite values, or all equal: nothing flagged.
 *
 * Returns the number flagged, k, or -1 on bad arguments (n > HC_GRUBBS_MAX_N,
 * alpha outside (0, 1), max_out < 0, NULL x or out_idx with n, max_out > 0).
 * out_idx[0..k) are indices into x in order of detection, most extreme first;
 * out_score (may be NULL) the matching G / G_crit. A score can be below 1
 * when a later step exceeded its critical value (the masking case above).
 * Both arrays hold max_out entries: those from k on are overwritten.
 * Cost: O(n) per step, one t quantile per step. */
int hc_grubbs_outliers(const double *x, int n, double alpha, int max_out, int high_only,
                       int *out_idx, double *out_score);

#endif
