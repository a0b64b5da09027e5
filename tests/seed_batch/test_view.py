"""A seed of a stacked batch, as its Runner reads it (`seed_batch/view.py`): the batch's own tensors,
with no copy to keep up to date, and a state in its single run's layout."""

from __future__ import annotations

import pytest
import torch

from rltrain.algos.dqn import DQN
from rltrain.seed_batch.view import SeedView, seed_state
from rltrain.types import TransitionBatch
from tests.seed_batch.helpers import members_of


def _dqn_members(seeds: int):
    members, streams, _ = members_of("dqn", "CartPole-v1", seeds)
    return members, streams


def _transitions(seeds: int, rows: int = 8) -> TransitionBatch:
    gen = torch.Generator().manual_seed(0)
    return TransitionBatch(
        obs=torch.randn(seeds, rows, 4, generator=gen), actions=torch.randint(0, 2, (seeds, rows)),
        rewards=torch.randn(seeds, rows, generator=gen), next_obs=torch.randn(seeds, rows, 4),
        terminated=torch.zeros(seeds, rows))


def test_a_view_reads_the_batchs_current_weights_without_a_copy():
    members, streams = _dqn_members(3)
    batch = DQN.stack(members, streams)
    view = SeedView(batch, 1, members[1])
    assert view.policy is view.q_net  # one module per network, as in the single run
    before = {n: p.clone() for n, p in view.q_net.named_parameters()}
    batch.update(_transitions(3), global_step=10)
    stacked = dict(batch.q_net.named_parameters())
    for name, p in view.q_net.named_parameters():
        assert torch.equal(p, stacked[name][1])  # the batch's slice, after its update
        assert not torch.equal(p, before[name])
        assert p.untyped_storage().data_ptr() == stacked[name].untyped_storage().data_ptr()
    obs = torch.randn(5, 4)
    assert torch.equal(view.policy.act(obs), batch.q_net(obs.expand(3, 5, 4)).argmax(-1)[1])


def test_a_seeds_state_is_its_single_runs_layout_and_holds_only_its_own_tensors():
    members, streams = _dqn_members(2)
    batch = DQN.stack(members, streams)
    batch.update(_transitions(2), global_step=10)
    state = SeedView(batch, 0, members[0]).state_dict()
    single = members[0].state_dict()  # the layout a single run saves (untrained here)
    assert state.keys() == single.keys()
    for part in ("q_net", "q_target"):
        assert {k: v.shape for k, v in state[part].items()} == \
               {k: v.shape for k, v in single[part].items()}
        for tensor in state[part].values():  # a copy of its own: saving it saves one seed
            assert tensor.is_contiguous()
            assert tensor.untyped_storage().nbytes() == tensor.numel() * tensor.element_size()
    adam = state["optimizer"]["state"][0]
    assert adam["step"].shape == () and float(adam["step"]) == 1.0
    assert adam["exp_avg"].shape == single["q_net"]["body.0.weight"].shape
    fresh = DQN(members[0].cfg, members[0].spec, "cpu")
    fresh.load_state_dict(state)  # a single run continues from it (resume=, eval, export)
    torch.testing.assert_close(fresh.q_net(torch.ones(2, 4)),
                               batch.q_net(torch.ones(2, 2, 4))[0], rtol=1e-6, atol=1e-6)


def test_seed_state_slices_tensors_and_keeps_the_rest():
    state = {"a": torch.arange(6.0).view(3, 2), "n": 7, "groups": [{"lr": 0.1, "params": [0]}]}
    sliced = seed_state(state, 2)
    assert sliced["a"].tolist() == [4.0, 5.0] and sliced["n"] == 7
    assert sliced["groups"] == [{"lr": 0.1, "params": [0]}]


def test_a_running_seed_is_not_loaded_in_place():
    members, streams = _dqn_members(2)
    view = SeedView(DQN.stack(members, streams), 0, members[0])
    with pytest.raises(TypeError, match="before the batch is stacked"):
        view.load_state_dict(members[0].state_dict())
