#!/bin/sh
# run_perf.sh - hcomm-perf's own result checks over every collective, dtype and
# op, with two operations fused per group (-m 2), blocking and nonblocking.
top=${top_builddir:-.}
perf="$top/perf/hcomm-perf"
[ -x "$perf" ] || { echo "SKIP: $perf not built"; exit 77; }
export HCOMM_TIMEOUT=60
pass=0 fail=0
for coll in all_reduce reduce_scatter reduce broadcast all_gather alltoall sendrecv; do
    for z in 0 1; do
        args="$coll --ranks 3 -b 8 -e 128K -f 16 -n 2 -w 1 -m 2 -z $z -d all -o all -r 2"
        if timeout 120 "$perf" $args > /tmp/hcomm-run-perf.$$ 2>&1; then
            pass=$((pass + 1))
        else
            fail=$((fail + 1)); echo "FAIL: hcomm-perf $args"; grep -v '^#' /tmp/hcomm-run-perf.$$ | tail -20
        fi
    done
done
rm -f /tmp/hcomm-run-perf.$$
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
