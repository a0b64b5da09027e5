"""`ProcessGroup`: the collectives of `rltrain/parallel/world.py` over torch.distributed (gloo on
CPU, nccl on CUDA), for the ranks of a torchrun job. A collective that fails because another
rank died or stopped answering becomes one `TrainingError` line naming this rank."""

from __future__ import annotations

import datetime
import os
from typing import Any

import torch
import torch.distributed as dist

from rltrain.errors import TrainingError
from rltrain.parallel.world import SOLO, Solo, World

TIMEOUT_ENV = "RLTRAIN_DIST_TIMEOUT"
"""Seconds a collective may wait for the other ranks (default 600) before the job fails."""


class ProcessGroup(Solo):
    """The ranks of a torchrun job, over torch.distributed (gloo on CPU, nccl on CUDA)."""

    def __init__(self, world: World, backend: str):
        self.world, self.dist = world, dist
        self.timeout = timeout = datetime.timedelta(
            seconds=float(os.environ.get(TIMEOUT_ENV, "600")))
        self.store: dist.Store | None = None  # set when this object started the group
        if not dist.is_initialized():
            # torchrun's store outlives a restarted group: under a prefix of this attempt, the
            # ranks never read the addresses of the attempt before (gloo: "Connection refused")
            store, rank, size = next(dist.rendezvous("env://", timeout=timeout))
            attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
            self.store = dist.PrefixStore(f"rltrain/{attempt}", store)
            dist.init_process_group(backend, store=self.store, rank=rank, world_size=size,
                                    timeout=timeout)
        self.device = (torch.device("cuda", world.local_rank) if backend == "nccl"
                       else torch.device("cpu"))

    def _all_reduce(self, tensor: torch.Tensor) -> torch.Tensor:
        try:
            self.dist.all_reduce(tensor)
        except RuntimeError as exc:  # a peer died or timed out: one line, not a gloo traceback
            raise lost_peer(self.world, exc) from exc
        return tensor

    def average_(self, tensors: list[torch.Tensor]) -> None:
        if not tensors:
            return
        flat = torch.cat([t.reshape(-1) for t in tensors]).to(self.device)
        self._all_reduce(flat).div_(self.world.size)
        offset = 0
        for t in tensors:
            t.copy_(flat[offset:offset + t.numel()].view_as(t))
            offset += t.numel()

    def mean(self, value: torch.Tensor) -> torch.Tensor:
        out = value.detach().to(self.device, torch.float64).clone()
        return (self._all_reduce(out) / self.world.size).to(value.device, value.dtype)

    def moments(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.moments_many([x])[0]

    def moments_many(self, xs: list[torch.Tensor]) -> list[tuple[torch.Tensor, torch.Tensor]]:
        if not xs:
            return []
        sums = torch.stack([torch.stack([x.detach().double().sum(), x.detach().double().pow(2).sum(),
                                         torch.tensor(float(x.numel()), dtype=torch.float64,
                                                      device=x.device)]) for x in xs])
        rows = self._all_reduce(sums.to(self.device)).tolist()
        out = []
        for x, (total, squares, n) in zip(xs, rows, strict=True):
            mean = total / n
            var = max(squares - n * mean * mean, 0.0) / max(n - 1.0, 1.0)
            out.append((torch.tensor(mean, dtype=x.dtype, device=x.device),
                        torch.tensor(var ** 0.5, dtype=x.dtype, device=x.device)))
        return out

    def any_(self, flag: bool) -> bool:
        return bool(self._all_reduce(torch.tensor([float(flag)], device=self.device)).item() > 0)

    def gather(self, obj: Any) -> list[Any] | None:
        out: list[Any] | None = [None] * self.world.size if self.world.is_main else None
        try:
            self.dist.gather_object(obj, out, dst=0)
        except RuntimeError as exc:
            raise lost_peer(self.world, exc) from exc
        return out

    def gather_all(self, tensor: torch.Tensor) -> list[torch.Tensor]:
        local = tensor.detach().to(self.device).contiguous()
        out = [torch.empty_like(local) for _ in range(self.world.size)]
        try:
            self.dist.all_gather(out, local)
        except RuntimeError as exc:
            raise lost_peer(self.world, exc) from exc
        return [t.to(tensor.device) for t in out]

    def broadcast(self, obj: Any) -> Any:
        box = [obj]
        try:
            self.dist.broadcast_object_list(box, src=0)
        except RuntimeError as exc:
            raise lost_peer(self.world, exc) from exc
        return box[0]

    def broadcast_(self, tensors: list[torch.Tensor]) -> None:
        if not tensors:
            return
        flat = torch.cat([t.detach().reshape(-1) for t in tensors]).to(self.device)
        try:
            self.dist.broadcast(flat, src=0)
        except RuntimeError as exc:
            raise lost_peer(self.world, exc) from exc
        offset = 0
        with torch.no_grad():
            for t in tensors:
                t.copy_(flat[offset:offset + t.numel()].view_as(t))
                offset += t.numel()

    def mean_metrics(self, metrics: dict[str, float]) -> dict[str, float]:
        rows: list[dict[str, float]] = [{} for _ in range(self.world.size)]
        try:
            self.dist.all_gather_object(rows, metrics)
        except RuntimeError as exc:
            raise lost_peer(self.world, exc) from exc
        keys = dict.fromkeys(k for row in rows for k in row)  # first-seen order
        return {k: sum(r[k] for r in rows if k in r) / sum(k in r for r in rows) for k in keys}

    def close(self) -> None:
        """Leave the job once every rank is done (a rank that tore down its connections first
        would cut off messages still on their way to rank 0).

        The ranks meet in torchrun's store, not in a gloo barrier: a rank that leaves a gloo
        barrier first and closes its connections can abort a peer whose side of the barrier is
        still in flight ("terminate called without an active exception", SIGABRT; gloo issue
        155). Through the store, no rank closes a connection before every rank's last
        collective has returned."""
        if not self.dist.is_initialized():
            return
        try:
            if self.store is None:  # a group started by someone else: its store is unknown
                self.dist.barrier()
            else:
                self.store.set(f"closed/{self.world.rank}", "1")
                self.store.wait([f"closed/{r}" for r in range(self.world.size)], self.timeout)
        except RuntimeError as exc:  # a peer died before closing: one line; still torn down
            raise lost_peer(self.world, exc) from exc
        finally:
            self.dist.destroy_process_group()

    def abort(self) -> None:
        if self.dist.is_initialized():
            self.dist.destroy_process_group()


def lost_peer(world: World, exc: Exception) -> TrainingError:
    """One line for a collective that failed because another rank died or stopped answering."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return TrainingError(f"rank {world.rank}: lost contact with the other ranks of the torchrun "
                         f"job ({text[:200]}); the last checkpoint, if any, is kept")


def join(world: World | None, device: torch.device) -> Solo:
    """The collectives of this process: `SOLO` outside torchrun or with one rank, else a
    `ProcessGroup` (nccl for CUDA devices, gloo otherwise)."""
    if world is None or world.size == 1:
        return SOLO
    return ProcessGroup(world, "nccl" if device.type == "cuda" else "gloo")
