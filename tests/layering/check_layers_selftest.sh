#!/bin/sh
# check_layers_selftest.sh - proves check_layers.sh can fail: a fake src/
# with one violation of each rule must fail with each reported, and a clean
# one (with comments, build output and include/ headers that must not count)
# must pass, from the top of its tree and from a build folder via srcdir.

check=$(cd "$(dirname "$0")" && pwd)/check_layers.sh || exit 99
# make check exports the real tree's srcdir: each run below sets its own
unset srcdir
tmp=$(mktemp -d "${TMPDIR:-/tmp}/check_layers.XXXXXX") || exit 99
[ -n "$KEEP" ] || trap 'rm -rf "$tmp"' EXIT
trap 'exit 99' HUP INT TERM
fails=0

fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# put FILE LINE...: write a file of the fake tree, one line per argument
put() {
	f=$1; shift
	mkdir -p "$(dirname "$f")"
	printf '%s\n' "$@" > "$f"
}
# expect OUTPUT_FILE STRING: the output holds the string (a fixed string)
expect() {
	grep -F -e "$2" "$1" > /dev/null || fail "no '$2' in the output"
}

# ---- a clean tree ----
clean="$tmp/clean"
put "$clean/include/hcomm.h" '#pragma once'
put "$clean/src/base/log.h" '#include "hcomm.h"' '#include <stdio.h>'
put "$clean/src/base/params.h" '#include "params.def"' '#include "log.h"'
put "$clean/src/base/params.def" '/* a .def, included from its own folder */'
put "$clean/src/base/log.c" '#include "base/log.h"' '#include "base/params.h"' \
	'/* no include here:' '#include "core/comm.h"' '*/' '// #include "core/comm.h"' \
	'static const char *s = "/* not a comment";' '#include "base/log.h" /* core/comm.h */'
put "$clean/src/base/.deps/log.Plo" '#include "core/comm.h"'
put "$clean/src/base/.libs/junk.h" '#include "core/comm.h"'
put "$clean/src/base/log.o" '#include "core/comm.h"'
put "$clean/src/base/notes.txt" '#include "core/comm.h"'
put "$clean/src/transport/transport.h" '#include "base/params.h"'
put "$clean/src/transport/shm/shm.h" '#include "transport/transport.h"' '#include "../../base/log.h"'
put "$clean/src/topology/topo.h" '#include "base/log.h"'
put "$clean/src/algorithms/algo.h" '#include "topology/topo.h"'
put "$clean/src/core/comm.h" '#include "transport/shm/shm.h"' '#include "algorithms/algo.h"'
put "$clean/src/core/exec.h" '#include "algorithms/algo.h"'
put "$clean/src/core/comm.c" '#include "core/comm.h"'
put "$clean/src/overlap/stream.c" '#include "core/exec.h"' '#include "hcomm.h"'
put "$clean/src/shim/nccl/shim.h" '#include "core/comm.h"' '#include "nccl.h"'
put "$clean/src/shim/nccl/shim.c" '#include "shim.h"' '#include <overlap/../overlap/stream.h>'
put "$clean/src/overlap/stream.h" '#include "base/log.h"'

out="$tmp/out"
rc=0; (cd "$clean" && sh "$check") > "$out" 2>&1 || rc=$?
[ "$rc" = 0 ] || { fail "clean tree, from its top: exit $rc"; cat "$out"; }
expect "$out" 'check_layers: OK (15 files'

mkdir "$tmp/build"
rc=0; (cd "$tmp/build" && srcdir=../clean sh "$check") > "$out" 2>&1 || rc=$?
[ "$rc" = 0 ] || { fail "clean tree, from a build folder: exit $rc"; cat "$out"; }

rc=0; sh "$check" --arrows "$clean/src" > "$out" 2>&1 || rc=$?
[ "$rc" = 0 ] || fail "--arrows: exit $rc"
expect "$out" '| 3 | `core` | `algorithms` (2), `transport` (1) |'
expect "$out" '| 0 | `base` | - |'
rc=0; sh "$check" --dot "$clean/src" > "$out" 2>&1 || rc=$?
[ "$rc" = 0 ] || fail "--dot: exit $rc"
expect "$out" '"core" -> "transport" [label="1"];'

# ---- one violation of each rule ----
bad="$tmp/bad"
cp -R "$clean" "$bad"
# floor: upward (topology 1 -> algorithms 2)
put "$bad/src/topology/plan.c" '#include "topology/topo.h"' '#include "algorithms/algo.h"'
# transport: overlap reaches transport/ through core/, every step downward
put "$bad/src/overlap/event.c" '#include "core/comm.h"'
# ground: base/ reaches core/ through another base/ file
put "$bad/src/base/hash.h" '#include "base/log.h"' '#include "core/exec.h"'
put "$bad/src/base/hash.c" '#include "hash.h"'
# cycle: moe and compress (both floor 5) include each other
put "$bad/src/compress/codec.h" '#include "moe/moe.h"'
put "$bad/src/moe/moe.h" '#include "compress/codec.h"'
# unplaced: a folder not in the table, and a file in no folder
put "$bad/src/newthing/x.c" '#include "base/log.h"'
put "$bad/src/loose.c" '#include "base/log.h"'

rc=0; sh "$check" "$bad/src" > "$out" 2>&1 || rc=$?
[ "$rc" = 1 ] || fail "bad tree: exit $rc, not 1"
expect "$out" 'floor: topology/plan.c -> algorithms/algo.h (topology is on floor 1, algorithms on floor 2: not lower)'
expect "$out" 'floor: compress/codec.h -> moe/moe.h'
expect "$out" 'floor: moe/moe.h -> compress/codec.h'
expect "$out" 'floor: base/hash.h -> core/exec.h'
expect "$out" 'transport: overlap/event.c reaches a transport header: overlap/event.c -> core/comm.h -> transport/shm/shm.h'
expect "$out" 'ground: base/hash.c reaches outside base/: base/hash.c -> base/hash.h -> core/exec.h'
expect "$out" 'cycle: compress and moe include each other: compress/codec.h -> moe/moe.h; moe/moe.h -> compress/codec.h'
expect "$out" 'unplaced: folder newthing/ has no floor'
expect "$out" 'unplaced: src/loose.c is in no folder'
# overlap/stream.c reaches core/exec.h only, which does not reach transport/
grep -F 'overlap/stream.c' "$out" > /dev/null && fail "overlap/stream.c reported"
n=$(grep -c '^[a-z]*: ' "$out")
[ "$n" = 12 ] || fail "bad tree: $n violations, not 12"
# a three-folder cycle, no two of them including each other directly
three="$tmp/three"
put "$three/src/compress/a.h" '#include "moe/b.h"'
put "$three/src/moe/b.h" '#include "api/c.h"'
put "$three/src/api/c.h" '#include "compress/a.h"'
rc=0; sh "$check" "$three/src" > "$out" 2>&1 || rc=$?
[ "$rc" = 1 ] || fail "three-folder cycle: exit $rc, not 1"
expect "$out" 'cycle: api, compress, moe include each other around cycles'
expect "$out" '    moe -> api (1 include, e.g. moe/b.h -> api/c.h)'
grep -F ' include each other:' "$out" > /dev/null && fail "three-folder cycle: a pair reported"

# no src/ at all is an error, not a pass
rc=0; (cd "$tmp/build" && srcdir=. sh "$check") > "$out" 2>&1 || rc=$?
[ "$rc" = 99 ] || fail "no src/: exit $rc, not 99"

if [ "$fails" != 0 ]; then
	echo "--- last output:"; cat "$out"
	exit 1
fi
echo "check_layers_selftest: OK"
