"""Pendulum-v1 as a batched torch env: gymnasium's `PendulumEnv` dynamics, on the device."""

from __future__ import annotations

import math

import torch

from rltrain.envs.native.base import NativeVecEnv


def angle_normalize(x: torch.Tensor) -> torch.Tensor:
    """Wrap angles to [-pi, pi), as gymnasium's `angle_normalize` (floor-mod, like numpy's %)."""
    return torch.remainder(x + math.pi, 2 * math.pi) - math.pi


class Pendulum(NativeVecEnv):
    """Gymnasium's Pendulum-v1, `num_envs` at a time.

    Same constants (`g` is a keyword, default 10), Euler step with the speed clipped to +-8,
    reward `-(angle_normalize(th)^2 + 0.1 thdot^2 + 0.001 u^2)`, resets uniform in
    [-pi, pi] x [-1, 1], never terminates, 200-step time limit. State `[th, thdot]`;
    observation `[cos th, sin th, thdot]`. Actions `[N, 1]` are the algorithm's [-1, 1] values,
    clipped and rescaled to the torque range [-2, 2] as `GymVecEnv.to_env_action` does.
    """

    state_dim = 2
    obs_shape = (3,)
    action_kind = "box"
    action_dim = 1
    default_max_episode_steps = 200

    max_speed = 8.0
    max_torque = 2.0
    dt = 0.05
    m = 1.0
    l = 1.0  # noqa: E741 (gymnasium's name)

    def __init__(self, num_envs: int, device: torch.device | str = "cpu",
                 max_episode_steps: int | None = None, dtype: str | torch.dtype = "float32",
                 g: float = 10.0):
        super().__init__(num_envs, device, max_episode_steps, dtype)
        self.g = float(g)
        # the two terms of the angular acceleration, precomputed (same products as gymnasium)
        self._gravity_term = 3 * self.g / (2 * self.l)
        self._torque_term = 3.0 / (self.m * self.l**2)
        self._reset_high = torch.tensor([math.pi, 1.0], dtype=self.dtype, device=self.device)

    def sample_state(self, n: int) -> torch.Tensor:
        """Uniform in [-pi, pi] x [-1, 1], as `PendulumEnv.reset`."""
        u = torch.empty(n, 2, dtype=self.dtype, device=self.device)
        return u.uniform_(-1.0, 1.0, generator=self.generator).mul_(self._reset_high)

    def observe(self, state: torch.Tensor) -> torch.Tensor:
        """`[cos th, sin th, thdot]`."""
        th, thdot = state.unbind(1)
        return torch.stack((torch.cos(th), torch.sin(th), thdot), 1).to(torch.float32)

    def dynamics(self, state: torch.Tensor, action: torch.Tensor
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """`PendulumEnv.step` for every row, in fused ops; `action` in [-1, 1] is the torque / 2.

        GymVecEnv.to_env_action sends gymnasium u = -2 + (clip(a) + 1) * 2 as float32, which is
        exactly 2 clip(a); gymnasium's torque terms are float32 too (numpy's NEP 50 rules), so
        they are computed in float32 here as well, whatever the state's dtype.
        """
        th, thdot = state.unbind(1)
        a = action.reshape(-1).to(torch.float32).clamp(-1.0, 1.0)  # u = max_torque * a
        torque_acc = (a * (self._torque_term * self.max_torque)).to(self.dtype)
        a = a.to(self.dtype)
        # costs = angle_normalize(th)^2 + 0.1 thdot^2 + 0.001 u^2
        costs = torch.addcmul(angle_normalize(th).square(), thdot, thdot, value=0.1)
        costs = torch.addcmul(costs, a, a, value=0.001 * self.max_torque**2)
        # newthdot = clip(thdot + (3g/(2l) sin th + 3/(ml^2) u) dt, -8, 8); newth = th + newthdot dt
        acc = torch.add(torque_acc, torch.sin(th), alpha=self._gravity_term)
        newthdot = torch.add(thdot, acc, alpha=self.dt).clamp_(-self.max_speed, self.max_speed)
        newth = torch.add(th, newthdot, alpha=self.dt)
        terminated = torch.zeros_like(th, dtype=torch.bool)
        return torch.stack((newth, newthdot), 1), costs.neg_(), terminated
