#!/bin/sh
# first_rows.sh - what a user's first hcomm-perf rows show against steady
# state: per build in TOPS and size (8 B to END, default 8K, x4), the median over
# ROUNDS (default 3) of the out-of-place time with nccl-tests' defaults
# (-w 5 -n 20) and with -w 3000 -n 3000, and their ratio.
#   TOPS="/tmp/base ." RANKS=2 perf/first_rows.sh
TOPS=${TOPS:-.} RANKS=${RANKS:-2} ROUNDS=${ROUNDS:-3} END=${END:-8K}
for top in $TOPS; do
    [ -x "$top/perf/hcomm-perf" ] || { echo "first_rows: build $top first" >&2; exit 2; }
done
for r in $(seq "$ROUNDS"); do
    for top in $TOPS; do
        for mode in first steady; do
            if [ $mode = first ]; then a="-n 20 -w 5"; else a="-n 3000 -w 3000"; fi
            # shellcheck disable=SC2086
            "$top/perf/hcomm-perf" all_reduce --ranks "$RANKS" -b 8 -e "$END" -f 4 $a |
                awk -v t="$top" -v m=$mode '/^ +[0-9]/ { print t, $1, m, $6 }'
        done
    done
done | sort -k1,1 -k2,2n -k3,3 -k4,4g |
    awk '{ k = $1 " " $2 " " $3; v[k] = v[k] " " $4; c[k]++ }
         END { for (k in v) { split(v[k], a, " "); print k, a[int((c[k] + 1) / 2)] } }' |
    sort -k1,1 -k2,2n -k3,3 |
    awk -v n="$RANKS" 'BEGIN { printf "# ranks %s; out-of-place us, medians\n# tree  size(B)  -w 5 -n 20  -w 3000 -n 3000  ratio\n", n }
         { if ($3 == "first") f = $4; else printf "%-12s %6s  %8.2f  %8.2f  %5.2f\n", $1, $2, f, $4, f / $4 }'
