"""torch_launch.py - runs torch_ops.py on N local ranks under one init method
(tcp://, env:// or file://) and says whether every rank passed.

usage: torch_launch.py NRANKS tcp|env|file [SECONDS]

Each rank is its own process (own process group, killed as a whole); the run
ends within SECONDS (default 120): ranks still alive then are killed and the
run fails. Exit status: 0 all ranks passed, 1 otherwise.
"""
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    nranks, how = int(sys.argv[1]), sys.argv[2]
    limit = float(sys.argv[3]) if len(sys.argv) > 3 else 120.0
    ops = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_ops.py")
    scratch = tempfile.mkdtemp(prefix="hcomm-torch.")
    env = dict(os.environ, WORLD_SIZE=str(nranks))
    if how == "tcp":
        env["HC_TEST_INIT"] = "tcp://127.0.0.1:%d" % free_port()
    elif how == "env":
        env.update(HC_TEST_INIT="env://", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    elif how == "file":
        env["HC_TEST_INIT"] = "file://" + os.path.join(scratch, "store")
    else:
        sys.exit("unknown init method %s (tcp, env or file)" % how)
    procs = [subprocess.Popen([sys.executable, ops], env=dict(env, RANK=str(r)),
                              start_new_session=True) for r in range(nranks)]
    deadline = time.monotonic() + limit
    codes = [None] * nranks
    while None in codes and time.monotonic() < deadline:
        codes = [p.poll() for p in procs]
        # one rank failed: the others may wait for it until their timeout
        if any(c not in (None, 0) for c in codes):
            deadline = min(deadline, time.monotonic() + 20)
        time.sleep(0.1)
    for r, p in enumerate(procs):
        if p.poll() is None:
            print("rank %d still running after the time limit: killed" % r, flush=True)
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    for name in os.listdir(scratch):
        os.unlink(os.path.join(scratch, name))
    os.rmdir(scratch)
    codes = [p.returncode for p in procs]
    ok = all(c == 0 for c in codes)
    print("%d ranks, %s init: %s (exit codes %s)" % (nranks, how, "PASS" if ok else "FAIL", codes))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
