# test_lib.sh - sourced by the run_*.sh tests after they set top: SKIP unless
# the binaries are built, a scratch file, PASS/FAIL counting and the verdict.

# need BIN...: exits 77 (SKIP) unless every BIN is built.
need() {
    for b in "$@"; do
        [ -x "$b" ] || { echo "SKIP: $b not built"; exit 77; }
    done
}

# scratch NAME: $out, a temporary file; it and $out.* go at exit.
scratch() {
    out=$(mktemp "/tmp/hcomm-$1.XXXXXX") || exit 1
    trap 'rm -f "$out" "$out".*' EXIT INT TERM
}

pass=0 fail=0
# result LABEL STATUS [FILE]: counts one check; a failure shows FILE's (default
# $out) last lines, without the PASS lines and error logs expected there.
result() {
    if [ "$2" -eq 0 ]; then pass=$((pass + 1)); echo "PASS $1"
    else
        fail=$((fail + 1)); echo "FAIL $1"
        grep -v -e '^PASS' -e 'hcomm ERROR' "${3:-$out}" | tail -15
    fi
}

# finish: the totals; exit status 0 only if nothing failed.
finish() {
    echo "$pass passed, $fail failed"
    [ "$fail" -eq 0 ]
}
