"""docs/architecture.md, "How to add an algorithm", followed step by step with a toy algorithm.

Step 1 is the code below (a config, a class, a `build`), step 2 the YAML text (stored in Hydra's
ConfigStore under `algo/toy`, as a file in `conf/algo/` would be found), step 3 its one entry in
`catalog.ALGORITHMS`; step 4 (the config reference) is a file. Step 5 is the claim checked
here: with no other edit it trains from the command line, logs its metrics, checkpoints,
evaluates and resumes like a built-in algorithm, runs as a stacked seed batch (its critic has
several outputs per action: quantiles), and `rltrain list` shows it.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import pytest
import torch
import yaml
from torch import nn

from rltrain.algos.base import grad_norm_step, metric_rows
from rltrain.algos.configs.base import OffPolicyConfig
from rltrain.algos.draws import Draws
from rltrain.algos.optim import adam
from rltrain.algos.seed_optim import stacked_optimizer
from rltrain.buffers.replay import ReplayBuffer
from rltrain.checkpoint import format as checkpoint
from rltrain.nets.mlp import mlp
from rltrain.nets.seeded import stack_modules
from rltrain.nets.spec import NetSpec, resolve_nets
from rltrain.types import EnvSpec, TransitionBatch


# ---- step 1: rltrain/algos/configs/toy.py (the config), rltrain/algos/toy.py (the rest) ------
@dataclass
class ToyConfig(OffPolicyConfig):
    """Quantile Q-learning (QR-DQN's loss) without a target network, ε-greedy with a fixed ε."""

    name: str = "toy"
    """Registry key."""
    epsilon: float = 0.2
    """Probability of a uniformly random action while training."""
    quantiles: int = 8
    """Values of the return's distribution per action (the critic's outputs per action)."""
    window: int = 64
    """Its replay samples the newest this many transitions only (`RecentReplay`)."""

    def replay_path(self, name: str) -> str:
        """Its own replay, whatever `algo.replay` says."""
        return f"{__name__}:RecentReplay"

    def validate(self, cfg: Any) -> None:
        """Value checks of the toy's own fields, then the shared off-policy ones."""
        super().validate(cfg)
        if not 0.0 <= self.epsilon <= 1.0:
            raise ValueError(f"algo.epsilon={self.epsilon} must be in [0, 1]")


class RecentReplay(ReplayBuffer):
    """A replay of its own: samples uniformly among the newest `window` transitions; what it
    saves is the ring's and its window."""

    @classmethod
    def build(cls, spec: Any, cfg: ToyConfig, device: torch.device, obs_dtype: Any = None):
        replay = super().build(spec, cfg, device, obs_dtype)
        replay.window = cfg.window
        return replay

    def sample(self, batch_size: int, generator: torch.Generator | None = None):
        back = torch.randint(0, min(self.size, self.window), (batch_size,), generator=generator)
        idx = (self.pos - 1 - back) % self.capacity
        return TransitionBatch(self.obs[idx], self.actions[idx], self.rewards[idx],
                               self.next_obs[idx], self.terminated[idx])

    def state_dict(self) -> dict:
        return {**super().state_dict(), "window": self.window}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.window = int(state["window"])


class QuantileQ(nn.Module):
    """Obs `[..., B, F]` -> `quantiles` values per action `[..., B, n, M]` (an MLP of the
    `nets/` parts: a seed batch stacks it as it is)."""

    def __init__(self, spec: NetSpec, n_actions: int, quantiles: int):
        super().__init__()
        self.n, self.m = n_actions, quantiles
        self.body = mlp(spec.obs_dim, spec.hidden, n_actions * quantiles, spec.activation)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.body(obs).unflatten(-1, (self.n, self.m))

    @torch.no_grad()
    def act(self, obs: torch.Tensor, deterministic: bool = True) -> torch.Tensor:
        return self(obs).mean(-1).argmax(-1)


def quantile_huber(z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """QR-DQN's loss of the quantiles `z` `[..., B, M]` to the target samples `y` `[..., B, M]`:
    the quantile-weighted Huber loss, summed over the quantiles, averaged over the rows."""
    m = z.shape[-1]
    tau = (torch.arange(m, dtype=z.dtype, device=z.device) + 0.5) / m
    u = y.unsqueeze(-2) - z.unsqueeze(-1)  # [..., B, M (quantile), M (sample)]
    huber = torch.where(u.abs() <= 1.0, 0.5 * u.pow(2), u.abs() - 0.5)
    weight = (tau.unsqueeze(-1) - (u < 0).to(z.dtype)).abs()
    return (weight * huber).mean(-1).sum(-1).mean(-1)


class Toy:
    """Meets `OffPolicyAlgorithm`: `act`, one gradient step per `update`, `policy`, state dicts;
    `Toy.stack(members, streams)` is the same Toy for a batch of seeds (every line below takes
    a leading seed dimension)."""

    def __init__(self, cfg: ToyConfig, spec: EnvSpec, device: torch.device | str):
        self.cfg, self.n = cfg, spec.action_dim
        net = resolve_nets(cfg, spec).critic
        self.q_net = QuantileQ(net, spec.action_dim, cfg.quantiles).to(device)
        self.policy = self.q_net
        self.optimizer = adam(self.q_net.parameters(), cfg.lr)
        self.draws: Any = Draws(device)

    @classmethod
    def stack(cls, members: list[Toy], streams: Any) -> Toy:
        batch = copy.copy(members[0])
        batch.draws = streams
        batch.q_net = batch.policy = stack_modules([m.q_net for m in members])
        batch.optimizer = stacked_optimizer(list(batch.q_net.parameters()),
                                            [m.optimizer for m in members])
        return batch

    def random_actions(self, num_envs: int) -> torch.Tensor:
        return self.draws.randint(self.n, (num_envs,))

    @torch.no_grad()
    def act(self, obs: torch.Tensor, global_step: int) -> torch.Tensor:
        greedy = self.q_net(obs).mean(-1).argmax(-1)
        explore = self.draws.uniform(greedy.shape[-1:]) < self.cfg.epsilon
        return torch.where(explore, self.random_actions(greedy.shape[-1]), greedy)

    def update(self, batch: TransitionBatch, global_step: int) -> Any:
        with torch.no_grad():
            next_z = self.q_net(batch.next_obs)  # [..., B, n, M]
            best = next_z.mean(-1).argmax(-1)[..., None, None].expand(*next_z.shape[:-2], 1,
                                                                     self.cfg.quantiles)
            y = (batch.rewards.unsqueeze(-1) + self.cfg.gamma * (1 - batch.terminated)
                 .unsqueeze(-1) * next_z.gather(-2, best).squeeze(-2))
        taken = batch.actions.long()[..., None, None].expand(*batch.actions.shape, 1,
                                                              self.cfg.quantiles)
        loss = quantile_huber(self.q_net(batch.obs).gather(-2, taken).squeeze(-2), y)
        self.optimizer.zero_grad()
        loss.sum().backward()  # a seed batch: each seed its own loss's gradient
        grad_norm_step(self.optimizer, list(self.q_net.parameters()), None)
        return metric_rows(("train/q_loss",), loss.detach().unsqueeze(-1))

    def state_dict(self) -> dict[str, Any]:
        return {"q_net": self.q_net.state_dict(), "optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.q_net.load_state_dict(state["q_net"])
        self.optimizer.load_state_dict(state["optimizer"])


def build(cfg: ToyConfig, spec: EnvSpec, device: torch.device | str) -> Toy:
    return Toy(cfg, spec, device)


def stack(members: list[Toy], streams: Any) -> Toy:
    return Toy.stack(members, streams)


# ---- step 2: conf/algo/toy.yaml -----------------------------------------------------------------
TOY_YAML = """\
# Toy Q-learning: every value is ToyConfig's default.
defaults:
  - toy_schema
  - _self_
"""


@pytest.fixture
def toy_registered(monkeypatch):
    """Step 3 (one entry in `catalog.ALGORITHMS`: its config class and module as import paths,
    its action spaces, no stacked form; its family read from its config class) and step 2's
    file made known to Hydra; undone afterwards."""
    from hydra.core.config_store import ConfigStore

    from rltrain.config.catalog import ALGORITHMS, AlgoEntry
    from rltrain.config.store import register_configs

    monkeypatch.setitem(ALGORITHMS, "toy", AlgoEntry(
        f"{__name__}:ToyConfig", __name__, ("discrete",)))
    register_configs()  # stores toy_schema, as for every ALGORITHMS entry
    ConfigStore.instance().store(group="algo", name="toy", node=yaml.safe_load(TOY_YAML))
    yield
    register_configs()


def test_a_toy_algorithm_added_by_the_documented_steps_trains_checkpoints_and_resumes(
        toy_registered, tmp_path):
    from rltrain.api import train
    from rltrain.config.validation import to_train_config
    from rltrain.runner.runner import Runner

    overrides = ["algo=toy", "env=CartPole-v1", "env.num_envs=2", "algo.learning_starts=32",
                 "algo.batch_size=16", "algo.hidden_sizes=[16]", "total_timesteps=160",
                 "eval.freq=0", "eval.episodes=2", "eval.num_envs=2", "checkpoint.freq=64",
                 "checkpoint.save_buffer=true", "algo.window=40", "logger=none",
                 "logger.log_freq=0", "progress=off", "preset=null"]
    result = train(overrides, run_dir=tmp_path / "run")
    assert result["episodes"] == 2
    latest = checkpoint.load(tmp_path / "run" / "checkpoints" / "final.pt")
    assert latest["config"]["algo"]["name"] == "toy" and latest["config"]["algo"]["epsilon"] == 0.2
    assert set(latest["algo"]) == {"q_net", "optimizer"}
    rows = (tmp_path / "run" / "metrics.csv").read_text()
    assert ",train/q_loss," in rows  # its metrics reach the loggers through the shared loop
    # resume from the periodic checkpoint at step 128 in a copy of the run: its own replay,
    # restored as it saved it, so the same final weights
    periodic = checkpoint.load(tmp_path / "run" / "checkpoints" / "step_000000128.pt")
    assert periodic["replay"]["window"] == 40 and periodic["replay"]["size"] == 128
    cfg = to_train_config(periodic["config"])
    resumed = Runner(cfg, tmp_path / "resumed", resume_from=periodic)
    assert type(resumed.replay) is RecentReplay and resumed.replay.size == 128
    resumed.run()
    again = checkpoint.load(tmp_path / "resumed" / "checkpoints" / "final.pt")
    assert again["counters"]["global_step"] == latest["counters"]["global_step"] == 160
    for name, value in latest["algo"]["q_net"].items():
        assert torch.equal(again["algo"]["q_net"][name], value), name


def test_an_added_algorithm_runs_as_a_stacked_seed_batch_without_a_line_more(
        toy_registered, tmp_path, monkeypatch, caplog):
    """Its module's `stack`: `num_seeds=3` trains the three Toys as one stacked network (not
    each seed in turn), and seed 1 ends where the run seed=1 alone ends, within the rounding a
    batch's other summation order allows (tests/seed_batch/helpers.py)."""
    import logging
    import sys

    from rltrain.api import train
    from tests.seed_batch.helpers import MOVED, assert_parameters_follow

    stacked = []
    real = Toy.stack
    monkeypatch.setattr(sys.modules[__name__], "stack",
                        lambda members, streams: stacked.append(len(members)) or real(members, streams))
    overrides = ["algo=toy", "env=CartPole-v1", "env.num_envs=2", "algo.learning_starts=32",
                 "algo.batch_size=16", "algo.hidden_sizes=[16]", "total_timesteps=96",
                 "eval.freq=0", "eval.episodes=2", "eval.num_envs=2", "logger=none",
                 "progress=off", "preset=null"]
    with caplog.at_level(logging.INFO, logger="rltrain"):
        summary = train([*overrides, "num_seeds=3"], run_dir=tmp_path / "batch")
    assert stacked == [3] and "in turn" not in caplog.text
    assert summary["seeds"] == [0, 1, 2] and sorted(summary["final_eval"]) == ["0", "1", "2"]
    train([*overrides, "seed=1", "total_timesteps=2"], run_dir=tmp_path / "start")  # no update
    train([*overrides, "seed=1"], run_dir=tmp_path / "alone")
    batched, alone, start = (
        checkpoint.load(tmp_path / run / "checkpoints" / "final.pt")["algo"]["q_net"]
        for run in ("batch/seed_1", "alone", "start"))
    assert {k: v.shape for k, v in batched.items()} == {k: v.shape for k, v in alone.items()}
    assert_parameters_follow(batched, alone, start, MOVED, "seed 1")
    assert any(not torch.equal(alone[k], start[k]) for k in alone)  # it trained


def test_the_toys_quantile_loss_on_cases_with_known_answers():
    """One quantile (τ = ½): half the Huber loss; below the target the under-estimate weighs τ,
    above it 1 − τ, and past |u| = 1 the loss grows linearly."""
    z = torch.tensor([[0.0]])
    assert quantile_huber(z, torch.tensor([[0.5]])).item() == pytest.approx(0.5 * 0.5 * 0.25)
    assert quantile_huber(z, torch.tensor([[3.0]])).item() == pytest.approx(0.5 * 2.5)
    two = torch.tensor([[0.0, 0.0]])  # τ = ¼, ¾, each 1 below its target (Huber ½): Σ τ · ½
    assert quantile_huber(two, torch.ones(1, 2)).item() == pytest.approx((0.25 + 0.75) * 0.5)


def test_rltrain_list_shows_an_added_algorithm_and_survives_one_without_traits(
        toy_registered, monkeypatch):
    """`rltrain list` raised KeyError: 'toy' for an algorithm whose YAML exists but whose
    traits (step 3) were not added."""
    from rich.console import Console

    from rltrain.cli import listing
    from rltrain.config import catalog

    options = [*catalog.algo_options(), catalog.AlgoOption("toy", "toy", "Toy Q-learning"),
               catalog.AlgoOption("bare", "bare", "Added without traits")]
    monkeypatch.setattr(listing, "algo_options", lambda: options)
    console = Console(width=200, record=True)
    console.print(listing.listing_table())
    text = console.export_text()
    assert "Toy Q-learning (off-policy; actions: Discrete)" in text
    assert "Added without traits (it has no entry in rltrain/config/catalog.py ALGORITHMS)" in text
