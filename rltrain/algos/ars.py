"""ARS: Augmented Random Search (Mania et al. 2018, "Simple random search provides a competitive
approach to reinforcement learning"), as SB3-contrib's `ARS`, on the on-policy loop unchanged.

A generation draws `n_delta` directions δ ~ N(0, I) in weight space and scores the 2 x `n_delta`
candidates θ + σδ and θ − σδ by whole episodes (`n_eval_episodes` each). Every env row runs one
candidate's episode at a time: when a row begins an episode (the loop's `episode_starts`, given
to algorithms with `recurrent = True`) it takes the next episode not yet handed out; the loop's
rollouts are one vector step (`n_steps=1`), and each `update` adds that step's rewards to the
rows' running returns and closes the episodes that ended (the batch's `rewards` and `dones`).
When every episode of a generation is scored, θ steps at once (`ars_step`) and the next episode
to begin draws the next generation. A row that begins an episode when none is left to hand out
runs θ itself, unscored, until its episode ends (`train/unscored_fraction`): no such steps when
`env.num_envs` divides 2 x n_delta x n_eval_episodes and the episodes are equally long (one env,
as SB3-contrib, never has any).
"""

from __future__ import annotations

from typing import Any

import torch
from torch.nn.utils import parameters_to_vector, vector_to_parameters

from rltrain import obs as obs_ops
from rltrain.algos.base import on_policy_lr
from rltrain.algos.configs.ars import ARSConfig
from rltrain.algos.draws import Draws
from rltrain.errors import UserError
from rltrain.nets.ars_policy import ARSPolicy
from rltrain.nets.spec import resolve_nets
from rltrain.parallel.world import SOLO, Solo
from rltrain.types import EnvSpec, Metrics, RolloutBatch

FREE, THETA = -2, -1
"""A row's `row_slot` when it is between episodes (its next one begins at the next `act`), and
while it runs θ itself, unscored; otherwise the episode slot it runs (>= 0)."""
WAITING, RUNNING, SCORED = 0, 1, 2
"""A slot's `slot_status`. Slot s is episode s % n_eval_episodes of candidate c = s //
n_eval_episodes: θ + σδ_c for c < n_delta, θ − σδ_(c − n_delta) for the others (SB3-contrib's
order)."""


def ars_step(theta: torch.Tensor, deltas: torch.Tensor, plus: torch.Tensor, minus: torch.Tensor,
             n_top: int, lr: float) -> tuple[torch.Tensor, Metrics]:
    """One ARS step: of the directions δ_k (`deltas` [n_delta, P], unscaled) keep the `n_top`
    with the largest max(r+_k, r−_k) (ties: the lower k first), then
        θ ← θ + lr / (n_top · σ_R + 1e-6) · Σ_k (r+_k − r−_k) δ_k
    with σ_R the standard deviation of the 2·n_top kept returns (SB3-contrib's 1e-6 keeps
    σ_R = 0, equal returns, finite: every difference is 0 then, and so is the step).
    Returns (new θ, its metrics)."""
    top = torch.maximum(plus, minus)
    kept = torch.argsort(top, descending=True, stable=True)[:n_top]
    plus, minus = plus[kept], minus[kept]
    return_std = torch.cat([plus, minus]).std()
    step_size = lr / (n_top * return_std + 1e-6)
    new = theta + step_size * ((plus - minus) @ deltas[kept])
    return new, {"train/step_size": float(step_size), "train/return_std": float(return_std)}


