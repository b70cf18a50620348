# time_digits.awk - an nccl-tests-style table's out-of-place time per row, in
# us, from whichever of its time and algbw columns was printed with more
# significant digits: at 8 B "0.27" us has two, "0.0294" GB/s three, and
# Open MPI's peer prints "0.001" GB/s (one). In: the table (size in $1, time
# $6, algbw $7); -v t, n, r: name, ranks, round. Out: "t n size r us".
function rel(s,   d) { # half a unit of the last printed digit, relative to s
    d = index(s, ".") ? length(s) - index(s, ".") : 0
    return s + 0 > 0 ? 0.5 * 10 ^ -d / s : 1e9
}
!/^#/ && NF > 6 && $1 ~ /^[0-9]+$/ {
    us = $6
    if ($7 > 0 && rel($7) < rel($6))
        us = $1 / $7 / 1e3
    print t, n, $1, r, us
}
