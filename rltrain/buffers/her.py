"""Hindsight experience replay (HER; Andrychowicz et al. 2017), as SB3's `HerReplayBuffer`
(`stable_baselines3/her/her_replay_buffer.py`): `algo.replay=her` for any off-policy algorithm
on a goal env.

A goal env (gymnasium-robotics' `GoalEnv`) observes a Dict with `achieved_goal` and
`desired_goal` entries (and usually `observation`), and gives `compute_reward(achieved_goal,
desired_goal, info)`, vectorized over a batch. The transitions are stored as `ReplayBuffer`
stores them (one tensor per entry); this class adds the episodes: per slot, the slot of its
episode's first transition (`ep_start`) and the episode's length (`ep_len`, 0 while the episode
runs or once the ring has overwritten any of its slots). A batched add writes the N env rows
in N consecutive slots, so a row's next transition is always N slots on (mod capacity): the
k-th transition of the episode starting at slot s is at `(s + k N) % capacity`.

Sampling, as SB3: uniform over the transitions of complete episodes only (a running episode's
are not sampled: none before the first episode ends); the first `int(her_ratio * batch_size)`
of the batch, `her_ratio = n_sampled_goal / (n_sampled_goal + 1)`, get a new desired goal (in
`obs` and `next_obs`), the `achieved_goal` of `next_obs` at a step of the same episode:
`future` (a step from this one to the last, this one included, as SB3), `final` (the last) or
`episode` (any); their reward is `compute_reward(next_obs achieved_goal, new goal, {})`. The
`terminated` flag is kept as stored (SB3 does not recompute it either). An episode ends at
`terminated` or `truncated` (both of which the loop passes); a truncation still bootstraps (only
`terminated` is stored).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from rltrain import obs as obs_ops
from rltrain.buffers.choice import HER_STRATEGIES, BadState
from rltrain.buffers.replay import ReplayBuffer
from rltrain.errors import UserError
from rltrain.types import TransitionBatch

GOAL_KEYS = ("achieved_goal", "desired_goal")
"""The entries a goal env's Dict observation must have (of one shape)."""

RewardFn = Callable[[np.ndarray, np.ndarray, Any], Any]
"""`compute_reward(achieved_goal [B, G], desired_goal [B, G], infos)` -> rewards [B]."""


def goal_reward(env: Any) -> RewardFn:
    """The `compute_reward` of the goal env under the rltrain `VecEnv` `env`: a batched env's
    own, or that of the first gymnasium env (of a sync vector env; an async one's first env is
    made once more here, from its factory). A one-line `UserError` where there is none."""
    layer, seen = env, 0
    while layer is not None and seen < 32:
        own = getattr(type(layer), "compute_reward", None)
        if callable(own):
            return layer.compute_reward
        venv = getattr(layer, "venv", None)
        if venv is not None:
            envs = getattr(venv, "envs", None)
            fns = getattr(venv, "env_fns", None)
            first = envs[0] if envs else (fns[0]() if fns else None)
            if first is not None and first.has_wrapper_attr("compute_reward"):
                return first.get_wrapper_attr("compute_reward")
            break
        layer, seen = getattr(layer, "env", None), seen + 1
    name = getattr(env, "name", type(env).__name__)
    raise UserError(f"algo.replay=her recomputes rewards with the env's compute_reward("
                    f"achieved_goal, desired_goal, info) (gymnasium-robotics' GoalEnv); env "
                    f"{name} has none")


