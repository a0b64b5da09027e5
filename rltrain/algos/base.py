"""What the algorithms share: the two protocols, the learning-rate schedule and small functions
(gradient steps, advantages, metrics), and PPO's and A2C's form for a batch of seeds
(`ActorCriticSeeds`, with the helpers through which their one `update` takes a seed
dimension); the off-policy steps (target updates, TD targets, critic and actor steps) live in
`algos/off_policy_steps.py`. The config bases live in `algos/configs/base.py`, the optimizers
and the gradient clip in `algos/optim.py`.

No algorithm file imports another, or `rltrain.config`: shared pieces live here, in
`algos/optim.py` and in `nets/`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, Protocol

import torch
from torch import nn

from rltrain import obs as obs_ops
from rltrain.algos.configs.base import OffPolicyConfig, OnPolicyConfig, SDEConfig
from rltrain.algos.optim import Optimizer, clip_grad_norm, grad_norm
from rltrain.algos.seed_optim import clip_grad_norm_per_seed, stacked_optimizer
from rltrain.errors import UserError
from rltrain.nets import seeded
from rltrain.nets.actor_critic import ActorCritic
from rltrain.nets.heads import CategoricalDist, DiagGaussianDist
from rltrain.nets.recurrent import RecurrentActorCritic
from rltrain.nets.sde import NoiseClock, SDEHead, load_sde_state, sde_state
from rltrain.nets.spec import resolve_nets
from rltrain.parallel.world import Solo
from rltrain.types import EnvSpec, Metrics, RolloutBatch, TransitionBatch


def check_sde_spec(cfg: SDEConfig, spec: EnvSpec, algo: str) -> None:
    """Refuse gSDE for a Discrete action space, in one line."""
    if cfg.use_sde and spec.action_kind != "box":
        raise UserError(f"algo.use_sde=true: gSDE is for Box (continuous) actions; this env's "
                        f"actions are {spec.action_kind}; drop algo.use_sde for {algo}")


def make_noise_clock(cfg: SDEConfig, default_period: int = -1) -> NoiseClock | None:
    """The gSDE resampling clock, or None without gSDE."""
    if not cfg.use_sde:
        return None
    return NoiseClock(cfg.sde_sample_freq if cfg.sde_sample_freq > 0 else default_period)


class Policy(Protocol):
    """What evaluation and export need: an `nn.Module` mapping observations to env actions."""

    def act(self, obs: torch.Tensor, deterministic: bool = True) -> torch.Tensor: ...


class OnPolicyAlgorithm(Protocol):
    """PPO, A2C: act on the rollout, then update once per rollout."""

    policy: nn.Module

    def act(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(action, log_prob, value) for a batch of observations, all detached."""
        ...

    def value(self, obs: torch.Tensor) -> torch.Tensor: ...

    def update(self, batch: RolloutBatch, progress_remaining: float = 1.0
               ) -> Metrics | list[Metrics]:
        """One update on a rollout: its metrics (a seed batch's, `stack`: one dict per seed)."""
        ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


class OffPolicyAlgorithm(Protocol):
    """DQN, DDPG, TD3, SAC: act with exploration, one gradient step per `update`."""

    policy: nn.Module

    def act(self, obs: torch.Tensor, global_step: int) -> torch.Tensor: ...

    def update(self, batch: TransitionBatch, global_step: int) -> Metrics | list[Metrics]:
        """One gradient step: its metrics (a seed batch's, `stack`: one dict per seed)."""
        ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


def make_actor_critic(cfg: OnPolicyConfig, spec: EnvSpec) -> ActorCritic:
    """PPO/A2C's network: `net.*` settings, `ortho_init` and the Gaussian log-std init and bounds."""
    nets = resolve_nets(cfg, spec, ortho=cfg.ortho_init)
    check_sde_spec(cfg, spec, cfg.name)
    return ActorCritic(spec, nets, cfg.log_std_init, (cfg.log_std_min, cfg.log_std_max),
                       share_encoder=cfg.net.share_encoder,
                       sde=(cfg.use_sde, cfg.use_expln))


