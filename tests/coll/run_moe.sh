#!/bin/sh
# run_moe.sh - alltoallv, alltoallv_dynamic and MoE dispatch/combine against
# their serial references on 1 to 4 ranks (moe_check), over the default
# transports and tcp; then hcomm-perf alltoallv, moe_dispatch and moe_combine
# with their own checks, the dedup they report, and refused usages; and a rank
# out of memory in a dispatch, whose peers must fail at once (moe_oom).
# shellcheck source=tests/test_lib.sh
. "$(dirname "$0")/../test_lib.sh"
run="$top/tools/hcomm-run" check="$top/tests/coll/moe_check" perf="$top/perf/hcomm-perf"
oom="$top/tests/coll/moe_oom"
need "$run" "$check" "$perf" "$oom"
export HCOMM_TIMEOUT=60
scratch moe
for n in 1 2 3 4; do
    try 300 "$run" -n "$n" "$check"
    result "moe_check on $n ranks" $?
done
for n in 3 4; do
    try 300 HCOMM_TRANSPORT=tcp "$run" -n "$n" "$check"
    result "moe_check on $n ranks over tcp" $?
done
for what in rows layout; do
    for tl in auto tcp; do
        try 120 HCOMM_TRANSPORT=$tl "$run" -n 3 "$oom" "$what"
        rc=$?
        if [ $rc -ne 77 ]; then
            [ $rc -eq 0 ] && [ "$(grep -c ': ok$' "$out")" -eq 3 ]
            rc=$?
        fi
        result "moe_oom $what ($tl): out of memory on one rank, the others fail at once" $rc
    done
done
try 120 "$perf" alltoallv --ranks 3 -b 8 -e 1M -f 8 -n 2 -w 1 -d all && perf_ok
result "hcomm-perf alltoallv on 3 ranks, every dtype" $?
try 120 HCOMM_TRANSPORT=tcp "$perf" alltoallv --ranks 4 --seed 7 -b 1K -e 256K -f 16 -n 2 -w 1 &&
    perf_ok
result "hcomm-perf alltoallv on 4 ranks over tcp, --seed 7" $?
for c in moe_dispatch moe_combine; do
    try 120 "$perf" $c --ranks 4 --tokens 64 --hidden 256 --topk 4 --experts 8 -n 2 -w 1 -d all &&
        perf_ok
    result "hcomm-perf $c on 4 ranks, float32/bfloat16/float16" $?
done
# 2 experts per rank, top-4: some tokens choose two on one rank; the bytes on
# the wire must then shrink by about the share of duplicate pairs (within the
# metadata and count exchange: 0.03)
try 120 "$perf" moe_dispatch --ranks 4 --tokens 128 --hidden 2048 --topk 4 --experts 8 -n 2 -w 1 &&
    perf_ok &&
    awk '!/^#/ && NF >= 13 { seen = 1; d = $9 - $12
                             if (!($9 > 0.1 && $10 < $11 && d > -0.03 && d < 0.03)) bad = 1 }
         END { exit !(seen && !bad) }' "$out"
result "hcomm-perf moe_dispatch: wire bytes shrink by the dedup share" $?
try 120 "$perf" moe_dispatch --ranks 1 --tokens 16 --hidden 8 --topk 2 --experts 4 -n 1 -w 0 &&
    perf_ok && awk '!/^#/ && NF >= 13 { s = 1; if ($10 != 0) b = 1 }
                    END { exit !(s && !b) }' "$out"
result "hcomm-perf moe_dispatch on 1 rank sends nothing over a transport" $?
for bad in "moe_dispatch --topk 9 --experts 8" "moe_combine -d int32" "alltoallv -m 2" \
    "moe_dispatch --tokens 0" "moe_dispatch --topk 65"; do
    # shellcheck disable=SC2086 # bad is a list of arguments
    try 60 "$perf" $bad --ranks 2
    [ $? -eq 2 ]
    result "hcomm-perf $bad is refused" $?
done
finish
