"""The exported computation: raw env observation → the action the env receives.

`ExportedPolicy` folds in what `rltrain eval` does around `policy.act` (see `NormalizeObs` and
`GymVecEnv.to_env_action`): observation normalization with the checkpoint's frozen statistics,
the deterministic action, and for Box actions the clip to [-1, 1] and rescale to the env's bounds.
`torch_actions` runs those real pieces, so a check against it tests the folding too.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from rltrain import obs as obs_ops
from rltrain.envs.normalize import NormalizeObs
from rltrain.envs.vec_env import GymVecEnv, VecEnv
from rltrain.evaluation.episodes import PolicyStepper
from rltrain.nets.mode import eval_mode
from rltrain.obs import Obs
from rltrain.types import CHOICE_KINDS

OBS_EPS = 1e-8
"""Added to the variance before the square root, as `NormalizeObs.normalize` does."""


def find_layer(env: VecEnv, cls: type) -> object | None:
    """The first wrapper of type `cls` in the `env` chain (outermost first), or None."""
    layer: object | None = env
    while layer is not None:
        if isinstance(layer, cls):
            return layer
        layer = getattr(layer, "env", None)
    return None


class ExportedPolicy(nn.Module):
    """Observations `[B, *obs_shape]` → actions: int64 `[B]` (Discrete) or float32 `[B, A]` in
    env units (Box). Normalization statistics and action bounds are buffers. The input dtype is
    the traced example's: float32, uint8 for pixel policies or int64 for categorical observations
    (`export/command.py`), which the networks convert inside, as in training."""

    def __init__(self, policy: nn.Module, env: VecEnv, masked: bool = False):
        super().__init__()
        self.policy = policy
        self.recurrent = bool(getattr(policy, "recurrent", False))
        self.masked = masked
        gym_env = find_layer(env, GymVecEnv)
        assert isinstance(gym_env, GymVecEnv), "export needs a gymnasium-backed VecEnv"
        self.discrete = gym_env.spec.action_kind in CHOICE_KINDS  # int64 actions, compared exactly
        start = getattr(gym_env.venv.single_action_space, "start", None)  # (Multi)Discrete's
        self.register_buffer("action_start", torch.as_tensor(
            start if gym_env.spec.action_kind in ("discrete", "multi_discrete")
            and start is not None else 0, dtype=torch.int64))
        entries = env.spec.obs_entries  # Dict / Tuple: one input per entry, in this order
        self.keys = [e.key for e in entries]
        # int64 inputs, one-hot in the network: categorical observations or entries
        self.categorical = ([bool(e.obs_nvec) for e in entries] if entries
                            else [bool(env.spec.obs_nvec)])
        norm = find_layer(env, NormalizeObs)
        self.normalize = isinstance(norm, NormalizeObs)
        self.clip = float(norm.clip) if isinstance(norm, NormalizeObs) else 0.0
        stats = norm.statistics() if isinstance(norm, NormalizeObs) else {}
        self.normalized = [i for i, key in enumerate(self.keys or [""]) if key in stats]
        for i, key in enumerate(self.keys or [""]):  # obs_mean / obs_std, or obs_mean_<i> ...
            suffix = f"_{i}" if self.keys else ""
            shape = entries[i].obs_shape if entries else gym_env.spec.obs_shape
            mean = stats[key].mean if key in stats else torch.zeros(shape)
            var = stats[key].var if key in stats else torch.ones(shape)
            self.register_buffer(f"obs_mean{suffix}", mean.detach().cpu().to(torch.float32))
            self.register_buffer(f"obs_std{suffix}",
                                 torch.sqrt(var.detach().cpu().double() + OBS_EPS).float())
        low, half_range, bounded = _action_bounds(gym_env)
        self.register_buffer("action_low", low)
        self.register_buffer("action_half_range", half_range)
        self.register_buffer("action_bounded", bounded)

    def forward(self, *inputs: torch.Tensor):
        """The deterministic env action for each raw observation of the batch: the observation
        (for Dict / Tuple observations one input per entry, in `keys` order). A recurrent
        policy also takes its state `[L, B, D]` (zeros at an episode's start) and returns
        (action, next state); a masked one takes the bool action mask `[B, n]` last."""
        n_obs = len(self.keys) or 1
        parts, extra = inputs[:n_obs], inputs[n_obs:]
        xs = [self._entry(i, part) for i, part in enumerate(parts)]
        x = dict(zip(self.keys, xs, strict=True)) if self.keys else xs[0]
        mask = extra[-1] if self.masked else None
        if self.recurrent:
            action, state = self.policy.export_step(x, extra[0], mask)
            return self._env_action(action), state
        if mask is None:
            return self._env_action(self.policy.act(x, deterministic=True))
        return self._env_action(self.policy.act(x, deterministic=True, action_mask=mask))

    def _entry(self, i: int, obs: torch.Tensor) -> torch.Tensor:
        """Input `i` as the network takes it: int64 (categorical) or float32, normalized with
        the frozen statistics where the run normalized it."""
        x = obs.long() if self.categorical[i] else obs.to(torch.float32)
        if i in self.normalized:
            suffix = f"_{i}" if self.keys else ""
            mean, std = getattr(self, f"obs_mean{suffix}"), getattr(self, f"obs_std{suffix}")
            x = ((x - mean) / std).clamp(-self.clip, self.clip)
        return x

    def _env_action(self, action: torch.Tensor) -> torch.Tensor:
        if self.discrete:
            return action.to(torch.int64) + self.action_start
        scaled = self.action_low + (action.clamp(-1.0, 1.0) + 1.0) * self.action_half_range
        return torch.where(self.action_bounded, scaled, action)


def _action_bounds(env: GymVecEnv) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(low, half range, bounded) of a Box action space as float32/bool tensors `[A]`;
    unbounded dimensions pass through (low 0, half range 1), as in `GymVecEnv.to_env_action`."""
    space = env.venv.single_action_space
    if env.spec.action_kind in CHOICE_KINDS:
        return torch.zeros(0), torch.zeros(0), torch.zeros(0, dtype=torch.bool)
    low, high = space.low.astype(np.float64), space.high.astype(np.float64)
    bounded = np.isfinite(low) & np.isfinite(high)
    half = np.where(bounded, (high - low) / 2.0, 1.0)
    return (torch.as_tensor(np.where(bounded, low, 0.0), dtype=torch.float32),
            torch.as_tensor(half, dtype=torch.float32), torch.as_tensor(bounded))


@torch.no_grad()
def torch_actions(policy: nn.Module, env: VecEnv, obs: np.ndarray | dict[str, np.ndarray],
                  state: torch.Tensor | None = None, mask: np.ndarray | None = None):
    """What `rltrain eval` sends to the env for raw observations `obs`: the env's own
    normalizer, the torch policy (with the action `mask` when given, as evaluation's
    `PolicyStepper` passes it), and `GymVecEnv.to_env_action` for Box actions. A recurrent
    policy steps from `state` (evaluation's own `act_step`): returns (actions, next state)."""
    gym_env = find_layer(env, GymVecEnv)
    norm = find_layer(env, NormalizeObs)
    assert isinstance(gym_env, GymVecEnv)
    spec = gym_env.spec

    def tensor(value: np.ndarray, categorical: bool) -> torch.Tensor:
        return torch.as_tensor(value, dtype=torch.int64 if categorical else torch.float32,
                               device=gym_env.device)

    if spec.obs_entries:  # Dict / Tuple: a dict of entries
        x: Obs = {e.key: tensor(obs[e.key], bool(e.obs_nvec)) for e in spec.obs_entries}
    else:
        x = tensor(obs, bool(spec.obs_nvec))
    if isinstance(norm, NormalizeObs):
        x = norm.normalize(x)
    rows = obs_ops.rows(x)
    stepper = PolicyStepper(policy, rows, gym_env.device)
    if state is not None:
        stepper.state, stepper.starts = state, torch.zeros(rows, dtype=torch.bool)
    with eval_mode(policy):  # as evaluation runs it, and the export was traced
        action = stepper(x, True, None if mask is None else torch.as_tensor(mask))
    state = stepper.state if state is not None else None
    # Box: rescaled; (Multi)Discrete: its start added; MultiBinary: as the env takes it
    out = gym_env.to_env_action(action)
    return out if state is None else (out, state.cpu().numpy())
