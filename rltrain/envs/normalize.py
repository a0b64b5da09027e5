"""Running observation normalization and reward scaling, as `VecEnv` wrappers with saved state."""

from __future__ import annotations

import torch

from rltrain.types import StepResult


class RunningMeanStd:
    """Streaming mean and variance (parallel-algorithm update of Chan et al.), float64."""

    def __init__(self, shape: tuple[int, ...], device: torch.device):
        self.mean = torch.zeros(shape, dtype=torch.float64, device=device)
        self.var = torch.ones(shape, dtype=torch.float64, device=device)
        self.count = 1e-4

    def update(self, x: torch.Tensor) -> None:
        """Fold a batch `[B, *shape]` into the statistics."""
        b_var, b_mean = torch.var_mean(x.to(torch.float64), 0, correction=0)  # one pass, one op
        b_count = x.shape[0]
        delta = b_mean - self.mean
        total = self.count + b_count
        self.mean = self.mean + delta * b_count / total
        m2 = self.var * self.count + b_var * b_count + delta.pow(2) * self.count * b_count / total
        self.var = m2 / total
        self.count = total

    def state_dict(self) -> dict:
        """Plain-data state for checkpoints."""
        return {"mean": self.mean.cpu(), "var": self.var.cpu(), "count": float(self.count)}

    def load_state_dict(self, state: dict) -> None:
        """Restore from `state_dict()`."""
        self.mean = state["mean"].to(self.mean.device, torch.float64)
        self.var = state["var"].to(self.var.device, torch.float64)
        self.count = float(state["count"])


class NormalizeObs:
    """Normalizes `obs` and `final_obs` with running statistics (updated only while training)."""

    def __init__(self, env, clip: float = 10.0, training: bool = True):
        self.env, self.clip, self.training = env, clip, training
        self.spec, self.device = env.spec, env.device
        self.rms = RunningMeanStd(env.spec.obs_shape, env.device)

    def normalize(self, obs: torch.Tensor) -> torch.Tensor:
        """Apply the current statistics to a batch of raw observations."""
        z = (obs.to(torch.float64) - self.rms.mean) / torch.sqrt(self.rms.var + 1e-8)
        return z.clamp(-self.clip, self.clip).to(torch.float32)

    def reset(self, seed: int | None = None) -> torch.Tensor:
        obs = self.env.reset(seed)
        if self.training:
            self.rms.update(obs)
        return self.normalize(obs)

    def step(self, action: torch.Tensor) -> StepResult:
        res = self.env.step(action)
        if self.training:
            self.rms.update(res.obs)
        res.obs, res.final_obs = self.normalize(res.obs), self.normalize(res.final_obs)
        return res

    def close(self) -> None:
        self.env.close()

    def state_dict(self) -> dict:
        return {"obs_rms": self.rms.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.rms.load_state_dict(state["obs_rms"])


class ScaleReward:
    """Divides rewards by the running std of the discounted return (as SB3's VecNormalize)."""

    def __init__(self, env, gamma: float, training: bool = True):
        self.env, self.gamma, self.training = env, gamma, training
        self.spec, self.device = env.spec, env.device
        self.rms = RunningMeanStd((), env.device)
        self._ret = torch.zeros(env.spec.num_envs, dtype=torch.float64, device=env.device)

    def reset(self, seed: int | None = None) -> torch.Tensor:
        self._ret.zero_()
        return self.env.reset(seed)

    def step(self, action: torch.Tensor) -> StepResult:
        res = self.env.step(action)
        if self.training:
            self._ret.mul_(self.gamma).add_(res.reward)
            self.rms.update(self._ret)
            self._ret.masked_fill_(res.terminated | res.truncated, 0.0)
        res.reward = (res.reward * torch.rsqrt(self.rms.var + 1e-8)).to(torch.float32)
        return res

    def close(self) -> None:
        self.env.close()

    def state_dict(self) -> dict:
        inner = getattr(self.env, "state_dict", None)
        return {**(inner() if inner else {}), "ret_rms": self.rms.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        """Restore the return statistics (inner wrappers restore their own)."""
        self.rms.load_state_dict(state["ret_rms"])
