"""A seed batch steps one gymnasium vector env of S x N rows (`envs/make.py` `shared_rows`,
`envs/rows.py`): each seed's rows give the transitions of its own env, its resume state is the
one its single run saves, and a resume from it, into a batch or a single run, continues exactly.
(EnvPool's engine: tests/envs/test_engines.py.)"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rltrain.envs.config import EnvConfig
from rltrain.envs.make import engine_note, load_resume_state, make_env, resume_state, shared_rows
from rltrain.types import StepResult

SEEDS = [3, 7, 11]
CPU = torch.device("cpu")


def cartpole(**kw) -> EnvConfig:
    """CartPole with a 25-step limit: episodes end by falling and by truncation."""
    return EnvConfig(id="CartPole-v1", num_envs=2, max_episode_steps=25, **kw)


def batch(cfg: EnvConfig) -> tuple[object, list]:
    shared = shared_rows(cfg, SEEDS, CPU)
    assert shared is not None
    return shared, [make_env(cfg, base=shared.view(k)) for k in range(len(SEEDS))]


def step_all(shared, views, actions) -> list[StepResult]:
    shared.step({s: a for s, a in zip(SEEDS, actions, strict=True)})
    return [v.step(a) for v, a in zip(views, actions, strict=True)]


def assert_same(a: StepResult, b: StepResult) -> None:
    for field in ("obs", "reward", "terminated", "truncated", "final_obs"):
        assert torch.equal(getattr(a, field), getattr(b, field)), field
    ea, eb = a.info.get("episode"), b.info.get("episode")
    assert (ea is None) == (eb is None)
    if ea is not None:
        for key in ("index", "return", "length", "terminated", "truncated"):
            np.testing.assert_array_equal(ea[key], eb[key], err_msg=key)


def play(shared, views, alone, steps: int, rng: np.random.Generator) -> dict[str, int]:
    """`steps` random steps of the batch and of each seed's own env, compared row by row."""
    ended = {"terminated": 0, "truncated": 0}
    for _ in range(steps):
        actions = [torch.as_tensor(rng.integers(0, 2, 2)) for _ in SEEDS]
        for got, own, a in zip(step_all(shared, views, actions), alone, actions, strict=True):
            want = own.step(a)
            assert_same(got, want)
            ended["terminated"] += int(want.terminated.sum())
            ended["truncated"] += int(want.truncated.sum())
    return ended


def test_each_seeds_rows_are_its_own_envs_transitions():
    cfg = cartpole()
    shared, views = batch(cfg)
    alone = [make_env(cfg) for _ in SEEDS]
    for view, own, seed in zip(views, alone, SEEDS, strict=True):
        assert torch.equal(view.reset(seed=seed), own.reset(seed=seed))
    ended = play(shared, views, alone, 300, np.random.default_rng(0))
    assert ended["terminated"] >= 20 and ended["truncated"] >= 3, ended
    assert "the 3 seeds step one vector env of 3 x 2 rows" in engine_note(views[0])


