# rounds_median.awk - the table builds_bench.sh and fabric_bench.sh print:
# rows "NAME RANKS SIZE ROUND VALUE" in, and per ranks, size and name other
# than ref: the median VALUE over the rounds, ref's median, their ratio and
# the most extreme single round's ratio (-v extreme=max: the largest, for
# times; min: the lowest, for bandwidths). -v fmt: the printf of a value.
# Output sorted by the caller.
{ t[$1, $2, $3, $4] = $5; rounds[$4] = 1; names[$1] = 1; sizes[$2 SUBSEP $3] = 1 }
function median(v, n, s,   c, r, x, i, j, y) {
    c = 0
    for (r in rounds) if ((v, n, s, r) in t) x[++c] = t[v, n, s, r]
    for (i = 2; i <= c; i++) { y = x[i]; for (j = i - 1; j > 0 && x[j] > y; j--) x[j + 1] = x[j]; x[j + 1] = y }
    return c % 2 ? x[(c + 1) / 2] : (x[c / 2] + x[c / 2 + 1]) / 2
}
END {
    for (ns in sizes) {
        split(ns, p, SUBSEP)
        m0 = median(ref, p[1], p[2])
        for (v in names) {
            if (v == ref) continue
            m = median(v, p[1], p[2]); ex = ""
            for (r in rounds)
                if ((v, p[1], p[2], r) in t && t[ref, p[1], p[2], r] > 0) {
                    q = t[v, p[1], p[2], r] / t[ref, p[1], p[2], r]
                    if (ex == "" || (extreme == "max" ? q > ex : q < ex)) ex = q
                }
            printf "%6d %10d  %-8s " fmt " " fmt " %7.3f %7.3f\n", p[1], p[2], v, m, m0,
                   (m0 > 0 ? m / m0 : 0), ex + 0
        }
    }
}
