"""SAC, TD3 and DDPG over a batch of seeds (`<Algo>.stack(members, streams)`): the single run's
`act`, `random_actions` and `update`, with a leading seed dimension. Seed k of the stack draws
exactly what its single run draws, in the same order (replay-free here: each seed's warm-up
actions, exploration noise, next-action and actor-step noise, TD3's smoothing noise), and
computes what its single run computes up to the order of the sums (`tests/seed_batch/helpers.py`).
"""

from __future__ import annotations

import pytest
import torch

from rltrain.config.catalog import ALGORITHMS
from rltrain.config.compose import compose_train_config
from rltrain.nets.seeded import NotStackable
from rltrain.seed_batch.rng import SeedStreams
from rltrain.seed_batch.view import seed_state
from rltrain.types import EnvSpec, TransitionBatch

SPEC = EnvSpec(obs_shape=(3,), action_kind="box", action_dim=2, num_envs=4)
SEEDS, ROWS = 2, 16
CASES = {  # TD3 and SAC with a delayed actor: update 2 skips it, update 3 steps it again
    "sac": ["algo.policy_delay=2", "algo.lr_decay_steps=100", "algo.actor_lr=2e-3"],
    "td3": ["algo.policy_delay=2", "algo.lr_decay_steps=100"],
    "ddpg": [],
}


def _members(name: str, *overrides: str):
    """(members, the batch's streams, a second copy of the streams for the single runs)."""
    cfg = compose_train_config([f"algo={name}", "env=Pendulum-v1", "algo.hidden_sizes=[16, 16]",
                                *CASES[name], *overrides])
    members, streams, alone = [], SeedStreams(), SeedStreams()
    for seed in range(SEEDS):
        torch.manual_seed(seed)
        members.append(ALGORITHMS[name].build(cfg.algo, SPEC, "cpu"))
        streams.capture()
        alone.capture()
    return members, streams, alone


def _transitions(step: int) -> TransitionBatch:
    gen = torch.Generator().manual_seed(step)
    return TransitionBatch(
        obs=torch.randn(SEEDS, ROWS, 3, generator=gen),
        actions=torch.rand(SEEDS, ROWS, 2, generator=gen) * 2 - 1,
        rewards=torch.randn(SEEDS, ROWS, generator=gen),
        next_obs=torch.randn(SEEDS, ROWS, 3, generator=gen),
        terminated=(torch.rand(SEEDS, ROWS, generator=gen) < 0.2).float())


def _close(batch_value, single_value, where: str) -> None:
    if isinstance(single_value, dict):
        assert batch_value.keys() == single_value.keys(), where
        for key in single_value:
            _close(batch_value[key], single_value[key], f"{where}.{key}")
    elif isinstance(single_value, torch.Tensor):
        assert batch_value.shape == single_value.shape, where
        torch.testing.assert_close(batch_value, single_value, rtol=1e-4, atol=1e-6, msg=where)
    elif isinstance(single_value, float):
        assert batch_value == pytest.approx(single_value, rel=1e-4, abs=1e-6), where
    else:
        assert batch_value == single_value, where


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_seed_of_the_stack_draws_and_updates_as_its_single_run(name):
    members, streams, alone = _members(name)
    batch = ALGORITHMS[name].stack()(members, streams)
    warm_up = batch.random_actions(SPEC.num_envs)
    obs = torch.randn(SEEDS, SPEC.num_envs, 3)
    acted = batch.act(obs, global_step=0)
    rows = [batch.update(_transitions(step), global_step=8 * step) for step in range(3)]
    assert warm_up.shape == acted.shape == (SEEDS, SPEC.num_envs, 2)
    for k, algo in enumerate(members):  # the members themselves were not trained by the batch
        with alone.as_global(k):
            assert torch.equal(warm_up[k], algo.random_actions(SPEC.num_envs))
            _close(acted[k], algo.act(obs[k], global_step=0), f"act[{k}]")
            for step in range(3):
                own = TransitionBatch(*(None if x is None else x[k] for x in _transitions(step)))
                single = algo.update(own, global_step=8 * step)
                assert list(rows[step][k]) == list(single)  # the same metrics, in its order
                _close(rows[step][k], single, f"seed {k} update {step}")
        _close(seed_state(batch.state_dict(), k), algo.state_dict(), f"seed {k} state")
        # every draw of the seed came from its own stream, as many as its single run made
        assert torch.equal(streams.generators[k].get_state(), alone.generators[k].get_state())


def test_gsde_sac_does_not_stack():
    """gSDE's held noise has no stacked form: the batch then runs each member in turn."""
    members, streams, _ = _members("sac", "algo.use_sde=true")
    with pytest.raises(NotStackable, match="gSDE"):
        ALGORITHMS["sac"].stack()(members, streams)
