"""torch_exit.py - a rank leaves Python while its "hcomm" group's stream still
runs its work: an all_reduce queued with async_op=True whose Future's callback
(run on the stream's thread) takes a while. The callback must run to its end
before Python finalizes, and the process must exit cleanly: a thread that
takes the GIL once finalization began is ended by pthread_exit, which can
kill the process ("terminate called without an active exception") or the
callback.

usage: torch_exit.py NRANKS   (the launcher; each rank runs this file with
RANK set). Exit status 0: every rank printed its callback's end and exited 0.
"""
import os
import socket
import subprocess
import sys
import time


def rank_main():
    import torch
    import torch.distributed as dist
    import hcomm_torch  # noqa: F401

    rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("hcomm", init_method=os.environ["HC_EXIT_INIT"], rank=rank,
                            world_size=n)
    t = torch.ones(65536)

    def slow(fut):
        time.sleep(0.5)  # the main thread is in Python's exit by now
        print("rank %d: callback ended, sum %g" % (rank, fut.value()[0][0].item()), flush=True)

    dist.all_reduce(t, async_op=True).get_future().then(slow)
    return 0  # no wait, no destroy_process_group


def launch(n):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, WORLD_SIZE=str(n), HC_EXIT_INIT="tcp://127.0.0.1:%d" % port)
    procs = [subprocess.Popen([sys.executable, __file__], env=dict(env, RANK=str(r)),
                              stdout=subprocess.PIPE, text=True) for r in range(n)]
    ok = True
    for r, p in enumerate(procs):
        try:
            out, _ = p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
        sys.stdout.write(out)
        ended = ("rank %d: callback ended, sum %d" % (r, n)) in out
        print("rank %d: exit code %s, callback %s" % (r, p.returncode, "ended" if ended else "cut"))
        ok = ok and ended and p.returncode == 0
    print("exit with work on the stream: %s" % ("PASS" if ok else "FAIL"), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    if "RANK" in os.environ and "HC_EXIT_INIT" in os.environ:
        sys.exit(rank_main())
    sys.exit(launch(int(sys.argv[1])))
