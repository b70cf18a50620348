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
# --tune writes a tuning file; selection then follows it; a bad file is ignored
tf=/tmp/hcomm-run-perf-tune.$$
if "$perf" all_reduce --ranks 2 -b 8 -e 64K -f 64 -n 2 -w 1 --tune="$tf" > /tmp/hcomm-run-perf.$$ 2>&1 &&
    grep -q '^allreduce 2 0 ' "$tf"; then
    pass=$((pass + 1))
else
    fail=$((fail + 1)); echo "FAIL: hcomm-perf --tune"; tail -20 /tmp/hcomm-run-perf.$$
fi
printf 'allreduce 2 0 18446744073709551615 rabenseifner 65536\n' > "$tf"
if HCOMM_TUNING_FILE="$tf" HCOMM_LOG_LEVEL=debug HCOMM_LOG_SUBSYS=algo "$perf" all_reduce --ranks 2 \
    -b 8 -e 8K -f 32 -n 2 -w 1 > /tmp/hcomm-run-perf.$$ 2>&1 &&
    grep -q 'allreduce of 2048 elements (8192 bytes): rabenseifner' /tmp/hcomm-run-perf.$$; then
    pass=$((pass + 1))
else
    fail=$((fail + 1)); echo "FAIL: HCOMM_TUNING_FILE not followed"; grep -i 'allreduce of' /tmp/hcomm-run-perf.$$ | head
fi
printf 'allreduce two 0 9 warp 1\n' > "$tf"
if HCOMM_TUNING_FILE="$tf" "$perf" all_reduce --ranks 2 -b 8 -e 8K -f 32 -n 2 -w 1 \
    > /tmp/hcomm-run-perf.$$ 2>&1 && grep -q 'tuning file .*:1: expected' /tmp/hcomm-run-perf.$$; then
    pass=$((pass + 1))
else
    fail=$((fail + 1)); echo "FAIL: a bad tuning file must warn and be ignored"; tail -5 /tmp/hcomm-run-perf.$$
fi
rm -f /tmp/hcomm-run-perf.$$ "$tf"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
