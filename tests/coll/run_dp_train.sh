#!/bin/sh
# run_dp_train.sh - examples/dp_train (1,000,010-parameter logistic regression,
# data parallel on 2 ranks) with the plain, onebit and topk:0.01 gradient
# all-reduce: each compressed run must end within 2% (relative) of the plain
# run's training loss and within 1 point of its test accuracy. The runs train
# to convergence (the loss curve is flat over the last epochs); without error
# feedback (dp_train --no-error-feedback) the same runs miss by far more.
# shellcheck source=tests/test_lib.sh
. "$(dirname "$0")/../test_lib.sh"
run="$top/tools/hcomm-run" train="$top/examples/dp_train"
need "$run" "$train"
export HCOMM_TIMEOUT=60
scratch dp-train
for c in none onebit topk:0.01; do
    try 120 "$run" -n 2 "$train" --compress "$c"
    st=$?
    cp "$out" "$out.$c"
    grep '^final ' "$out"
    [ "$st" -eq 0 ] && has '^final loss '
    result "dp_train --compress $c on 2 ranks (exit $st)" $?
done
# final loss L accuracy A compress SPEC bytes_sent B: fields 3, 5 and 9
base=$(grep '^final ' "$out.none")
for c in onebit topk:0.01; do
    this=$(grep '^final ' "$out.$c")
    if [ -z "$base" ] || [ -z "$this" ]; then
        result "$c against none: no final line to compare" 1 "$out.$c"
        continue
    fi
    echo "$base" "$this" | awk -v c="$c" '{
        l0 = $3; a0 = $5; b0 = $9; l = $12; a = $14; b = $18
        dl = (l - l0) / l0 * 100; da = a - a0
        printf "%s: loss %.5f vs %.5f (%+.2f%%), accuracy %.2f vs %.2f (%+.2f points), bytes %.1fx fewer\n",
               c, l, l0, dl, a, a0, da, b0 / b
        exit !(dl <= 2 && dl >= -2 && da <= 1 && da >= -1 && b < b0)
    }'
    result "$c within 2% of the plain loss and 1 point of its accuracy, fewer bytes" $? "$out.$c"
done
finish
