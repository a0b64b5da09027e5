"""One random stream per seed: each seed of a batch draws what its single-seed run would draw.

A single-seed run draws from the process-wide generators (torch, numpy, python), seeded with
its seed when its Runner is built. A batch keeps, for each seed, the state those generators had
right after that seed's Runner was built, and draws that seed's noise and minibatch orders from
it; whatever runs for one seed alone (its evaluation, its checkpoint's saved RNG state) runs with
that seed's state swapped into the process-wide generators (`as_global`).

A single run on a GPU draws its noise, minibatch orders and replay indices from the GPU's
generator (every draw is made on the training device), so each seed's stream is a generator on
the training device, holding that device's state; the rest of the process-wide state (the CPU's
torch generator too, on a GPU) is kept beside it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from rltrain.checkpoint import format as checkpoint


class SeedStreams:
    """The random state of each seed of a batch (captured in seed order by `capture()`), drawn
    on `device`, the batch's training device; the draws of `algos/draws.py` `Draws`, with a
    leading seed dimension."""

    def __init__(self, device: torch.device | str = "cpu") -> None:
        self.device = torch.device(device)
        if self.device.type == "cuda" and self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())
        self.generators: list[torch.Generator] = []
        """Each seed's generator on `device`."""
        self._host: list[dict[str, Any]] = []  # the rest of each seed's process-wide state

    def _own(self, state: dict[str, Any]) -> torch.Tensor:
        """The training device's generator state within a process-wide `rng_state()`."""
        return state["torch"] if self.device.type == "cpu" else state["cuda"][self.device.index]

    def _with_own(self, state: dict[str, Any], own: torch.Tensor) -> dict[str, Any]:
        """`state` with the training device's generator state replaced by `own`."""
        if self.device.type == "cpu":
            return {**state, "torch": own}
        cuda = list(state["cuda"])
        cuda[self.device.index] = own
        return {**state, "cuda": cuda}

    def capture(self) -> None:
        """Append the process-wide state as the next seed's (call right after building it)."""
        state = checkpoint.rng_state()
        gen = torch.Generator(device=self.device)
        gen.set_state(self._own(state))
        self.generators.append(gen)
        self._host.append(state)

    def drop(self, k: int) -> None:
        """Forget seed k (it left the batch)."""
        del self.generators[k], self._host[k]

    def draw(self, kind: str, shape: torch.Size | tuple[int, ...]) -> torch.Tensor:
        """`[S, *shape]`: each seed's uniform [0, 1) (`kind` "uniform") or standard normal
        ("normal") draws from its own generator, as `rand_like`/`randn_like` would give it."""
        fn = torch.rand if kind == "uniform" else torch.randn
        return torch.stack([fn(tuple(shape), generator=g, device=self.device)
                            for g in self.generators])

    def normal(self, shape: torch.Size | tuple[int, ...]) -> torch.Tensor:
        """`[S, *shape]` standard normal draws, each seed's from its own generator."""
        return self.draw("normal", shape)

    def uniform(self, shape: torch.Size | tuple[int, ...]) -> torch.Tensor:
        """`[S, *shape]` uniform [0, 1) draws, each seed's from its own generator."""
        return self.draw("uniform", shape)

    def like(self, kind: str, t: torch.Tensor) -> torch.Tensor:
        """Draws shaped like `t` `[S, ...]` ("normal" or "uniform"), seed k's `[...]` from its
        own generator, as its single run's `randn_like` / `rand_like` of `t[k]` gives them."""
        return self.draw(kind, t.shape[1:])

    def randint(self, high: int, shape: torch.Size | tuple[int, ...]) -> torch.Tensor:
        """`[S, *shape]` integers in [0, high), each seed's from its own generator."""
        return torch.stack([torch.randint(0, high, tuple(shape), generator=g, device=self.device)
                            for g in self.generators])

    def choice(self, masks: torch.Tensor) -> torch.Tensor:
        """`[S, N]`: one index per row of each seed's bool `masks[k]` `[N, n]`, uniform among its
        True entries, from that seed's generator."""
        return torch.stack([torch.multinomial(m.float(), 1, generator=g).squeeze(-1)
                            for m, g in zip(masks, self.generators, strict=True)])

    def randperm(self, n: int, active: list[bool]) -> torch.Tensor:
        """`[S, n]`: a permutation per seed; a seed not `active` draws nothing (identity)."""
        return torch.stack([torch.randperm(n, generator=g, device=self.device) if on else
                            torch.arange(n, device=self.device)
                            for g, on in zip(self.generators, active, strict=True)])

    @contextlib.contextmanager
    def as_global(self, k: int) -> Iterator[None]:
        """Seed k's state in the process-wide generators meanwhile (and kept afterwards)."""
        outside = checkpoint.rng_state()
        checkpoint.set_rng_state(self._with_own(self._host[k], self.generators[k].get_state()))
        try:
            yield
        finally:
            state = checkpoint.rng_state()
            self.generators[k].set_state(self._own(state))
            self._host[k] = state
            checkpoint.set_rng_state(outside)
