#!/bin/sh
# run_ddp.sh - DistributedDataParallel on the hcomm backend, launched as users
# launch it: python3 -m torch.distributed.run (env:// init). torch_ddp.py
# trains an MLP in several DDP buckets on hcomm and on gloo from one seed
# (parameters must agree), then with hcomm_torch.hooks' onebit, topk, bf16
# and fp16 (final loss within 2% of the run without a hook), and checks the
# hooks' errors. 2 ranks, then 3 ranks (no hooks: time), each
# on a rendezvous port of their own. SKIPs as torch_lib.sh says.
# shellcheck source=tests/torch/torch_lib.sh
. "$(dirname "$0")/torch_lib.sh"
export HCOMM_TIMEOUT=60
scratch ddp
free_port() {
    "$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# run N LAUNCHER-ARGS...: one job of N ranks. torch 1.13's launcher on Python 3.11 reads its default --redirects and --tee
# ("0") as None and stops ("'NoneType' object has no attribute 'get'": 3.11's
# enum.Flag no longer lists NONE): both set, stdout goes to the console and a
# log. It kills its ranks when one fails; timeout(1) is the backstop.
run() {
    n=$1
    shift
    t0=$(date +%s)
    try 180 "$py" -m torch.distributed.run --nproc_per_node "$n" --redirects 1 --tee 1 \
        --log_dir "$tmp/logs.$n" "$@"
    st=$?
    secs=$(($(date +%s) - t0))
    sed -n 's/^\[default0\]:\(ddp\|loss\)/\1/p' "$out"
    [ "$st" -eq 0 ] && [ "$(grep -c ': [0-9]* checks passed, 0 failed$' "$out")" -eq "$n" ]
    result "DDP on hcomm, $n ranks under torch.distributed.run: exit $st in ${secs}s" $?
}
# each run's rendezvous on a free port: --standalone always takes 29400, which
# another job on this host may hold (a second make check, a user's torchrun)
run 2 --rdzv_backend c10d --rdzv_endpoint "127.0.0.1:$(free_port)" --nnodes 1 \
    "$here/torch_ddp.py"
run 3 --rdzv_backend c10d --rdzv_endpoint "127.0.0.1:$(free_port)" --nnodes 1 \
    "$here/torch_ddp.py" --only cmp,errors
finish