class ARS:
    """ARS on rows of candidates (see the module's docstring); `policy` is θ (eval, export)."""

    recurrent = True
    """It takes the loop's episode starts (it has no memory): a row changes candidate only when
    an episode begins, and a begun episode it did not see end is one a resume restarted."""

    def __init__(self, cfg: ARSConfig, spec: EnvSpec, device: torch.device | str = "cpu"):
        self.cfg, self.spec, self.device = cfg, spec, torch.device(device)
        self.policy = ARSPolicy(resolve_nets(cfg, spec, ortho=cfg.ortho_init).actor, spec)
        self.policy.to(self.device).requires_grad_(False)
        if cfg.zero_policy:
            for p in self.policy.parameters():
                p.zero_()
        self.draws: Any = Draws(self.device)
        self._collective: Solo = SOLO
        n, slots, long = spec.num_envs, cfg.episodes_per_generation, torch.long
        self.deltas: torch.Tensor | None = None
        """The generation's directions [n_delta, P] (unscaled); None until its first episode."""
        self.slot_status = torch.zeros(slots, dtype=long, device=self.device)
        self.slot_return = torch.zeros(slots, dtype=torch.float64, device=self.device)
        self.slot_length = torch.zeros(slots, dtype=long, device=self.device)
        self.row_slot = torch.full((n,), FREE, dtype=long, device=self.device)
        self.row_return = torch.zeros(n, dtype=torch.float64, device=self.device)
        self.row_length = torch.zeros(n, dtype=long, device=self.device)
        self.counters = {"generations": 0, "scored_steps": 0, "unscored_steps": 0}
        self.last: Metrics = {"train/step_size": 0.0, "train/return_std": 0.0}
        """The latest step's metrics (0 before the first generation ends)."""
        self._weights: torch.Tensor | None = None  # each row's flat weights, until rows change

    @property
    def collective(self) -> Solo:
        """One process only: ranks would each score their own candidates and move θ apart."""
        return self._collective

    @collective.setter
    def collective(self, value: Solo) -> None:
        if value.world.size > 1:
            raise UserError("algo=ars trains in one process (a generation's candidates and its "
                            "step are one population's); under torchrun use PPO, A2C or TRPO, "
                            "or more envs (env.num_envs) or seeds (num_seeds) in one process")
        self._collective = value

    @torch.no_grad()
    def act(self, obs: torch.Tensor, action_mask: torch.Tensor | None = None,
            episode_starts: torch.Tensor | None = None,
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(action, 0, 0) `[N]`: each row acts with its candidate's weights. Rows between
        episodes take the next episodes to run, in row order; a row told that an episode begins
        while its own was still running (a resume that restarted the episodes) hands that
        episode back, unscored."""
        if episode_starts is not None:
            cut = episode_starts & (self.row_slot != FREE)
            if bool(cut.any()):
                for row in cut.nonzero().flatten().tolist():
                    self._end_episode(row, scored=False)
        free = (self.row_slot == FREE).nonzero().flatten().tolist()
        for row in free:
            self._begin_episode(row)
        if free or self._weights is None:
            self._weights = self._row_weights()
        action = self.policy.act_rows(obs, self._weights, action_mask)
        zeros = torch.zeros(self.spec.num_envs, device=self.device)
        return action, zeros, zeros

    def value(self, obs: torch.Tensor, episode_starts: torch.Tensor | None = None) -> torch.Tensor:
        """0 for every row: ARS has no critic (with one-step rollouts the batch's `returns` are
        then the rewards; ARS reads `batch.rewards` itself)."""
        return torch.zeros(obs_ops.rows(obs), device=self.device)

    def update(self, batch: RolloutBatch, progress_remaining: float = 1.0) -> Metrics:
        """Add one vector step's rewards to the rows' episodes, score the episodes that ended,
        and step θ when the generation's last one did; returns the latest step's metrics."""
        n = self.spec.num_envs
        if batch.rewards is None or batch.dones is None or batch.rewards.shape[0] != n:
            raise ValueError(f"ARS's update takes one vector step of {n} rows with its rewards "
                             f"and dones (algo.n_steps=1)")
        self.row_return += batch.rewards.to(torch.float64)
        self.row_length += 1
        for row in batch.dones.nonzero().flatten().tolist():
            self._end_episode(row, scored=True)
        lr = on_policy_lr(self.cfg, progress_remaining)
        if self.deltas is not None and bool((self.slot_status == SCORED).all()):
            self._step(lr)
        return self.metrics(lr)

    def _begin_episode(self, row: int) -> None:
        """`row` runs the lowest slot still waiting (drawing a new generation when none is
        open), or θ when every slot is handed out."""
        if self.deltas is None:  # the previous generation stepped θ: draw the next one
            self.deltas = self.draws.normal((self.cfg.n_delta, self.policy.size))
            self.slot_status.zero_()
        waiting = (self.slot_status == WAITING).nonzero().flatten()
        slot = int(waiting[0]) if waiting.numel() else THETA
        if slot >= 0:
            self.slot_status[slot] = RUNNING
        self.row_slot[row] = slot
        self.row_return[row], self.row_length[row] = 0.0, 0

    def _end_episode(self, row: int, scored: bool) -> None:
        """`row`'s episode is over: its slot keeps the return and length (`scored`), or waits
        to be run again (an episode cut by a restart); the row is between episodes."""
        slot, length = int(self.row_slot[row]), int(self.row_length[row])
        if slot >= 0 and scored:
            self.slot_return[slot], self.slot_length[slot] = self.row_return[row], length
            self.slot_status[slot] = SCORED
            self.counters["scored_steps"] += length
        else:
            if slot >= 0:
                self.slot_status[slot] = WAITING
            self.counters["unscored_steps"] += length
        self.row_slot[row] = FREE
        self.row_return[row], self.row_length[row] = 0.0, 0
        self._weights = None

    def _step(self, lr: float) -> None:
        """θ's step from the generation's scores: each candidate's return summed over its
        episodes, plus `alive_bonus_offset` per step (SB3-contrib's)."""
        cfg = self.cfg
        shape = (2 * cfg.n_delta, cfg.n_eval_episodes)
        returns = (self.slot_return.view(shape).sum(1)
                   + cfg.alive_bonus_offset * self.slot_length.view(shape).sum(1))
        theta = parameters_to_vector(self.policy.parameters())
        returns = returns.to(theta.dtype)  # float32, as SB3-contrib's candidate returns
        new, self.last = ars_step(theta, self.deltas, returns[:cfg.n_delta],
                                  returns[cfg.n_delta:], cfg.top, lr)
        vector_to_parameters(new, self.policy.parameters())
        self.deltas, self._weights = None, None
        self.counters["generations"] += 1

    def _row_weights(self) -> torch.Tensor:
        """Each row's flat weights `[N, P]`: θ ± σδ of its candidate, θ itself for the others."""
        theta = parameters_to_vector(self.policy.parameters())
        n = self.spec.num_envs
        if self.deltas is None:
            return theta.expand(n, -1)
        cfg = self.cfg
        candidate = self.row_slot.clamp(min=0) // cfg.n_eval_episodes
        sign = torch.where(candidate < cfg.n_delta, 1.0, -1.0) * (self.row_slot >= 0)
        scaled = self.deltas * cfg.delta_std  # SB3-contrib's policy_deltas
        return theta + sign.unsqueeze(1) * scaled[candidate % cfg.n_delta]

    def metrics(self, lr: float) -> Metrics:
        """The latest step's metrics, generations so far, the rate and σ, and the share of env
        steps that scored no candidate."""
        c = self.counters
        steps = c["scored_steps"] + c["unscored_steps"]
        return {**self.last, "train/generations": float(c["generations"]),
                "train/learning_rate": lr, "train/delta_std": self.cfg.delta_std,
                "train/unscored_fraction": c["unscored_steps"] / steps if steps else 0.0}

    def state_dict(self) -> dict[str, Any]:
        """θ, the open generation (its directions and every episode's progress), the rows'
        running episodes, the counters and the latest step's metrics, as plain data."""
        empty = torch.zeros(0, self.policy.size, device=self.device)
        return {"policy": self.policy.state_dict(),
                "deltas": empty if self.deltas is None else self.deltas.clone(),
                **{name: getattr(self, name).clone() for name in TENSORS},
                "counters": dict(self.counters), "last": dict(self.last)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore `state_dict()` (a generation of another size is a ValueError)."""
        self.policy.load_state_dict(state["policy"])
        deltas = state["deltas"].to(self.device)
        slots = self.cfg.episodes_per_generation
        if state["slot_status"].shape != (slots,) or (deltas.numel() and deltas.shape != (
                self.cfg.n_delta, self.policy.size)):
            raise ValueError(f"the checkpoint's ARS generation does not fit algo.n_delta="
                             f"{self.cfg.n_delta}, algo.n_eval_episodes={self.cfg.n_eval_episodes}")
        self.deltas = deltas if deltas.numel() else None
        for name in TENSORS:
            setattr(self, name, state[name].to(self.device))
        self.counters = {k: int(v) for k, v in state["counters"].items()}
        self.last = {k: float(v) for k, v in state["last"].items()}
        self._weights = None


TENSORS = ("slot_status", "slot_return", "slot_length", "row_slot", "row_return", "row_length")
"""The bookkeeping tensors `ARS.state_dict` holds besides θ and the directions."""


def build(cfg: ARSConfig, spec: EnvSpec, device: torch.device | str = "cpu") -> ARS:
    """Registry builder."""
    return ARS(cfg, spec, device)
