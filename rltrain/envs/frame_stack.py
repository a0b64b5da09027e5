"""`env.frame_stack=K` for vector observations: the last K observations side by side, a cheap
alternative to a recurrent policy on partially observed tasks (`CartPoleNoVel-v1`, ...).

Pixel observations are stacked by the Atari preprocessing (`env.atari.frame_stack`) instead.
"""

from __future__ import annotations

import dataclasses

import torch

from rltrain.types import StepResult


class VectorFrameStack:
    """Observations `[N, K * D]`: each row's last K observations `[D]`, oldest first, on the
    device. After a row's reset its stack is zeros but for the newest slot; the `final_obs` of a
    row that ended is the stack of its own episode (the final observation newest)."""

    def __init__(self, env, k: int):
        self.env, self.k, self.device = env, int(k), env.device
        (self.dim,) = env.spec.obs_shape
        self.spec = dataclasses.replace(env.spec, obs_shape=(self.k * self.dim,),
                                        obs_nvec=env.spec.obs_nvec * self.k)  # () stays ()
        self._stack: torch.Tensor | None = None

    def reset(self, seed: int | None = None) -> torch.Tensor:
        obs = self.env.reset(seed)
        self._stack = torch.cat([obs.new_zeros((obs.shape[0], (self.k - 1) * self.dim)), obs], 1)
        return self._stack.clone()

    def step(self, action: torch.Tensor) -> StepResult:
        assert self._stack is not None, "reset() before step()"
        res = self.env.step(action)
        final = torch.cat([self._stack[:, self.dim:], res.final_obs], dim=1)
        obs = final.clone()
        done = res.terminated | res.truncated
        if bool(done.any()):  # a new episode sees none of the previous one's observations
            obs[done] = 0
            obs[done, -self.dim:] = res.obs[done]
        self._stack = obs
        res.obs, res.final_obs = obs.clone(), final
        return res

    def close(self) -> None:
        self.env.close()
