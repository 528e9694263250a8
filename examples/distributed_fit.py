"""Data-parallel fit of a CPD kernel machine on torch.distributed (one process per core, GPU or machine).

Every process reads its own shard of the rows (chunk i of the files goes to process i mod world_size), accumulates
its part of every ALS core's normal equations, and ``all_reduce`` sums them before the identical core solve, so
every process ends with the same model. gloo is used on CPU, NCCL with ``--device cuda``.

One machine, two processes::

    torchrun --nproc_per_node=2 examples/distributed_fit.py --x X.npy --y y.npy --out model.pt

Two machines with 8 GPUs each (run on both; node 0's address is the rendezvous point)::

    torchrun --nnodes=2 --node_rank=0 --nproc_per_node=8 --master_addr=10.0.0.1 --master_port=29500 \\
        examples/distributed_fit.py --x /data/X.npy --y /data/y.npy --device cuda --out model.pt
    torchrun --nnodes=2 --node_rank=1 --nproc_per_node=8 --master_addr=10.0.0.1 --master_port=29500 \\
        examples/distributed_fit.py --x /data/X.npy --y /data/y.npy --device cuda --out model.pt

The files must be readable from every machine (a shared file system or one copy per machine). ``X.npy`` (N, D)
and ``y.npy`` (N,) are read memory-mapped, chunk by chunk; parquet files work the same way with
``ChunkedData.from_parquet``. Rank 0 writes the model (``--out``) and prints the fit time; ``--out-all`` makes
every rank write ``<out>.rank<k>`` (to check that they agree).
"""

from __future__ import annotations

import argparse
import json
import os
import time

import torch
import torch.distributed as dist

from tnbayes import CPDKernelMachine
from tnbayes.data import ChunkedData


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--x", required=True, help=".npy file of inputs, shape (N, D)")
    parser.add_argument("--y", required=True, help=".npy file of targets, shape (N,)")
    parser.add_argument("--out", required=True, help="where rank 0 saves the fitted model")
    parser.add_argument("--out-all", action="store_true", help="every rank saves <out>.rank<k>")
    parser.add_argument("--chunk-size", type=int, default=65536)
    parser.add_argument("--rank", type=int, default=10, help="CP rank")
    parser.add_argument("--num-basis", type=int, default=None)
    parser.add_argument("--lengthscale", type=float, nargs="+", default=None)
    parser.add_argument("--penalty", type=float, default=None)
    parser.add_argument("--noise-variance", type=float, default=None)
    parser.add_argument("--max-sweeps", type=int, default=10)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()

    dist.init_process_group("nccl" if args.device == "cuda" else "gloo")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    device = torch.device(args.device)
    if device.type == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
        torch.cuda.set_device(device)
    data = ChunkedData.from_npy(args.x, args.y, chunk_size=args.chunk_size).shard(rank, world_size)
    model = CPDKernelMachine(rank=args.rank, num_basis=args.num_basis, lengthscale=args.lengthscale,
                             penalty=args.penalty, noise_variance=args.noise_variance, max_sweeps=args.max_sweeps,
                             device=device, distributed=True)
    dist.barrier()
    start = time.perf_counter()
    model.fit(data)
    seconds = time.perf_counter() - start
    if args.out_all:
        model.save(f"{args.out}.rank{rank}")
    if rank == 0:
        model.save(args.out)
        print(json.dumps({"processes": world_size, "rows": model.n_train_, "fit_seconds": seconds,
                          "sweeps": len(model.sweep_objectives_), "objective": model.sweep_objectives_[-1]}),
              flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
