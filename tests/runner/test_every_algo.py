"""Every entry of `ALGOS` gets the same guarantees for free: it trains, it is deterministic, its
checkpoint round-trips, and a run resumed from a periodic checkpoint ends where an uninterrupted
one does (bit for bit on CPU; off-policy with the replay buffer saved).
"""

from __future__ import annotations

import pytest
import torch

from rltrain.checkpoint import format as checkpoint
from rltrain.config.compose import compose_train_config
from rltrain.config.registry import ALGOS
from rltrain.config.schema import TrainConfig
from rltrain.config.validation import to_train_config
from rltrain.evaluation.agent import build_agent
from rltrain.runner.runner import Runner

STEPS = 96  # 2 envs: 48 iterations off-policy, 3 rollouts of 16 on-policy


def tiny(name: str, seed: int = 0, extra: tuple[str, ...] = ()) -> TrainConfig:
    """A seconds-long config of `name` on CartPole (discrete) or Pendulum (box)."""
    spec = ALGOS[name]
    env = "CartPole-v1" if "discrete" in spec.action_kinds else "Pendulum-v1"
    family = (["algo.n_steps=16", "algo.batch_size=16", "algo.n_epochs=2"]
              if spec.family == "on_policy" and name in ("ppo", "pqn") else
              ["algo.n_delta=2"] if name == "ars" else  # one-step rollouts; 4 episodes a generation
              ["algo.n_steps=16"] if spec.family == "on_policy" else
              ["algo.learning_starts=32", "algo.batch_size=16", "algo.buffer_size=500",
               "checkpoint.save_buffer=true",
               *(["algo.critic_hidden_sizes=[16]"] if name == "crossq" else [])])
    return compose_train_config([
        f"algo={name}", f"env={env}", "env.num_envs=2", "env.max_episode_steps=40",
        "algo.hidden_sizes=[16]", f"total_timesteps={STEPS}", f"seed={seed}", "eval.freq=0",
        "eval.episodes=2", "eval.num_envs=2", f"checkpoint.freq={STEPS // 2}", "logger=none",
        "progress=off", *family, *extra])


def weights(run_dir) -> dict[str, torch.Tensor]:
    """Every tensor of the final checkpoint's `algo` state, flattened by key path."""
    out: dict[str, torch.Tensor] = {}

    def walk(prefix: str, node) -> None:
        if isinstance(node, torch.Tensor):
            out[prefix] = node
        elif isinstance(node, dict):
            for k, v in node.items():
                walk(f"{prefix}.{k}", v)
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(f"{prefix}[{i}]", v)

    walk("algo", checkpoint.load(run_dir / "checkpoints" / "final.pt")["algo"])
    return out


def resumed_halfway(run_dir, into) -> dict[str, torch.Tensor]:
    """The final weights of the run in `run_dir` resumed from its first periodic checkpoint (at
    48 or 64 steps) in the folder `into`."""
    half = checkpoint.load(sorted((run_dir / "checkpoints").glob("step_*.pt"))[0])
    Runner(to_train_config(half["config"]), into, resume_from=half).run()
    return weights(into)


def same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("name", sorted(ALGOS))
def test_every_algo_trains_deterministically_and_resumes_exactly(name, tmp_path):
    cfg = tiny(name)
    result = Runner(cfg, tmp_path / "a").run()
    assert result["episodes"] == 2
    straight = weights(tmp_path / "a")
    Runner(tiny(name), tmp_path / "b").run()
    assert same(straight, weights(tmp_path / "b")), "same seed, different weights"
    Runner(tiny(name, seed=1), tmp_path / "c").run()
    assert not same(straight, weights(tmp_path / "c")), "different seeds, same weights"
    # resume from the periodic checkpoint halfway, in another folder
    assert same(straight, resumed_halfway(tmp_path / "a", tmp_path / "r")), \
        "resumed run ended elsewhere"


@pytest.mark.parametrize("name", sorted(ALGOS))
def test_every_algos_checkpoint_rebuilds_an_agent_with_equal_weights(name, tmp_path):
    runner = Runner(tiny(name), tmp_path)
    runner.run()
    payload = checkpoint.load(tmp_path / "checkpoints" / "final.pt")
    rebuilt = build_agent(to_train_config(payload["config"]), runner.eval_env, payload,
                          tmp_path / "checkpoints" / "final.pt", "cpu")
    for key, tensor in rebuilt.policy.state_dict().items():
        assert torch.equal(tensor, runner.algo.policy.state_dict()[key]), key


# gSDE holds its noise between resamples: the held matrices and the clock are part of the state
GSDE = {"ppo": ("env=Pendulum-v1", "algo.use_sde=true", "algo.sde_sample_freq=3"),
        "a2c": ("env=Pendulum-v1", "algo.use_sde=true"),
        "trpo": ("env=Pendulum-v1", "algo.use_sde=true", "algo.sde_sample_freq=3"),
        "sac": ("algo.use_sde=true", "algo.sde_sample_freq=5"),
        "tqc": ("algo.use_sde=true", "algo.sde_sample_freq=5")}


@pytest.mark.parametrize("name", sorted(GSDE))
def test_gsde_runs_are_deterministic_and_resume_exactly(name, tmp_path):
    Runner(tiny(name, extra=GSDE[name]), tmp_path / "a").run()
    straight = weights(tmp_path / "a")
    assert any("sde" in key for key in straight), "the gSDE state was not saved"
    assert same(straight, resumed_halfway(tmp_path / "a", tmp_path / "r")), \
        "resumed gSDE run ended elsewhere"
    Runner(tiny(name), tmp_path / "plain").run()
    assert not same(straight, weights(tmp_path / "plain"))