def make_recurrent_actor_critic(cfg: Any, spec: EnvSpec) -> RecurrentActorCritic:
    """PPO's recurrent network (`cfg.recurrent` lstm/gru), with the same net settings."""
    nets = resolve_nets(cfg, spec, ortho=cfg.ortho_init)
    check_sde_spec(cfg, spec, cfg.name)
    if cfg.net.share_encoder:
        raise UserError("net.share_encoder: a recurrent policy already has one encoder feeding "
                        "its core(s); drop net.share_encoder")
    return RecurrentActorCritic(spec, nets, cfg.recurrent, cfg.recurrent_hidden_size,
                                cfg.recurrent_layers, cfg.shared_recurrent, cfg.log_std_init,
                                (cfg.log_std_min, cfg.log_std_max), (cfg.use_sde, cfg.use_expln))


@torch.no_grad()
def sample_rollout_step(policy: ActorCritic, obs: torch.Tensor, clock: NoiseClock | None,
                        mask: torch.Tensor | None = None, draws: Any = None,
                        ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """PPO/A2C's acting step: (action, log_prob, value), detached; gSDE noise drawn when due;
    `mask` [N, n]: only valid actions are sampled; `draws`: where the sampling noise comes
    from (`sample_action`). A seed batch's stacked `policy` takes `obs` `[S, N, ...]`."""
    if clock is not None and clock.tick():
        policy.head.sde.resample(obs_ops.rows(obs))
    dist, value = policy.dist_value(obs, mask)
    action = sample_action(dist, draws)
    return action, policy.head.log_prob(dist, action), value


def sample_action(dist: Any, draws: Any) -> torch.Tensor:
    """A sample of `dist`. A categorical's uniforms and a diagonal Gaussian's normals come from
    `draws` (`algos/draws.py`: a single run's the numbers `dist.sample()` itself drew, a seed
    batch's each seed's from its own stream); the other distributions (MultiDiscrete,
    MultiBinary, gSDE's held noise: single runs only, `nets/seeded.py`) draw their own."""
    if draws is None or type(dist) not in (CategoricalDist, DiagGaussianDist):
        return dist.sample()
    like = dist.log_probs if type(dist) is CategoricalDist else dist.mean
    return dist.sample(draws.like(dist.noise, like))


class PerSeed(Solo):
    """A seed batch's collective: one process, whose advantages `[S, b]` are normalized by each
    seed's own moments (over the last dimension, `[S, 1]` each), as its single run's are."""

    def moments(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x.mean(-1, keepdim=True), x.std(-1, keepdim=True, correction=int(x.shape[-1] > 1))


PER_SEED = PerSeed()


class ActorCriticSeeds:
    """PPO's and A2C's form for a batch of seeds, `stack(members, streams)`: a copy of the first
    member whose actor-critic and optimizer are the members' stacked `[S, ...]`
    (`nets/seeded.py`), whose draws are each seed's own stream and whose collective normalizes
    each seed's advantages alone (`PER_SEED`); the algorithm's own `act`, `value` and `update`
    then take inputs with a leading seed dimension, and each seed's Runner reads its seed
    through `seed_batch/view.py` (no copies to keep in step)."""

    @classmethod
    def stack(cls, members: list[Any], streams: Any) -> Any:
        """The seeds' `members` as one batch (drawing from `streams`, one per seed);
        NotStackable for a recurrent core or gSDE (each seed then runs alone, in turn)."""
        for algo in members:
            if getattr(algo, "recurrent", False):
                raise seeded.NotStackable("a recurrent core (algo.recurrent)")
            if algo.noise_clock is not None:
                raise seeded.NotStackable("gSDE (algo.use_sde)")
        batch = copy.copy(members[0])
        batch.draws, batch.collective = streams, PER_SEED
        batch.policy = seeded.stack_modules([m.policy for m in members])
        batch.params = list(batch.policy.parameters())
        batch.optimizer = stacked_optimizer(batch.params, [m.optimizer for m in members])
        return batch


def actor_critic_state(policy: ActorCritic, optimizer: Optimizer,
                       clock: NoiseClock | None) -> dict[str, Any]:
    """PPO/A2C's state: network, optimizer and, with gSDE, the held noise and its clock."""
    state: dict[str, Any] = {"policy": policy.state_dict(), "optimizer": optimizer.state_dict()}
    if clock is not None:
        state["sde"] = sde_state(policy.head.sde, clock)
    return state


def load_actor_critic_state(policy: ActorCritic, optimizer: Optimizer,
                            clock: NoiseClock | None, state: dict[str, Any]) -> None:
    """Restore `actor_critic_state()` (a gSDE state saved without gSDE now is ignored)."""
    policy.load_state_dict(state["policy"])
    optimizer.load_state_dict(state["optimizer"])
    if clock is not None and isinstance(state.get("sde"), dict):
        load_sde_state(policy.head.sde, clock, state["sde"])


def policy_std(policy: ActorCritic) -> float:
    """Mean σ of the Gaussian head (of the gSDE matrix with gSDE), for `train/std`."""
    head = policy.head
    std = head.sde.std() if isinstance(head, SDEHead) else head.log_std.exp()
    return std.detach().mean().item()


def policy_stds(policy: ActorCritic) -> list[float]:
    """`policy_std` per seed: a single run's `[σ]`, a seed batch's stacked Gaussian head's one
    per seed (gSDE never runs stacked)."""
    if getattr(policy, "seeds", None) is None:
        return [policy_std(policy)]
    return policy.head.log_std.detach().exp().mean(-1).tolist()


def by_seed(x: torch.Tensor) -> torch.Tensor:
    """`x` `[..., B]` as rows per seed `[S, B]`: a single run's `[B]` as one seed's `[1, B]`."""
    return x.reshape(-1, x.shape[-1])


def row_index(idx: torch.Tensor) -> Any:
    """The index of a minibatch's rows: a single run's `idx` `[b]` as it is; a seed batch's
    `[S, b]` (seed k's rows of its own `[B]`) as `(seeds [S, 1], idx)`, so `x[row_index(idx)]`
    is `[S, b, ...]`."""
    if idx.dim() == 1:
        return idx
    return torch.arange(idx.shape[0], device=idx.device).unsqueeze(1), idx


def step_means(rows: torch.Tensor, took: list[list[bool]]) -> tuple[torch.Tensor, list[int]]:
    """An update's per-step metrics averaged, and each seed's step count: a single run's `rows`
    `[steps, M]` over all its steps; a seed batch's `[steps, S, M]` per seed over the steps it
    took (`took[step][k]`: a seed stopped early sits out the rest)."""
    counts = [sum(column) for column in zip(*took, strict=True)]
    if rows.dim() == 2:
        return rows.mean(0), counts
    weights = torch.tensor(took, device=rows.device).to(rows.dtype).unsqueeze(-1)
    return (rows * weights).sum(0) / weights.sum(0), counts


def explained_variance(pred: torch.Tensor, target: torch.Tensor) -> float:
    """1 − Var[target − pred] / Var[target]; nan when the target has no variance (or one row)."""
    if target.numel() < 2:  # a 1-step last rollout: var() of one sample warns and is nan anyway
        return float("nan")
    var = target.var()
    if var.item() == 0:
        return float("nan")
    return float(1.0 - (target - pred).var() / var)


def normalized(adv: torch.Tensor,
               moments: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
    """Advantages `[..., B]` normalized by `moments` (mean, std: over every rank's rows under
    torchrun), by default their own over the last dim (per seed in a seed batch)."""
    if adv.shape[-1] < 2:
        # one sample (a shortened last rollout's last minibatch): its spread is undefined and
        # centering would zero its policy gradient, so it is left as it is, as SB3 does
        return adv
    mean, std = moments or (adv.mean(-1, keepdim=True), adv.std(-1, keepdim=True))
    return (adv - mean) / (std + 1e-8)


def pick_lr(lr: float | None, cfg: Any) -> float:
    """`lr` when set, else the algorithm's shared `cfg.lr`."""
    return cfg.lr if lr is None else lr


def scheduled_lr(lr: float, lr_final: float, remaining: float) -> float:
    """The one learning-rate schedule: linear from `lr` (remaining 1) to `lr_final` (remaining 0).

    `remaining` (clamped to [0, 1]) is the fraction of the schedule still to go: of the run for
    PPO/A2C's `anneal_lr` (to 0), of `lr_decay_steps` for DQN (to `lr_final`). Written as
    `lr_final + remaining · (lr − lr_final)` so that annealing to 0 is exactly `lr · remaining`.
    """
    remaining = min(1.0, max(0.0, remaining))
    return lr_final + remaining * (lr - lr_final)


def on_policy_lr(cfg: OnPolicyConfig, progress_remaining: float) -> float:
    """PPO/A2C's learning rate: `cfg.lr`, annealed to 0 over the run when `cfg.anneal_lr`."""
    return scheduled_lr(cfg.lr, 0.0, progress_remaining) if cfg.anneal_lr else cfg.lr


def off_policy_lr(cfg: OffPolicyConfig, lr: float, global_step: int) -> float:
    """`lr`, one of an off-policy run's starting rates, at `global_step` env steps: constant
    unless `cfg.lr_decay_steps` > 0; then scaled by the factor by which `cfg.lr` has decayed
    linearly towards `cfg.lr_final` (`cfg.lr` itself: exactly `scheduled_lr`'s value)."""
    if cfg.lr_decay_steps <= 0:
        return lr
    now = scheduled_lr(cfg.lr, cfg.lr_final, 1.0 - global_step / cfg.lr_decay_steps)
    return now if lr == cfg.lr else lr * now / cfg.lr


def decay_lrs(algo: Any, global_step: int) -> Metrics:
    """Before an update's steps: set each optimizer in `algo.start_lrs` ({attribute name:
    starting rate}) to its rate at `global_step` (`off_policy_lr`). Returns the metric
    `train/learning_rate` (`lr`'s rate); nothing is set or returned at a constant rate."""
    cfg = algo.cfg
    if cfg.lr_decay_steps <= 0:
        return {}
    for name, lr in algo.start_lrs.items():
        set_lr(getattr(algo, name), off_policy_lr(cfg, lr, global_step))
    return {"train/learning_rate": off_policy_lr(cfg, cfg.lr, global_step)}


def set_lr(optimizer: Optimizer, lr: float) -> None:
    """Set the learning rate of every parameter group."""
    for group in optimizer.param_groups:
        group["lr"] = lr


def grad_norm_step(optimizer: Optimizer, params: list[torch.Tensor],
                   max_grad_norm: float | None,
                   average: Callable[[list[torch.Tensor]], None] | None = None,
                   active: list[bool] | None = None) -> torch.Tensor:
    """Average the gradients over the ranks of a data-parallel run (`average`, in place: one
    flat all-reduce), clip them (when `max_grad_norm` is set), step, and return the pre-clip
    norm. The norm stays a (detached, 0-d) tensor on the device, so callers decide when to sync.
    A seed batch's optimizer (`seeds` set) clips each seed to its own norm, returns the norms
    `[S]` and steps the `active` seeds (None: all).
    """
    if average is not None:
        average([p.grad for p in params if p.grad is not None])
    if getattr(optimizer, "seeds", None) is not None:
        norm = clip_grad_norm_per_seed(params, max_grad_norm)
        optimizer.step(active)
        return norm
    if max_grad_norm is not None and max_grad_norm > 0:
        norm = clip_grad_norm(params, max_grad_norm)
    else:
        grads = [p.grad for p in params if p.grad is not None]
        norm = grad_norm(grads) if grads else torch.zeros((), device=params[0].device)
    optimizer.step()
    return norm.detach()


def metric_rows(names: tuple[str, ...], values: torch.Tensor,
                extra: Metrics | None = None) -> Any:
    """`values` `[len(names)]` as one metrics dict (a single run), or `[S, len(names)]` as one
    dict per seed (a seed batch), each with `extra` added; one host sync either way."""
    rows = values.tolist()
    if values.dim() == 1:
        return {**dict(zip(names, rows, strict=True)), **(extra or {})}
    return [{**dict(zip(names, row, strict=True)), **(extra or {})} for row in rows]


def each_seed(metrics: Any) -> list[Metrics]:
    """`metric_rows`'s answer as a list: a single run's one dict, a seed batch's one per seed."""
    return [metrics] if isinstance(metrics, dict) else metrics


def mean_metrics(rows: list[dict[str, float]]) -> Metrics:
    """Average metric dicts key by key (a key missing from some rows averages over the others)."""
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for row in rows:
        for k, v in row.items():
            sums[k] = sums.get(k, 0.0) + v
            counts[k] = counts.get(k, 0) + 1
    return {k: sums[k] / counts[k] for k in sums}
