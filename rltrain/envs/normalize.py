"""Running observation normalization and reward scaling, as `VecEnv` wrappers with saved state.

On the CPU the per-step arithmetic outside the statistics' update runs in numpy on views of the
tensors, and one env's row folds in with a quarter fewer ops: at one env a step is a few dozen
tiny ops whose cost is torch's per-op dispatch (both wrappers over MountainCarContinuous: 210 ->
155 µs a step above the bare env, measured 2026-11-26 on a loaded 2-core machine). The results
are torch's bit for bit (the same IEEE operations in the same order;
`tests/envs/test_normalize.py` holds both paths to it); the fold itself stays in torch, whose
fused multiply-adds numpy cannot reproduce.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from rltrain.obs import Obs
from rltrain.types import EnvSpec, StepResult


def in_numpy(t: torch.Tensor, dtypes: tuple[torch.dtype, ...] = (torch.float32, torch.float64),
             ) -> bool:
    """Whether the per-step arithmetic on `t` runs in numpy (see the module): a CPU tensor of
    one of `dtypes` (numpy's product of another dtype is not torch's) that needs no grad (a
    user's batched env may return any float dtype, or tensors of a differentiable simulator)."""
    return t.device.type == "cpu" and t.dtype in dtypes and not t.requires_grad


class RunningMeanStd:
    """Streaming mean and variance (parallel-algorithm update of Chan et al.), float64."""

    def __init__(self, shape: tuple[int, ...], device: torch.device, count: float = 1e-4):
        self.mean = torch.zeros(shape, dtype=torch.float64, device=device)
        self.var = torch.ones(shape, dtype=torch.float64, device=device)
        self.count = count
        self.pending: RunningMeanStd | None = None
        """Data-parallel runs (`share`): what this rank added since the ranks last merged."""
        self._shared: tuple[torch.Tensor, torch.Tensor, float] | None = None

    def update(self, x: torch.Tensor) -> None:
        """Fold a batch `[B, *shape]` into the statistics."""
        if x.shape[0] == 1 and self.pending is None:  # one env (a quarter of the ops)
            self._fold_row(x[0].to(torch.float64))
            return
        b_var, b_mean = torch.var_mean(x.to(torch.float64), 0, correction=0)  # one pass, one op
        self._fold(b_mean, b_var, x.shape[0])
        if self.pending is not None:
            self.pending._fold(b_mean, b_var, x.shape[0])

    def _fold(self, b_mean: torch.Tensor, b_var: torch.Tensor, b_count: float) -> None:
        # mean' = mean + δ b/T;  var' = var n/T + b_var b/T + δ² n b/T²  (T = n + b): five ops
        # on new tensors (callers may hold the old ones, e.g. a saved state_dict)
        n, total = self.count, self.count + b_count
        delta = b_mean - self.mean
        self.mean = self.mean.add(delta, alpha=b_count / total)
        self.var = (self.var.mul(n / total).add_(b_var, alpha=b_count / total)
                    .addcmul_(delta, delta, value=n * b_count / total ** 2))
        self.count = total

    def _fold_row(self, row: torch.Tensor) -> None:
        """`_fold` of a batch of one row (mean `row`, variance 0), bit for bit: its b_var term
        adds exact zeros and its count factors are products with 1."""
        n, total = self.count, self.count + 1
        delta = row - self.mean
        self.mean = self.mean.add(delta, alpha=1 / total)
        self.var = self.var.mul(n / total).addcmul_(delta, delta, value=n / total ** 2)
        self.count = total

    def share(self) -> None:
        """Start data-parallel use: every rank holds these same statistics now, and from here
        on also counts what it adds itself (`pending`), for `merge`."""
        self._shared = (self.mean.clone(), self.var.clone(), self.count)
        self.pending = RunningMeanStd(tuple(self.mean.shape), self.mean.device, count=0.0)

    def merge(self, collective: Any) -> None:
        """Every rank's additions since the last merge folded, in rank order, into the shared
        statistics: afterwards all ranks hold the same statistics (Chan et al.'s combination)."""
        assert self.pending is not None and self._shared is not None, "merge() before share()"
        p = self.pending
        mine = torch.cat([torch.tensor([float(p.count)], dtype=torch.float64, device=p.mean.device),
                          p.mean.flatten(), p.var.flatten()])
        self.mean, self.var = self._shared[0].clone(), self._shared[1].clone()
        self.count = self._shared[2]
        n = p.mean.numel()
        for row in collective.gather_all(mine):
            count = float(row[0])
            if count > 0:
                self._fold(row[1:1 + n].view_as(p.mean), row[1 + n:].view_as(p.var), count)
        self.share()

    def state_dict(self) -> dict:
        """Plain-data state for checkpoints."""
        return {"mean": self.mean.cpu(), "var": self.var.cpu(), "count": float(self.count)}

    def load_state_dict(self, state: dict) -> None:
        """Restore from `state_dict()`."""
        self.mean = state["mean"].to(self.mean.device, torch.float64)
        self.var = state["var"].to(self.var.device, torch.float64)
        self.count = float(state["count"])
        if self.pending is not None:  # data-parallel: every rank loaded these same statistics
            self.share()


def normalized_entries(spec: EnvSpec) -> tuple[str, ...]:
    """The entries of a Dict / Tuple observation that `NormalizeObs` normalizes: float vectors
    only, never images (the CNN scales them) or categorical entries (one-hot)."""
    return tuple(e.key for e in spec.obs_entries if e.kind == "vector" and not e.pixels)


class NormalizeObs:
    """Normalizes `obs` and `final_obs` with running statistics (updated only while training);
    for Dict / Tuple observations, each `normalized_entries` entry with its own statistics."""

    def __init__(self, env, clip: float = 10.0, training: bool = True):
        self.env, self.clip, self.training = env, clip, training
        self.spec, self.device = env.spec, env.device
        self.keys = normalized_entries(env.spec)
        shapes = {e.key: e.obs_shape for e in env.spec.obs_entries}
        self.rms = RunningMeanStd(env.spec.obs_shape, env.device) if not self.keys else None
        self.entry_rms = {k: RunningMeanStd(shapes[k], env.device) for k in self.keys}

    def statistics(self) -> dict[str, RunningMeanStd]:
        """The running statistics by entry key ("" for a single-tensor observation)."""
        return self.entry_rms if self.keys else {"": self.rms}

    def normalize(self, obs: Obs) -> Obs:
        """Apply the current statistics to a batch of raw observations."""
        if not self.keys:
            return self._z(obs, self.rms)
        return {k: self._z(v, self.entry_rms[k]) if k in self.entry_rms else v
                for k, v in obs.items()}

    def _z(self, x: torch.Tensor, rms: RunningMeanStd) -> torch.Tensor:
        """(x − mean) / sqrt(var + 1e-8), clipped, float32 (on the CPU: in numpy, the same ops)."""
        if in_numpy(x):
            z = (x.numpy().astype(np.float64) - rms.mean.numpy()) * (
                1.0 / np.sqrt(rms.var.numpy() + 1e-8))
            return torch.from_numpy(np.clip(z, -self.clip, self.clip, out=z).astype(np.float32))
        z = (x.to(torch.float64) - rms.mean).mul_(torch.rsqrt(rms.var + 1e-8))
        return z.clamp_(-self.clip, self.clip).to(torch.float32)

    def _normalize_pair(self, obs: Obs, final_obs: Obs) -> tuple[Obs, Obs]:
        """`normalize` of both, computed as one stacked batch (a step's fixed cost, not twice);
        the two results share no elements."""
        if not self.keys:
            return tuple(self._z(torch.stack([obs, final_obs]), self.rms).unbind(0))
        pairs = {k: (self._z(torch.stack([v, final_obs[k]]), self.entry_rms[k]).unbind(0)
                     if k in self.entry_rms else (v, final_obs[k])) for k, v in obs.items()}
        return {k: p[0] for k, p in pairs.items()}, {k: p[1] for k, p in pairs.items()}

    def _update(self, obs: Obs) -> None:
        for key, rms in self.statistics().items():
            rms.update(obs[key] if key else obs)

    def reset(self, seed: int | None = None) -> Obs:
        obs = self.env.reset(seed)
        if self.training:
            self._update(obs)
        return self.normalize(obs)

    def step(self, action: torch.Tensor) -> StepResult:
        res = self.env.step(action)
        if self.training:
            self._update(res.obs)
        res.obs, res.final_obs = self._normalize_pair(res.obs, res.final_obs)
        return res

    def close(self) -> None:
        self.env.close()

    def state_dict(self) -> dict:
        """`{"obs_rms": statistics}`; per entry key for Dict observations."""
        if not self.keys:
            return {"obs_rms": self.rms.state_dict()}
        return {"obs_rms": {k: rms.state_dict() for k, rms in self.entry_rms.items()}}

    def load_state_dict(self, state: dict) -> None:
        if not self.keys:
            self.rms.load_state_dict(state["obs_rms"])
            return
        for k, rms in self.entry_rms.items():
            rms.load_state_dict(state["obs_rms"][k])


def running_statistics(env: Any) -> list[RunningMeanStd]:
    """The running statistics of every normalization wrapper of `env`, outermost first."""
    out: list[RunningMeanStd] = []
    layer = env
    while layer is not None:
        if isinstance(layer, NormalizeObs):
            out += list(layer.statistics().values())
        elif isinstance(layer, ScaleReward):
            out.append(layer.rms)
        layer = getattr(layer, "env", None)
    return out


def merge_statistics(env: Any, collective: Any) -> None:
    """Data-parallel runs: merge every rank's normalizer statistics (see `RunningMeanStd.merge`),
    so all ranks normalize alike; nothing for one process."""
    if collective.world.size > 1:
        for rms in running_statistics(env):
            rms.merge(collective)


class ScaleReward:
    """Divides rewards by the running std of the discounted return (as SB3's VecNormalize)."""

    def __init__(self, env, gamma: float, training: bool = True):
        self.env, self.gamma, self.training = env, gamma, training
        self.spec, self.device = env.spec, env.device
        self.rms = RunningMeanStd((), env.device)
        # each row's discounted return so far: public, a resume saves and restores it (envs/make.py)
        self.running_return = torch.zeros(env.spec.num_envs, dtype=torch.float64, device=env.device)

    def reset(self, seed: int | None = None) -> torch.Tensor:
        self.running_return.zero_()
        return self.env.reset(seed)

    def step(self, action: torch.Tensor) -> StepResult:
        res = self.env.step(action)
        if in_numpy(res.reward, (torch.float32,)):  # the same ops in numpy (see the module)
            return self._step_numpy(res)
        if self.training:
            self.running_return.mul_(self.gamma).add_(res.reward)
            self.rms.update(self.running_return)
            self.running_return.masked_fill_(res.terminated | res.truncated, 0.0)
        res.reward = (res.reward * torch.rsqrt(self.rms.var + 1e-8)).to(torch.float32)
        return res

    def _step_numpy(self, res: StepResult) -> StepResult:
        reward = res.reward.numpy()
        if self.training:
            ret = self.running_return.numpy()  # shares memory with `running_return`
            ret *= self.gamma
            ret += reward
            self.rms.update(self.running_return)
            ret[res.terminated.numpy() | res.truncated.numpy()] = 0.0
        scale = np.float32(1.0 / np.sqrt(float(self.rms.var) + 1e-8))  # torch: a float32 product
        res.reward = torch.from_numpy(reward * scale)
        return res

    def close(self) -> None:
        self.env.close()

    def state_dict(self) -> dict:
        inner = getattr(self.env, "state_dict", None)
        return {**(inner() if inner else {}), "ret_rms": self.rms.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        """Restore the return statistics (inner wrappers restore their own)."""
        self.rms.load_state_dict(state["ret_rms"])
