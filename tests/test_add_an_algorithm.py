"""docs/architecture.md, "How to add an algorithm", followed step by step with a toy algorithm.

Step 1 is the code below (a config, a class, a `build`), step 2 the YAML text (stored in Hydra's
ConfigStore under `algo/toy`, as a file in `conf/algo/` would be found), step 3 its one entry in
`catalog.ALGORITHMS`; step 4 (the config reference) is a file. Step 5 is the claim checked
here: with no other edit it trains from the command line, logs its metrics, checkpoints,
evaluates and resumes like a built-in algorithm, runs as a seed batch, and `rltrain list` shows
it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
import torch
import yaml

from rltrain.algos.configs.base import OffPolicyConfig
from rltrain.algos.off_policy_steps import td_target
from rltrain.algos.optim import adam
from rltrain.checkpoint import format as checkpoint
from rltrain.nets.q import QNetwork
from rltrain.nets.spec import resolve_nets
from rltrain.types import EnvSpec, Metrics, TransitionBatch


# ---- step 1: rltrain/algos/configs/toy.py (the config), rltrain/algos/toy.py (the rest) ------
@dataclass
class ToyConfig(OffPolicyConfig):
    """One-step Q-learning without a target network, ε-greedy with a fixed ε."""

    name: str = "toy"
    """Registry key."""
    epsilon: float = 0.2
    """Probability of a uniformly random action while training."""

    def validate(self, cfg: Any) -> None:
        """Value checks of the toy's own field, then the shared off-policy ones."""
        super().validate(cfg)
        if not 0.0 <= self.epsilon <= 1.0:
            raise ValueError(f"algo.epsilon={self.epsilon} must be in [0, 1]")


class Toy:
    """Meets `OffPolicyAlgorithm`: `act`, one gradient step per `update`, `policy`, state dicts."""

    def __init__(self, cfg: ToyConfig, spec: EnvSpec, device: torch.device | str):
        self.cfg, self.n = cfg, spec.action_dim
        self.q_net = QNetwork(resolve_nets(cfg, spec).critic, spec.action_dim).to(device)
        self.policy = self.q_net
        self.optimizer = adam(self.q_net.parameters(), cfg.lr)

    @torch.no_grad()
    def act(self, obs: torch.Tensor, global_step: int) -> torch.Tensor:
        greedy = self.q_net(obs).argmax(dim=-1)
        explore = torch.rand(greedy.shape) < self.cfg.epsilon
        return torch.where(explore, torch.randint_like(greedy, self.n), greedy)

    def update(self, batch: TransitionBatch, global_step: int) -> Metrics:
        with torch.no_grad():
            y = td_target(batch.rewards, self.q_net(batch.next_obs).max(-1).values,
                          batch.terminated, self.cfg.gamma)
        q = self.q_net(batch.obs).gather(-1, batch.actions.long().view(-1, 1)).squeeze(-1)
        loss = torch.nn.functional.mse_loss(q, y)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return {"train/q_loss": loss.item()}

    def state_dict(self) -> dict[str, Any]:
        return {"q_net": self.q_net.state_dict(), "optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.q_net.load_state_dict(state["q_net"])
        self.optimizer.load_state_dict(state["optimizer"])


def build(cfg: ToyConfig, spec: EnvSpec, device: torch.device | str) -> Toy:
    return Toy(cfg, spec, device)


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
                 "logger=none", "logger.log_freq=0", "progress=off", "preset=null"]
    result = train(overrides, run_dir=tmp_path / "run")
    assert result["episodes"] == 2
    latest = checkpoint.load(tmp_path / "run" / "checkpoints" / "final.pt")
    assert latest["config"]["algo"]["name"] == "toy" and latest["config"]["algo"]["epsilon"] == 0.2
    assert set(latest["algo"]) == {"q_net", "optimizer"}
    rows = (tmp_path / "run" / "metrics.csv").read_text()
    assert ",train/q_loss," in rows  # its metrics reach the loggers through the shared loop
    # resume from the periodic checkpoint at step 128 in a copy of the run: same final weights
    periodic = checkpoint.load(tmp_path / "run" / "checkpoints" / "step_000000128.pt")
    cfg = to_train_config(periodic["config"])
    resumed = Runner(cfg, tmp_path / "resumed", resume_from=periodic)
    resumed.run()
    again = checkpoint.load(tmp_path / "resumed" / "checkpoints" / "final.pt")
    assert again["counters"]["global_step"] == latest["counters"]["global_step"] == 160


def test_an_added_algorithm_runs_as_a_seed_batch_without_a_line_more(toy_registered, tmp_path):
    """No stacked form in its entry: `num_seeds=2` runs each seed's own Toy in turn, in one
    process and one batch folder; seed 1 ends with exactly the weights of the run seed=1 alone."""
    from rltrain.api import train

    overrides = ["algo=toy", "env=CartPole-v1", "env.num_envs=2", "algo.learning_starts=32",
                 "algo.batch_size=16", "algo.hidden_sizes=[16]", "total_timesteps=96",
                 "eval.freq=0", "eval.episodes=2", "eval.num_envs=2", "logger=none",
                 "progress=off", "preset=null"]
    summary = train([*overrides, "num_seeds=2"], run_dir=tmp_path / "batch")
    assert summary["seeds"] == [0, 1] and sorted(summary["final_eval"]) == ["0", "1"]
    train([*overrides, "seed=1"], run_dir=tmp_path / "alone")
    batched = checkpoint.load(tmp_path / "batch" / "seed_1" / "checkpoints" / "final.pt")
    alone = checkpoint.load(tmp_path / "alone" / "checkpoints" / "final.pt")
    for name, value in alone["algo"]["q_net"].items():
        assert torch.equal(batched["algo"]["q_net"][name], value), name


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
