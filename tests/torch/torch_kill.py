"""torch_kill.py - a rank of an "hcomm" process group dies (SIGKILL) or
hangs (SIGSTOP) in the middle of training: the others' next collective must
raise a RuntimeError that names the failure, within the group's timeout, and
each survivor must then exit.

usage: torch_kill.py kill|stop NRANKS TIMEOUT_S [FLOATS]   (the launcher)
FLOATS: the allreduce's size (default 65536, queued on the group's stream; 2
runs on the caller's thread, pg_inline.cpp). Each rank runs this file with
RANK set. Exit status 0: every survivor raised in time and exited.
"""
import datetime
import os
import signal
import socket
import subprocess
import sys
import time


def rank_main():
    import torch
    import torch.distributed as dist
    import hcomm_torch  # noqa: F401

    rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    how, limit = os.environ["HC_KILL_HOW"], float(os.environ["HC_KILL_TIMEOUT"])
    dist.init_process_group("hcomm", init_method=os.environ["HC_KILL_INIT"], rank=rank,
                            world_size=n, timeout=datetime.timedelta(seconds=limit))
    t = torch.ones(int(os.environ["HC_KILL_FLOATS"]))
    for _ in range(3):
        dist.all_reduce(t)
    victim = n - 1
    if rank == victim:
        os.kill(os.getpid(), signal.SIGKILL if how == "kill" else signal.SIGSTOP)
        return 0
    time.sleep(0.2)  # the victim is gone or stopped before the next call
    t0 = time.monotonic()
    try:
        for _ in range(1000):
            dist.all_reduce(t)
    except RuntimeError as e:
        waited = time.monotonic() - t0
        says = "hcomm" in str(e) and "failed" in str(e)
        # a stopped peer is seen at the timeout, a dead one at once (2 s: a loaded machine)
        bound = limit + 5 if how == "stop" else 2.0
        ok = says and waited < bound
        print("rank %d: %s: RuntimeError after %.2f s (bound %.1f): %s"
              % (rank, "PASS" if ok else "FAIL", waited, bound, e), flush=True)
        return 0 if ok else 1
    print("rank %d: FAIL: 1000 allreduces succeeded with rank %d %sed" % (rank, victim, how))
    return 1


def launch(how, n, limit, floats):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, WORLD_SIZE=str(n), HC_KILL_HOW=how, HC_KILL_TIMEOUT=str(limit),
               HC_KILL_FLOATS=str(floats),
               HC_KILL_INIT="tcp://127.0.0.1:%d" % port)
    procs = [subprocess.Popen([sys.executable, __file__], env=dict(env, RANK=str(r)),
                              start_new_session=True) for r in range(n)]
    survivors, deadline = procs[:-1], time.monotonic() + limit + 60
    while any(p.poll() is None for p in survivors) and time.monotonic() < deadline:
        time.sleep(0.1)
    for p in procs:  # the stopped victim, and any survivor that did not exit
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    codes = [p.returncode for p in survivors]
    ok = all(c == 0 for c in codes)
    print("%s of rank %d of %d: survivors' exit codes %s: %s"
          % (how, n - 1, n, codes, "PASS" if ok else "FAIL"), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    if "RANK" in os.environ and "HC_KILL_HOW" in os.environ:
        sys.exit(rank_main())
    sys.exit(launch(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]),
                    int(sys.argv[4]) if len(sys.argv) > 4 else 1 << 16))
