"""torch_shim.py - the hcomm backend's Works under faults that torch_shim.c
(preloaded: HC_TORCH_SHIM) injects, on 2 ranks:

  own:   a compressed allreduce whose request ends, after which its
         communicator is failed (revoked) before its Completion runs: the
         Work's own operation succeeded, so it must succeed (it reported the
         communicator's error);
  queue: the Completion of an allreduce cannot be queued on the stream (out
         of memory) while a Future callback of an earlier operation, about to
         run on the stream, issues another: the allreduce must return within
         LIMIT_S with every result right (the caller waited for the stream
         with the group's mutex held: the callback stalled until HCOMM_TIMEOUT).

usage: torch_shim.py own|queue   (the launcher). Exit status 0: rank 0 passed
and no rank failed otherwise.
"""
import ctypes
import datetime
import os
import signal
import socket
import subprocess
import sys
import time

LIMIT_S = 5.0


def rank_main():
    import torch
    import torch.distributed as dist
    import hcomm_torch  # noqa: F401

    rank, case = int(os.environ["RANK"]), os.environ["HC_SHIM_CASE"]
    shim = ctypes.CDLL(os.environ["HC_TORCH_SHIM"])
    timeout = datetime.timedelta(seconds=30)
    dist.init_process_group("hcomm", init_method=os.environ["HC_SHIM_INIT"], rank=rank,
                            world_size=2, timeout=timeout)
    hc = dist.new_group([0, 1], backend="hcomm", timeout=timeout)
    n = 1 << 16  # 256 KiB: queued on the stream, not run inline
    if case == "own":
        # a group of its own: it is revoked afterwards
        t = torch.full((n,), 1.0 + rank)
        if rank == 0:
            shim.shim_revoke_after_test()
        work = hc._allreduce_compressed(t, "bf16", -1, 0)
        try:
            work.wait(timeout)
            err = None
        except RuntimeError as e:
            err = str(e)
        ok = err is None and bool((t == 1.5).all())
        detail = err or "average %r" % t[0].item()
    else:
        a, b, c = torch.ones(n), torch.ones(n), torch.ones(n)
        if rank == 1:
            time.sleep(1)  # rank 0's first allreduce is still running when it issues the second
            works = [hc.allreduce([x]) for x in (a, b, c)]
            for w in works:
                w.wait(timeout)
            return 0
        issued = []
        first = hc.allreduce([a])
        # runs on the stream's thread, issues on the group (its mutex)
        done = first.get_future().then(lambda fut: issued.append(hc.allreduce([c])))
        shim.shim_fail_host_func(1)  # this thread's next host function: the Completion's
        t0 = time.monotonic()
        second = hc.allreduce([b])
        waited = time.monotonic() - t0
        second.wait(timeout)
        done.wait()
        issued[0].wait(timeout)
        ok = waited < LIMIT_S and all(bool((x == 2).all()) for x in (a, b, c))
        detail = "issuing took %.2f s (limit %.1f)" % (waited, LIMIT_S)
    if rank == 0:
        print("rank 0: %s: %s: %s" % (case, "PASS" if ok else "FAIL", detail), flush=True)
        return 0 if ok else 1
    return 0


def launch(case):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, WORLD_SIZE="2", HC_SHIM_CASE=case,
               HC_SHIM_INIT="tcp://127.0.0.1:%d" % port)
    procs = [subprocess.Popen([sys.executable, __file__], env=dict(env, RANK=str(r)),
                              start_new_session=True) for r in range(2)]
    deadline = time.monotonic() + 90
    while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
        time.sleep(0.1)
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    codes = [p.returncode for p in procs]
    print("%s: exit codes %s" % (case, codes), flush=True)
    return 0 if codes[0] == 0 else 1


if __name__ == "__main__":
    if "RANK" in os.environ and "HC_SHIM_CASE" in os.environ:
        sys.exit(rank_main())
    sys.exit(launch(sys.argv[1]))