class HerReplayBuffer(ReplayBuffer):
    """`ReplayBuffer` with episode bookkeeping and goal relabelling (module docstring)."""

    STATE: dict[str, tuple] = {
        **ReplayBuffer.STATE, "ep_start": ("tensor", "int", 1), "ep_len": ("tensor", "int", 1),
        "cur_start": ("tensor", "int", 1), "cur_len": ("tensor", "int", 1),
        "cur_lost": ("tensor", "", 1)}
    """The ring's fields, then per slot its episode's start and length, per env row the start,
    length so far and whether the ring overwrote the beginning of its running episode."""
    ROWS = (*ReplayBuffer.ROWS, "ep_start", "ep_len")
    RUNNING = ("cur_start", "cur_len", "cur_lost")
    """The fields of one entry per env row."""

    @classmethod
    def build(cls, spec: Any, cfg: Any, device: torch.device, obs_dtype: Any = None,
              ) -> HerReplayBuffer:
        """The empty replay for the goal env `spec`; a one-line error for any other env."""
        shapes = {e.key: e.obs_shape for e in spec.obs_entries}
        if any(k not in shapes for k in GOAL_KEYS) or (
                shapes["achieved_goal"] != shapes["desired_goal"]):
            seen = sorted(shapes) if shapes else f"one tensor {list(spec.obs_shape)}"
            raise UserError(f"algo.replay=her needs a goal env: Dict observations with "
                            f"achieved_goal and desired_goal entries of one shape; this env's "
                            f"are {seen}")
        if cfg.buffer_size < spec.num_envs:
            raise UserError(f"algo.buffer_size={cfg.buffer_size} must hold one transition of "
                            f"each of the env.num_envs={spec.num_envs} rows")
        replay = super().build(spec, cfg, device, obs_dtype)
        replay.configure(spec.num_envs, cfg.her_n_sampled_goal, cfg.her_goal_selection_strategy)
        return replay

    def __init__(self, *args: Any, **kwargs: Any):
        """`ReplayBuffer`'s arguments; one env row, SB3's defaults (see `configure`)."""
        super().__init__(*args, **kwargs)
        c, dev = self.capacity, self.device
        self.ep_start = torch.zeros(c, dtype=torch.long, device=dev)
        self.ep_len = torch.zeros(c, dtype=torch.long, device=dev)
        self.compute_reward: RewardFn | None = None
        self._valid: torch.Tensor | None = None  # sampleable slots, remade after a change
        self.configure(1, 4, "future")

    def configure(self, num_envs: int, n_sampled_goal: int, strategy: str) -> None:
        """`num_envs` rows per add (no episode running), `n_sampled_goal` relabelled
        transitions per real one, the goal selection `strategy`."""
        if strategy not in HER_STRATEGIES:
            raise ValueError(f"goal selection strategy {strategy!r}: one of {HER_STRATEGIES}")
        self.num_envs, self.n_sampled_goal, self.strategy = int(num_envs), n_sampled_goal, strategy
        self.her_ratio = 1 - (1.0 / (n_sampled_goal + 1))  # as SB3
        n, dev = self.num_envs, self.device
        self.cur_start = torch.zeros(n, dtype=torch.long, device=dev)
        self.cur_len = torch.zeros(n, dtype=torch.long, device=dev)
        self.cur_lost = torch.zeros(n, dtype=torch.bool, device=dev)
        self._row = torch.arange(n, device=dev)

    def bind_env(self, env: Any) -> None:
        """Take the `compute_reward` of the run's env (`runner/off_policy.make_replay`)."""
        self.compute_reward = goal_reward(env)

    @property
    def nbytes(self) -> int:
        """Bytes held by the preallocated storage (the ring's and the episode fields)."""
        return super().nbytes + 2 * 8 * self.capacity

    # ---- writing ------------------------------------------------------------------------------

    def add(self, obs: Any, action: torch.Tensor, reward: torch.Tensor, next_obs: Any,
            terminated: torch.Tensor, truncated: torch.Tensor | None = None,
            next_mask: torch.Tensor | None = None) -> None:
        """Append one transition per env row; `terminated` or `truncated` (a time limit) ends
        the rows' episodes."""
        n, c, pos = obs_ops.rows(obs), self.capacity, self.pos
        if n != self.num_envs:
            raise ValueError(f"HER replay of {self.num_envs} env rows got {n} rows")
        slots = (pos + self._row) % c
        old = self.ep_len[slots]
        if bool((old > 0).any()):  # a complete episode loses a slot: none of it is sampled
            hit = old > 0
            self._close(self.ep_start[slots][hit], old[hit], 0)
        # a running episode whose first slot is overwritten cannot be sampled when it ends
        self.cur_lost |= (self.cur_len > 0) & ((self.cur_start - pos) % c < n)
        super().add(obs, action, reward, next_obs, terminated, next_mask=next_mask)
        self.cur_start = torch.where(self.cur_len == 0, slots, self.cur_start)
        self.ep_start[slots] = self.cur_start
        self.ep_len[slots] = 0
        self.cur_len += 1
        ended = (terminated if truncated is None else terminated | truncated).to(self.device).bool()
        if bool(ended.any()):
            rows = ended.nonzero().squeeze(1)
            whole = rows[~self.cur_lost[rows]]
            self._close(self.cur_start[whole], self.cur_len[whole], None)
            self.cur_len[rows] = 0
            self.cur_lost[rows] = False

    def _close(self, starts: torch.Tensor, lengths: torch.Tensor, value: int | None) -> None:
        """Set `ep_len` of every slot of the episodes (`starts`, `lengths`) to `value` (None:
        their length, an ended episode; 0: none of it is sampled any more)."""
        if len(starts) == 0:
            return
        steps = torch.arange(int(lengths.max()), device=self.device)
        slots = (starts.unsqueeze(1) + steps * self.num_envs) % self.capacity
        inside = steps < lengths.unsqueeze(1)
        self.ep_len[slots[inside]] = (lengths.unsqueeze(1).expand_as(slots)[inside]
                                      if value is None else value)
        self._valid = None

    # ---- reading ------------------------------------------------------------------------------

    def sampleable(self) -> torch.Tensor:
        """The slots of complete episodes (remade only after an episode ended or was lost)."""
        if self._valid is None:
            self._valid = (self.ep_len[:self.size] > 0).nonzero().squeeze(1)
        return self._valid

    def sample(self, batch_size: int, generator: torch.Generator | None = None) -> TransitionBatch:
        """Uniform over the transitions of complete episodes; the first `int(her_ratio *
        batch_size)` with a new desired goal and its reward (module docstring)."""
        valid = self.sampleable()
        if len(valid) == 0:
            raise UserError("algo.replay=her samples complete episodes only, and none has "
                            "ended yet: raise algo.learning_starts above the env's episode "
                            "length")
        idx = valid[torch.randint(0, len(valid), (batch_size,), device=self.device,
                                  generator=generator)]
        masks = None if self.next_masks is None else self.next_masks[idx]
        obs, next_obs = obs_ops.take(self.obs, idx), obs_ops.take(self.next_obs, idx)
        rewards = self.rewards[idx]
        m = int(self.her_ratio * batch_size)  # as SB3: the first m are relabelled
        if m > 0:
            goals = self.goals(idx[:m], generator)
            obs["desired_goal"][:m] = goals
            next_obs["desired_goal"][:m] = goals
            rewards[:m] = self.rewards_for(next_obs["achieved_goal"][:m], goals)
        return TransitionBatch(obs, self.actions[idx], rewards, next_obs,
                               self.terminated[idx], masks)

    def goals(self, idx: torch.Tensor, generator: torch.Generator | None = None,
              ) -> torch.Tensor:
        """New desired goals for the transitions at slots `idx`: the achieved goal (of the next
        observation) at a step of the same episode the strategy picks."""
        start, length = self.ep_start[idx], self.ep_len[idx]
        if self.strategy == "final":
            step = length - 1
        else:
            first = (0 if self.strategy == "episode" else
                     ((idx - start) % self.capacity) // self.num_envs)  # this transition's step
            u = torch.rand(len(idx), dtype=torch.float64, device=self.device, generator=generator)
            step = torch.minimum(first + (u * (length - first)).long(), length - 1)
        return self.next_obs["achieved_goal"][(start + step * self.num_envs) % self.capacity]

    def rewards_for(self, achieved: torch.Tensor, goals: torch.Tensor) -> torch.Tensor:
        """`compute_reward(achieved, goals, infos)` (numpy in, as a GoalEnv takes them; empty
        infos, as SB3 without `copy_info_dict`) as a float32 tensor here."""
        if self.compute_reward is None:
            raise RuntimeError("HER replay without compute_reward: call bind_env(env) first")
        out = self.compute_reward(achieved.cpu().numpy(), goals.cpu().numpy(),
                                  [{} for _ in range(len(goals))])
        return torch.as_tensor(np.asarray(out, dtype=np.float32), device=self.device).reshape(-1)

    # ---- checkpoints --------------------------------------------------------------------------

    @classmethod
    def check_state(cls, state: dict[str, Any]) -> None:
        """`ReplayBuffer`'s checks and the episode fields: `size` rows per slot field, one per
        env row for the running episodes."""
        super().check_state(state)
        rows = len(state["cur_start"])
        for name in cls.RUNNING:
            if len(state[name]) != rows:
                raise BadState(name, f"has {len(state[name])} rows, expected {rows}")

    @classmethod
    def fit_rows(cls, state: dict[str, Any], spec: Any, obs_rows: Callable[..., dict]) -> dict:
        """`ReplayBuffer`'s, the slot fields and one running episode per env row."""
        rows = super().fit_rows(state, spec, obs_rows)
        rows.update({name: (state[name], (state["size"],)) for name in ("ep_start", "ep_len")})
        rows.update({name: (state[name], (spec.num_envs,)) for name in cls.RUNNING})
        return rows

    def state_dict(self) -> dict:
        """The ring's state and the episode bookkeeping."""
        n = self.size
        return {**super().state_dict(), "ep_start": self.ep_start[:n].cpu(),
                "ep_len": self.ep_len[:n].cpu(),
                **{name: getattr(self, name).cpu() for name in self.RUNNING}}

    def load_state_dict(self, state: dict) -> None:
        """Restore `state_dict()` (same env rows)."""
        if len(state["cur_start"]) != self.num_envs:
            raise UserError(f"saved HER replay has {len(state['cur_start'])} env rows, this run "
                            f"{self.num_envs}: resume with the same env.num_envs")
        super().load_state_dict(state)
        n = int(state["size"])
        self.ep_start[:n] = state["ep_start"].to(self.device, torch.long)
        self.ep_len[:n] = state["ep_len"].to(self.device, torch.long)
        for name in self.RUNNING:
            target = getattr(self, name)
            target.copy_(state[name].to(self.device, target.dtype))
        self._valid = None
