"""CartPole-v1 as a batched torch env: gymnasium's `CartPoleEnv` dynamics, on the device."""

from __future__ import annotations

import math

import torch

from rltrain.envs.native.base import NativeVecEnv


class CartPole(NativeVecEnv):
    """Gymnasium's CartPole-v1, `num_envs` at a time.

    Same constants, explicit Euler integration, termination thresholds (|x| > 2.4,
    |theta| > 12 degrees), reward (1 every step including the terminating one, or gymnasium's
    `sutton_barto_reward`: 0, and -1 on termination), resets uniform in (-0.05, 0.05) and a
    500-step time limit. State `[x, x_dot, theta, theta_dot]`; actions are long indices
    `[N]` (1 pushes right, anything else left, as in gymnasium's `action == 1` test).
    """

    state_dim = 4
    obs_shape = (4,)
    action_kind = "discrete"
    action_dim = 2
    default_max_episode_steps = 500

    gravity = 9.8
    masscart = 1.0
    masspole = 0.1
    total_mass = masspole + masscart
    length = 0.5  # half the pole's length
    polemass_length = masspole * length
    force_mag = 10.0
    tau = 0.02  # seconds per step
    theta_threshold_radians = 12 * 2 * math.pi / 360
    x_threshold = 2.4
    reset_bound = 0.05

    def __init__(self, num_envs: int, device: torch.device | str = "cpu",
                 max_episode_steps: int | None = None, dtype: str | torch.dtype = "float32",
                 sutton_barto_reward: bool = False):
        super().__init__(num_envs, device, max_episode_steps, dtype)
        self.sutton_barto_reward = bool(sutton_barto_reward)
        # (step reward, terminating-step reward)
        self._rewards = (0.0, -1.0) if self.sutton_barto_reward else (1.0, 1.0)
        # gymnasium's expressions regrouped into constants (same values, fewer tensor ops);
        # 0-dim tensors where a Python number would be wrapped into a tensor on every step
        def const(value: float) -> torch.Tensor:
            return torch.tensor(value, dtype=self.dtype, device=self.device)

        f = self.force_mag / self.total_mass
        self._push = (const(f), const(-f))  # force / total_mass for action 1 and the others
        self._gravity = const(self.gravity)
        self._reward = tuple(const(r) for r in self._rewards)
        self._pml_per_mass = self.polemass_length / self.total_mass
        self._den_const = const(self.length * 4.0 / 3.0)
        self._den_cos2 = self.length * self.masspole / self.total_mass
        inf = float("inf")
        self._limits = torch.tensor([self.x_threshold, inf, self.theta_threshold_radians, inf],
                                    dtype=self.dtype, device=self.device)

    def sample_state(self, n: int) -> torch.Tensor:
        """Uniform in (-0.05, 0.05) per state variable, as `CartPoleEnv.reset`."""
        out = torch.empty(n, 4, dtype=self.dtype, device=self.device)
        return out.uniform_(-self.reset_bound, self.reset_bound, generator=self.generator)

    def observe(self, state: torch.Tensor) -> torch.Tensor:
        """The observation is the state itself (a float32 copy, so callers may modify it)."""
        return state.to(torch.float32, copy=True)

    def dynamics(self, state: torch.Tensor, action: torch.Tensor
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """`CartPoleEnv.step` for every row: its Euler step, regrouped into fused ops."""
        _, x_dot, theta, theta_dot = state.unbind(1)
        force = torch.where(action.reshape(-1) == 1, *self._push)  # force / total_mass
        costheta, sintheta = torch.cos(theta), torch.sin(theta)
        # temp = (force + polemass_length * theta_dot^2 * sin) / total_mass
        temp = torch.addcmul(force, theta_dot.square(), sintheta, value=self._pml_per_mass)
        # thetaacc = (g sin - cos temp) / (length (4/3 - masspole cos^2 / total_mass))
        num = torch.addcmul(sintheta * self._gravity, costheta, temp, value=-1.0)
        thetaacc = num / torch.sub(self._den_const, costheta.square(), alpha=self._den_cos2)
        xacc = torch.addcmul(temp, thetaacc, costheta, value=-self._pml_per_mass)
        # Euler: x += tau x_dot, x_dot += tau xacc, theta += tau theta_dot, ...
        next_state = torch.add(state, torch.stack((x_dot, xacc, theta_dot, thetaacc), 1),
                               alpha=self.tau)
        terminated = (next_state.abs() > self._limits).any(1)
        step_reward, end_reward = self._reward
        if self.sutton_barto_reward:
            return next_state, torch.where(terminated, end_reward, step_reward), terminated
        return next_state, step_reward.expand(terminated.shape).clone(), terminated  # all 1
