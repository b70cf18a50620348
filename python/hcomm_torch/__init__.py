"""hcomm_torch: hcomm as a torch.distributed backend for CPU tensors.

Importing the package registers the backend "hcomm":

    import torch.distributed as dist
    import hcomm_torch  # noqa: F401
    dist.init_process_group("hcomm", init_method="tcp://10.0.0.1:29500",
                            rank=rank, world_size=world_size)

The hcomm unique id travels through the process group's store; the group's
timeout becomes its hcomm communicator's timeout.
"""
import atexit

import torch
import torch.distributed as dist

from . import _C

__all__ = ["ProcessGroupHcomm", "BACKEND", "hcomm_version", "hooks"]

BACKEND = "hcomm"
ProcessGroupHcomm = _C.ProcessGroupHcomm
hcomm_version = _C.hcomm_version


def _create_process_group(store, rank, size, timeout):
    """The creator torch calls for each group: collective over its ranks."""
    return _C.ProcessGroupHcomm(store, rank, size, timeout)


# Python's exit waits for the groups' queued work and its Futures' callbacks,
# which run on hcomm's stream threads and take the GIL: once Python finalizes,
# such a thread is ended mid-callback, and the process with it (abort).
atexit.register(_C._quiesce_all)

# register_backend refuses a name twice (a second import through another path)
if not hasattr(dist.Backend, BACKEND.upper()):
    dist.Backend.register_backend(BACKEND, _create_process_group)

from . import hooks  # noqa: E402 - hcomm_torch.hooks without an import of its own
