#!/usr/bin/env bash
# run.sh [HARNESS...] - builds the libFuzzer harnesses (tests/fuzz/fuzz_*.c)
# with clang, against the library's sources compiled with ASan, UBSan and the
# fuzzer's coverage, and runs each for FUZZ_SECONDS over its seed corpus
# (tests/fuzz/corpus/NAME). Nothing is configured: the objects go to
# FUZZ_BUILD (default tests/fuzz/build, ignored by git), and so do the inputs
# a run finds (FUZZ_BUILD/corpus/NAME; the seeds stay as they are) and any
# crashing input (FUZZ_BUILD/crash/NAME-*). Any crash, leak, sanitizer report
# or timeout fails the run.
#   tests/fuzz/run.sh                    # every harness, 60 s each
#   FUZZ_SECONDS=20 tests/fuzz/run.sh topo tuning
#   tests/fuzz/build/fuzz_topo CRASHFILE # replay one input
# Environment: FUZZ_CC (default clang), FUZZ_SECONDS, FUZZ_JOBS (parallel
# compiles, default 2), FUZZ_BUILD, FUZZ_ARGS (more libFuzzer flags).
set -u
cd "$(dirname "$0")/../.." || exit 2
CC=${FUZZ_CC:-clang}
secs=${FUZZ_SECONDS:-60}
jobs=${FUZZ_JOBS:-2}
B=${FUZZ_BUILD:-tests/fuzz/build}
harnesses=${*:-$(find tests/fuzz -maxdepth 1 -name 'fuzz_*.c' | sed 's|.*/fuzz_||; s|\.c$||' | sort)}

command -v "$CC" >/dev/null || { echo "fuzz: $CC not found (apt-get install clang)" >&2; exit 2; }
san="-fsanitize=address,undefined -fno-sanitize-recover=all"
flags="-g -O1 -fno-omit-frame-pointer $san -std=gnu11 -D_GNU_SOURCE -Wall -Wextra"
flags="$flags -Iinclude -Isrc -Iinclude/nccl $(pkg-config --cflags hwloc)"
libs="$(pkg-config --libs hwloc libsodium) -lpthread -lrt -lm -ldl"

# The library as configure builds it without the optional parts (ofi, ucx,
# ib, cuda, mpi, pmix) plus the ib transport's device-free files; libnccl.so.2's
# name table is not the library.
srcs=$(find src -name '*.c' | grep -v -e '^src/transport/ofi/' -e '^src/transport/ucx/' \
    -e '^src/transport/ib/' -e '_cuda\.c$' -e 'bootstrap_mpi\.c$' -e 'launcher_pmix\.c$' -e 'nccl_names\.c$' | sort)
srcs="$srcs src/transport/ib/ib_hca.c"

# An object is rebuilt when its source, or any header, is newer.
mkdir -p "$B/obj" "$B/crash" || exit 2
newest_h=$(find src include \( -name '*.h' -o -name '*.def' \) -printf '%T@ %p\n' | sort -n |
    tail -1 | cut -d' ' -f2-)
stale='' objs=''
for s in $srcs; do
    o="$B/obj/$(echo "$s" | tr / _).o"
    objs="$objs $o"
    [ "$o" -nt "$s" ] && [ "$o" -nt "$newest_h" ] || stale="$stale $s"
done
if [ -n "$stale" ]; then
    echo "fuzz: compiling $(echo "$stale" | wc -w) library files with $CC"
    export FUZZ_COMPILE="$CC $flags -fsanitize=fuzzer-no-link"
    # shellcheck disable=SC2016,SC2086
    printf '%s\n' $stale | xargs -P "$jobs" -I{} sh -c \
        '$FUZZ_COMPILE -c "$2" -o "$1/obj/$(echo "$2" | tr / _).o"' sh "$B" {} ||
        { echo "fuzz: library build failed" >&2; exit 1; }
    rm -f "$B/libhcomm_fuzz.a"
fi
# shellcheck disable=SC2086
[ -f "$B/libhcomm_fuzz.a" ] || ar rcs "$B/libhcomm_fuzz.a" $objs || exit 1

rc=0
for h in $harnesses; do
    c=tests/fuzz/fuzz_$h.c
    [ -f "$c" ] || { echo "fuzz: no harness $c" >&2; rc=1; continue; }
    # a harness may name extra link flags in a "// fuzz-ldflags: ..." line
    extra=$(sed -n 's|^// fuzz-ldflags: ||p' "$c")
    # shellcheck disable=SC2086
    $CC $flags -fsanitize=fuzzer "$c" "$B/libhcomm_fuzz.a" $extra $libs -o "$B/fuzz_$h" ||
        { echo "fuzz: $h: build failed" >&2; rc=1; continue; }
    mkdir -p "$B/corpus/$h"
    echo "fuzz: $h for $secs s"
    # first directory: where new inputs go; the seeds are only read
    # shellcheck disable=SC2086
    "$B/fuzz_$h" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$B/crash/$h-" ${FUZZ_ARGS:-} "$B/corpus/$h" "tests/fuzz/corpus/$h" \
        >"$B/$h.log" 2>&1
    r=$?
    grep -h '^stat::number_of_executed_units\|^stat::new_units_added' "$B/$h.log" |
        sed "s/^/fuzz: $h: /"
    if [ $r -ne 0 ]; then
        echo "fuzz: $h FAILED (exit $r); the log, $B/$h.log, ends:" >&2
        tail -40 "$B/$h.log" >&2
        find "$B/crash" -name "$h-*" | sed 's/^/fuzz: input: /' >&2
        rc=1
    fi
done
[ $rc -eq 0 ] && echo "fuzz: clean" || echo "fuzz: FAILED" >&2
exit $rc