def _equal(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def test_a_seeds_resume_state_is_its_single_runs_and_resumes_exactly_either_way():
    """After 40 steps each seed's resume state equals its own env's; loaded into a new batch
    and into a single env, both continue with the transitions of the uninterrupted env."""
    cfg = cartpole()
    shared, views = batch(cfg)
    alone = [make_env(cfg) for _ in SEEDS]
    for view, own, seed in zip(views, alone, SEEDS, strict=True):
        view.reset(seed=seed)
        own.reset(seed=seed)
    rng = np.random.default_rng(1)
    play(shared, views, alone, 40, rng)
    states = [resume_state(v) for v in views]
    for state, own in zip(states, alone, strict=True):
        assert state.keys() == resume_state(own).keys() and "sim" in state
        assert _equal(state, resume_state(own))
    again, again_views = batch(cfg)
    single = make_env(cfg)
    for view, seed in zip([*again_views, single], [*SEEDS, 0], strict=True):
        view.reset(seed=seed + 100)  # as a resumed Runner has, before it loads the state
    assert all(load_resume_state(v, s) for v, s in zip(again_views, states, strict=True))
    assert load_resume_state(single, states[1])  # a batch seed's state, into a single run
    later = np.random.default_rng(2)
    for _ in range(120):
        actions = [torch.as_tensor(later.integers(0, 2, 2)) for _ in SEEDS]
        wants = [own.step(a) for own, a in zip(alone, actions, strict=True)]
        for got, want in zip(step_all(again, again_views, actions), wants, strict=True):
            assert_same(got, want)
        assert_same(single.step(actions[1]), wants[1])


def test_info_action_masks_are_each_seeds_rows_and_resume_with_it():
    from rltrain.envs.masks import action_mask

    cfg = EnvConfig(id="tests.envs.masked_envs:PickTargetInfoSaved", num_envs=2,
                    imports=["tests.envs.masked_envs"])
    shared, views = batch(cfg)
    alone = [make_env(cfg) for _ in SEEDS]
    for view, own, seed in zip(views, alone, SEEDS, strict=True):
        view.reset(seed=seed)
        own.reset(seed=seed)
    for _ in range(15):
        masks = [action_mask(own) for own in alone]
        for view, mask in zip(views, masks, strict=True):
            assert torch.equal(action_mask(view), mask)
        actions = [m.float().multinomial(1).squeeze(1) for m in masks]  # valid actions only
        for got, own, a in zip(step_all(shared, views, actions), alone, actions, strict=True):
            assert_same(got, own.step(a))
    again, again_views = batch(cfg)
    for view, seed in zip(again_views, SEEDS, strict=True):
        view.reset(seed=seed + 100)
    for view, state in zip(again_views, [resume_state(v) for v in views], strict=True):
        assert load_resume_state(view, state)
    for view, own in zip(again_views, alone, strict=True):
        assert torch.equal(action_mask(view), action_mask(own))
    actions = [action_mask(own).float().multinomial(1).squeeze(1) for own in alone]
    for got, own, a in zip(step_all(again, again_views, actions), alone, actions, strict=True):
        assert_same(got, own.step(a))  # the restored envs continue where the others are


@pytest.mark.parametrize("fault, message", [("raise_step", "exploded at its step 4"),
                                            ("raise_reset", "lost its connection")])
def test_an_env_fault_names_the_seed_whose_row_raised(fault, message):
    """Seed 7's row 1 raises in its step 4, or in its reset after its first episode (10 steps,
    SAME_STEP: inside the engine's step); the other rows behave."""
    from rltrain.errors import EnvError

    cfg = EnvConfig(id="tests.envs.faulty_envs:make_faulty", num_envs=2,
                    imports=["tests.envs.faulty_envs"],
                    kwargs={"fault": fault, "at": 3, "only_seed": 8})  # seed 7's row 1
    shared, views = batch(cfg)
    for view, seed in zip(views, SEEDS, strict=True):
        view.reset(seed=seed)
    actions = [torch.zeros(2, dtype=torch.long) for _ in SEEDS]
    with pytest.raises(EnvError, match=message) as caught:
        for _ in range(10):
            step_all(shared, views, actions)
    assert shared.seed_of_fault(caught.value) == 7
    assert shared.seed_of_fault(EnvError("no row of a vector env")) is None


def test_autoreset_flags_are_gymnasiums_row_end_flags_and_seeds_show_their_rows(
        monkeypatch):
    """`autoreset_flags`, rltrain's one read of a gymnasium private field, holds each row's end
    of the last step (a gymnasium that renames or changes it fails here); a seed's envs read
    and write their rows of it, and building them leaves the engine's flags alone."""
    import gymnasium as gym

    from rltrain.envs.rows import SeedEnvs, autoreset_flags, row_engine

    engine = row_engine(lambda: gym.make("CartPole-v1", max_episode_steps=5), 4)
    engine.reset(seed=0)
    assert np.array_equal(autoreset_flags(engine), np.zeros(4, dtype=bool))
    ends = []
    for _ in range(5):
        _, _, terminated, truncated, _ = engine.step(np.zeros(4, dtype=np.int64))
        flags = autoreset_flags(engine)
        assert flags.dtype == np.bool_ and np.array_equal(flags, terminated | truncated)
        ends.append(flags.copy())
    assert ends[-1].all() and not ends[0].any()  # every row truncated at step 5
    seed = SeedEnvs(engine, slice(2, 4))
    assert autoreset_flags(engine).all()  # not cleared by SyncVectorEnv.__init__
    assert seed.envs == [tag.env for tag in engine.envs[2:4]]  # the envs under the row tags
    seed._autoreset_envs = np.array([False, True])  # as envs/snapshot.py restores it
    assert np.array_equal(autoreset_flags(engine), [True, True, False, True])
    assert np.array_equal(seed._autoreset_envs, [False, True])
    closed = []
    monkeypatch.setattr(seed.envs[0], "close", lambda: closed.append(True))
    seed.close()  # as its garbage collection does
    assert seed.closed and not closed and not engine.closed  # the batch closes the engine


@pytest.mark.parametrize("cfg, seeds", [
    (cartpole(), [0]),  # one seed: its own envs
    (cartpole(vectorization="async"), SEEDS),  # processes of their own: kept per seed
    (EnvConfig(id="CartPole-v1", num_envs=2, backend="torch"), SEEDS),  # native: batched already
])
def test_what_keeps_envs_per_seed(cfg, seeds):
    assert shared_rows(cfg, seeds, CPU) is None


def test_atari_preprocessing_keeps_envs_per_seed():
    pytest.importorskip("ale_py")
    assert shared_rows(EnvConfig(id="ALE/Pong-v5", num_envs=2), SEEDS, CPU) is None
