#!/bin/sh
# run_torch_inline.sh - small operations on the caller's thread
# (torch_inline.py): two groups issued in opposite orders complete, and small
# inline operations mixed with large queued ones keep their order, on 2 and 4
# ranks (4 share 2 cores here: inline spins yield). A hang is killed at the
# launcher's limit and fails. SKIPs as torch_lib.sh says.
# shellcheck source=tests/torch/torch_lib.sh
. "$(dirname "$0")/torch_lib.sh"
export HCOMM_TIMEOUT=60
scratch torch_inline
for n in 2 4; do
    try 200 "$py" "$here/torch_inline.py" "$n" 150 &&
        [ "$(grep -o 'rank [0-9]*: PASS ([0-9]* failed)' "$out" | wc -l)" -eq "$n" ]
    result "inline operations on $n ranks: opposite orders on two groups, order in one" $?
done
finish
