#!/bin/sh
# run_shim.sh - runs the NCCL shim checks from already-built binaries:
# nccl_check (and nccl_check_nv, built against NVIDIA's nccl.h, and
# nccl_check_cuda, linked to CUDA for calls on CUDA streams) under hcomm-run
# on 1, 2 and 3 ranks, and with a rank that dies (shrunk away); the ABI diff of nccl_abi_check_hc / nccl_abi_check_nv;
# the symbol check of libnccl.so.2 against NVIDIA's header. Builds nothing.
#   SHIM_BIN   folder holding the test binaries (default tests/shim of the build)
#   SHIM_LIB   folder holding libnccl.so.2 (default .libs of the build)
#   HCOMM_RUN  hcomm-run (default tools/hcomm-run)
#   HCOMM_LIBDIR folder of libhcomm.so (default .libs)
# Exit: 0 PASS, 1 FAIL, 77 SKIP (binaries missing).
top=${top_builddir:-.}
bin=${SHIM_BIN:-$top/tests/shim}
lib=${SHIM_LIB:-$top/.libs}
run=${HCOMM_RUN:-$top/tools/hcomm-run}
libdir=${HCOMM_LIBDIR:-$top/.libs}
nvh=${NCCL_H:-/usr/local/cuda/include/nccl.h}
for f in "$bin/nccl_check" "$bin/nccl_abi_check_hc" "$lib/libnccl.so.2" "$run"; do
    if [ ! -x "$f" ] && [ ! -f "$f" ]; then
        echo "SKIP: $f not built"
        exit 77
    fi
done
LD_LIBRARY_PATH="$lib:$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
HCOMM_LOG_LEVEL=${HCOMM_LOG_LEVEL:-none}
export LD_LIBRARY_PATH HCOMM_LOG_LEVEL
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
progs=nccl_check
[ -x "$bin/nccl_check_nv" ] && progs="$progs nccl_check_nv"
[ -x "$bin/nccl_check_cuda" ] && progs="$progs nccl_check_cuda"
for prog in $progs; do
    for n in 1 2 3; do
        if NCCL_CHECK_ID_FILE="$tmp/id.$prog.$n" "$run" -n "$n" -t 120 "$bin/$prog" >"$tmp/out" 2>&1
        then echo "PASS: $prog on $n ranks"
        else echo "FAIL: $prog on $n ranks"; cat "$tmp/out"; fail=1
        fi
        # what could not run here (nccl_check_cuda without a GPU) says so
        grep -m1 '^SKIP' "$tmp/out" | sed "s/^/  $prog: /"
    done
done
# the last of 3 ranks exits after init; the others shrink it away and go on
for tl in shm tcp; do
    if NCCL_CHECK_DEAD_RANK=1 HCOMM_TRANSPORT=$tl NCCL_CHECK_ID_FILE="$tmp/id.dead.$tl" \
        "$run" -n 3 -t 120 "$bin/nccl_check" >"$tmp/out" 2>&1 &&
        [ "$(grep -c ': PASS (0 failures)' "$tmp/out")" -eq 2 ]
    then echo "PASS: shrink after a rank died ($tl)"
    else echo "FAIL: shrink after a rank died ($tl)"; cat "$tmp/out"; fail=1
    fi
done
if [ -x "$bin/nccl_abi_check_nv" ]; then
    "$bin/nccl_abi_check_hc" >"$tmp/hc" && "$bin/nccl_abi_check_nv" >"$tmp/nv" &&
        [ -s "$tmp/hc" ] && diff "$tmp/nv" "$tmp/hc" && echo "PASS: ABI matches NVIDIA's nccl.h" ||
        { echo "FAIL: ABI differs from NVIDIA's nccl.h (< NVIDIA, > hcomm)"; fail=1; }
else
    echo "SKIP: ABI diff (nccl_abi_check_nv not built: no NVIDIA nccl.h)"
fi
if [ -f "$nvh" ] && command -v nm >/dev/null 2>&1; then
    grep -o '^[a-z ]*\(const \)\?[a-zA-Z_]*\*\? *p\?nccl[A-Za-z]*(' "$nvh" |
        sed 's/.*[ *]\(p\?nccl[A-Za-z]*\)($/\1/' | sort -u >"$tmp/want"
    nm -D --defined-only "$lib/libnccl.so.2" | awk '{print $3}' | sort -u >"$tmp/have"
    missing=$(comm -23 "$tmp/want" "$tmp/have")
    if [ -n "$missing" ] || [ ! -s "$tmp/want" ]; then
        echo "FAIL: libnccl.so.2 lacks: $missing"; fail=1
    else echo "PASS: libnccl.so.2 exports all $(wc -l <"$tmp/want") functions of $nvh"
    fi
else
    echo "SKIP: symbol check (no $nvh or nm)"
fi
[ $fail = 0 ] && echo "PASS" || echo "FAIL"
exit $fail
