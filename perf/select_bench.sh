#!/bin/sh
# select_bench.sh - is the algorithm hcomm selects as fast as the best one
# forced? For each size, ROUNDS rounds of one hcomm-perf all_reduce run per
# candidate (the automatic choice first), interleaved size by size so that the
# machine's swings hit all candidates alike; keeps each candidate's fastest
# out-of-place time per size and prints per size the automatic choice, its
# time, the fastest forced candidate and the ratios. From the top of the built
# tree:
#   RANKS=4 perf/select_bench.sh [-n 20 -w 3]               local ranks (forked)
#   NODES=4 PPN=2 PLACE=rr RATE=1gbit perf/select_bench.sh   namespaces (root)
# SIZES (bytes; default 8 to 64M by 8x) lists the sizes; CANDS (default "ring
# rd rabenseifner tree hier leader") names HCOMM_ALGO values, a candidate
# NAME@VAR=VAL also sets HCOMM_VAR=VAL; ROUNDS defaults to 5.
top=.
CANDS=${CANDS:-ring rd rabenseifner tree hier leader} ROUNDS=${ROUNDS:-5}
SIZES=${SIZES:-8 64 512 4096 32768 262144 2097152 16777216 67108864}
iters=${*:--n 20 -w 3}
perf="$top/perf/.libs/hcomm-perf"
[ -x "$perf" ] || perf="$top/perf/hcomm-perf"
export LD_LIBRARY_PATH="$top/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" HCOMM_TIMEOUT=300
if [ -n "$NODES" ]; then
    . "$top/tests/test_lib.sh"
    . "$top/tests/netns/netns_lib.sh"
    netns_setup
    work=$netns_dir layout="$NODES namespaces x ${PPN} ranks, PLACE=$PLACE, $RATE links"
else
    work=$(mktemp -d /tmp/hcomm-select.XXXXXX)
    trap 'rm -rf "$work"' EXIT INT TERM
    layout="${RANKS:=2} local ranks"
fi

# run_one LABEL ENV...: one hcomm-perf run; "LABEL size time" rows into rows.
run_one() {
    label=$1; shift
    if [ -n "$NODES" ]; then
        # shellcheck disable=SC2086
        (export "$@"; netns_launch "$perf" all_reduce $args -c 0) > /dev/null 2>&1
        rc=$?; out="$netns_dir/out.0"; log="$netns_dir/log.0"
    else
        # shellcheck disable=SC2086
        (export "$@" HCOMM_LOG_FILE="$work/log"; "$perf" all_reduce --ranks "$RANKS" $args -c 0) \
            > "$work/out" 2>&1
        rc=$?; out="$work/out"; log="$work/log"
    fi
    [ $rc -eq 0 ] || { echo "select_bench: $label failed:" >&2; tail -5 "$out" >&2; return 1; }
    awk -v l="$label" '/^ *[0-9]/ { print l, $1, $6 }' "$out" >> "$work/rows"
    # choices after calibration: its own small allreduces are forced or picked
    # before the step floor is known
    [ "$label" = auto ] && awk '/every rank busy/ { n = 0 } /allreduce of/ { l[n++] = $0 }
        END { for (i = 0; i < n; i++) print l[i] }' "$log" >> "$work/chosen"
    return 0
}

: > "$work/rows"; : > "$work/chosen"
for size in $SIZES; do
    args="-b $size -e $size $iters"
    for round in $(seq 1 "$ROUNDS"); do
        run_one auto HCOMM_LOG_LEVEL=debug HCOMM_LOG_SUBSYS=algo,init || exit 1
        for c in $CANDS; do
            algo=${c%%@*} extra=
            [ "$algo" != "$c" ] && extra="HCOMM_${c#*@}"
            # shellcheck disable=SC2086
            run_one "$c" HCOMM_ALGO="allreduce:$algo" $extra || exit 1
        done
    done
done
echo "# $layout: hcomm-perf all_reduce -b S -e S $iters for S in $SIZES; fastest of $ROUNDS rounds, candidates interleaved per size"
echo "# chosen/best: the algorithm selection chose, timed by its automatic and its forced"
echo "# runs (both run it: the fastest of the two), against the fastest forced candidate"
echo "# size(B)  auto-choice  auto(us)  best-forced  best(us)  auto/best  chosen/best"
# "allreduce of N elements (B bytes): ALGO, ..." lines name the choice per size
sed -n 's/.*allreduce of [0-9]* elements (\([0-9]*\) bytes): \([a-z]*\).*/\1 \2/p' "$work/chosen" | sort -u > "$work/choice"
# a size whose choice varied between rounds (calibration differs per launch)
# lists every choice, and its chosen/best is the automatic runs' own time
awk 'FNR == NR { if ($1 in ch) ch[$1] = ch[$1] "/" $2; else ch[$1] = $2; next }
     { k = $1 SUBSEP $2; if (!(k in t) || $3 < t[k]) t[k] = $3; sz[$2] = 1; lab[$1] = 1 }
     END {
         n = 0; for (s in sz) list[n++] = s + 0
         for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (list[j] < list[i]) { x = list[i]; list[i] = list[j]; list[j] = x }
         worst = 0
         for (i = 0; i < n; i++) {
             s = list[i]; bt = -1; bl = "-"
             for (l in lab) if (l != "auto" && ((l, s) in t) && (bt < 0 || t[l, s] < bt)) { bt = t[l, s]; bl = l }
             a = t["auto", s]; r = bt > 0 ? a / bt : 0; if (r > worst) worst = r
             c = (s in ch) ? ch[s] : "?"; ct = ((c, s) in t && t[c, s] < a) ? t[c, s] : a
             cr = bt > 0 ? ct / bt : 0
             if (cr > cworst) cworst = cr
             printf "%10d  %-11s %9.2f  %-11s %9.2f  %6.2f  %6.2f\n", s, c, a, bl, bt, r, cr
         }
         printf "# worst auto/best: %.2f, worst chosen/best: %.2f\n# fastest time (us) of each candidate\n# %8s", worst, cworst, "size(B)"
         m = 0; for (l in lab) labs[m++] = l
         for (j = 0; j < m; j++) printf " %13s", labs[j]; printf "\n"
         for (i = 0; i < n; i++) {
             printf "%10d", list[i]
             for (j = 0; j < m; j++) printf " %13.2f", t[labs[j], list[i]]; printf "\n"
         }
     }' "$work/choice" "$work/rows"
