"""Data-parallel helpers on ``torch.distributed`` (no networking of our own).

A data-parallel fit runs the same script in every process (launched with ``torchrun``), each process passing
its own shard of the rows to ``fit``. Everything a fit accumulates over rows — the ALS normal equations, the
objective, scaling statistics — is summed across processes with ``all_reduce`` before the (identical) solve,
so every process ends with the same model. gloo serves CPU tensors, NCCL CUDA tensors; the process group is
the caller's (``torch.distributed.init_process_group``; ``torchrun`` supplies the rendezvous variables).

It belongs to no axis: the inference engines (ALS sums over rows) and the data layer call it.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

__all__ = ["all_gather_rows", "all_reduce_sum", "check_distributed", "collective_device", "process_rank",
           "world_size"]


def check_distributed(requested: bool) -> bool:
    """``requested`` after checking that a process group exists when it is True.

    Raises
    ------
    RuntimeError
        ``distributed=True`` without ``torch.distributed.init_process_group`` (torchrun alone does not call it).
    """
    if requested and not (dist.is_available() and dist.is_initialized()):
        raise RuntimeError(
            "distributed=True needs a torch.distributed process group: call "
            "torch.distributed.init_process_group('gloo') (CPU) or ('nccl') (GPU) in every process before fit, "
            "and launch the processes with torchrun. For a single-process fit leave distributed=False."
        )
    return bool(requested)


def world_size(distributed: bool) -> int:
    """Number of processes taking part (1 when not distributed)."""
    return dist.get_world_size() if distributed else 1


def process_rank(distributed: bool) -> int:
    """This process's rank (0 when not distributed)."""
    return dist.get_rank() if distributed else 0


def all_reduce_sum(tensor: torch.Tensor, distributed: bool) -> torch.Tensor:
    """Sum ``tensor`` over all processes in place (complex tensors as their real view); returns it."""
    if not distributed:
        return tensor
    device = collective_device()
    work = tensor if tensor.device == device else tensor.to(device)
    dist.all_reduce(torch.view_as_real(work) if work.is_complex() else work, op=dist.ReduceOp.SUM)
    if work is not tensor:
        tensor.copy_(work)
    return tensor


def collective_device() -> torch.device:
    """Where tensors must live for the default group's collectives: the current GPU for NCCL, else the CPU."""
    return torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")


def all_gather_rows(tensor: torch.Tensor, distributed: bool) -> torch.Tensor:
    """Concatenate every process's ``tensor`` (n_i, ...) along dim 0 in rank order (n_i may differ); the result
    is on ``tensor``'s device."""
    if not distributed:
        return tensor
    home, tensor = tensor.device, tensor.to(collective_device())
    size = torch.tensor([tensor.shape[0]], dtype=torch.long, device=tensor.device)
    sizes = [torch.zeros_like(size) for _ in range(dist.get_world_size())]
    dist.all_gather(sizes, size)
    longest = int(max(int(s) for s in sizes))
    padded = torch.zeros((longest, *tensor.shape[1:]), dtype=tensor.dtype, device=tensor.device)
    padded[: tensor.shape[0]] = tensor
    parts = [torch.empty_like(padded) for _ in sizes]
    dist.all_gather(parts, padded)
    return torch.cat([part[: int(n)] for part, n in zip(parts, sizes)]).to(home)
