"""`algo.replay=her` (buffers/her.py): goals relabelled per strategy within one episode of one
env row (through the ring's wrap-around), rewards recomputed, SB3's her_ratio, running episodes
never sampled, the refusals, an exact resume, and DQN learning bit flipping with it (and not
without it)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rltrain.buffers.choice import saved_replay_class
from rltrain.buffers.her import HerReplayBuffer, goal_reward
from rltrain.checkpoint import format as checkpoint
from rltrain.config.compose import compose_train_config
from rltrain.config.validation import to_train_config
from rltrain.errors import UserError
from rltrain.runner.runner import Runner
from tests.envs.small_runs import final_weights

LAYOUT = {k: ((1,), torch.float32) for k in ("observation", "achieved_goal", "desired_goal")}
STORED_GOAL = -1.0  # the env's desired goal in every stored transition: no achieved goal has it


def code(row: int, episode: int, step: int) -> float:
    """The achieved goal after step `step` of episode `episode` of env row `row`."""
    return 1000.0 * row + 100.0 * episode + step


def decode(value: float) -> tuple[int, int, int]:
    v = int(round(value))
    return v // 1000, (v % 1000) // 100, v % 100


def her(capacity: int, rows: int, strategy: str = "future", n: int = 4) -> HerReplayBuffer:
    replay = HerReplayBuffer(capacity, LAYOUT, (), torch.long)
    replay.configure(rows, n, strategy)
    # reward = achieved - desired (float codes): shows both arguments compute_reward got
    replay.compute_reward = lambda ag, dg, info: (ag - dg)[:, 0]
    return replay


def feed(replay: HerReplayBuffer, lengths: list[list[int]], running: list[int],
         truncated: bool = False) -> None:
    """Per row the lengths of its finished episodes, then `running[row]` steps of one more;
    rows step together (a row whose episodes are done keeps running its last one)."""
    rows = len(lengths)
    plans = [[(e, s, s == L - 1) for e, L in enumerate(ls) for s in range(L)]
             + [(len(ls), s, False) for s in range(running[r] + 200)] for r, ls in enumerate(lengths)]
    total = max(sum(ls) + running[r] for r, ls in enumerate(lengths))
    for t in range(total):
        ep = [plans[r][t] for r in range(rows)]
        obs = {"observation": torch.zeros(rows, 1), "achieved_goal": torch.zeros(rows, 1),
               "desired_goal": torch.full((rows, 1), STORED_GOAL)}
        nxt = {**obs, "achieved_goal": torch.tensor([[code(r, e, s)] for r, (e, s, _) in
                                                     enumerate(ep)])}
        done = torch.tensor([d for _, _, d in ep])
        term = torch.zeros(rows, dtype=torch.bool) if truncated else done
        replay.add(obs, torch.zeros(rows, dtype=torch.long), torch.full((rows,), 7.0), nxt,
                   term, truncated=done & ~term)


def relabelled(replay: HerReplayBuffer, batch: int = 4000, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    b = replay.sample(batch, generator=g)
    m = int(replay.her_ratio * batch)
    return b, m


@pytest.mark.parametrize("strategy", ["future", "final", "episode"])
def test_each_strategy_picks_goals_of_the_same_episode_and_row_and_recomputes_rewards(strategy):
    lengths = [[3, 5, 2], [4, 1, 6]]
    replay = her(64, 2, strategy, n=1000)
    feed(replay, lengths, running=[2, 1])
    b, m = relabelled(replay)
    assert m == int((1 - 1 / 1001) * 4000) > 0
    picked: dict[tuple[int, int, int], set[int]] = {}
    for i in range(len(b.rewards)):
        row, ep, step = decode(b.next_obs["achieved_goal"][i, 0].item())
        assert ep < len(lengths[row]), "a running episode's transition was sampled"
        goal = b.obs["desired_goal"][i, 0].item()
        if i >= m:  # real: as stored
            assert goal == STORED_GOAL and b.rewards[i].item() == 7.0
            continue
        assert b.next_obs["desired_goal"][i, 0].item() == goal
        g_row, g_ep, g_step = decode(goal)
        assert (g_row, g_ep) == (row, ep)
        last = lengths[row][ep] - 1
        assert {"future": step <= g_step <= last, "final": g_step == last,
                "episode": 0 <= g_step <= last}[strategy]
        assert b.rewards[i].item() == code(row, ep, step) - goal
        picked.setdefault((row, ep, step), set()).add(g_step)
    # every step the strategy allows is drawn (the future's own step included, as SB3)
    for (row, ep, step), seen in picked.items():
        last = lengths[row][ep] - 1
        want = {"future": set(range(step, last + 1)), "final": {last},
                "episode": set(range(last + 1))}[strategy]
        if len(want) <= 3:  # enough draws for the small sets
            assert seen == want, (row, ep, step)


def test_episodes_across_the_ring_wrap_are_kept_whole_or_not_at_all():
    """13 slots for 2 rows (not a multiple): episodes wrap; one the ring overwrote in part is
    never sampled, one too long for the ring never becomes sampleable."""
    replay = her(13, 2, "future", n=1000)
    lengths = [[3, 4, 2, 3, 4, 1, 3], [2, 5, 3, 2, 4, 3, 2]]
    feed(replay, lengths, running=[1, 2])
    assert replay.size == 13 and replay.pos != 0
    for s in replay.sampleable().tolist():  # every slot of a sampleable episode is its own
        start, n = replay.ep_start[s].item(), replay.ep_len[s].item()
        codes = [decode(replay.next_obs["achieved_goal"][(start + 2 * k) % 13, 0].item())
                 for k in range(n)]
        assert [c[2] for c in codes] == list(range(n)) and len({c[:2] for c in codes}) == 1
        row, ep, _ = codes[0]
        assert n == lengths[row][ep]
    b, m = relabelled(replay, 2000)
    for i in range(m):
        row, ep, step = decode(b.next_obs["achieved_goal"][i, 0].item())
        g_row, g_ep, g_step = decode(b.obs["desired_goal"][i, 0].item())
        assert (g_row, g_ep) == (row, ep) and step <= g_step < lengths[row][ep]
    long = her(8, 2)
    feed(long, [[5], [5]], running=[0, 0])  # 10 transitions in 8 slots: both lost their start
    assert len(long.sampleable()) == 0
    with pytest.raises(UserError, match="none has ended yet"):
        long.sample(4)


def test_a_truncated_episode_ends_at_done_and_keeps_bootstrapping():
    replay = her(32, 1, "final", n=1000)
    feed(replay, [[3, 2]], running=[1], truncated=True)
    assert replay.sampleable().tolist() == [0, 1, 2, 3, 4]
    assert (replay.terminated[:5] == 0).all()
    b, m = relabelled(replay, 100)
    assert all(decode(b.obs["desired_goal"][i, 0].item())[2] in (1, 2) for i in range(m))


@pytest.mark.parametrize("n", [1, 4, 9])
def test_the_share_of_relabelled_transitions_is_sb3s_her_ratio(n):
    replay = her(64, 2, "episode", n=n)
    feed(replay, [[6, 6, 6], [5, 5, 5]], running=[0, 3])
    b, _ = relabelled(replay, 1000)
    changed = (b.obs["desired_goal"][:, 0] != STORED_GOAL).sum().item()
    assert changed == int((1 - 1 / (n + 1)) * 1000)
    assert abs(changed / 1000 - n / (n + 1)) < 0.002


# ---- runs -------------------------------------------------------------------------------------

def bits(algo: str = "dqn", n_bits: int = 4, steps: int = 400, *extra: str) -> list[str]:
    return [f"algo={algo}", "env.id=tests.envs.goal_envs:BitFlipping",
            f"+env.kwargs.n_bits={n_bits}", "env.num_envs=2", f"total_timesteps={steps}",
            "algo.replay=her", "algo.learning_starts=64", "algo.batch_size=32",
            "algo.hidden_sizes=[32]", "eval.freq=0", "eval.episodes=4", "eval.num_envs=2",
            "logger=none", "progress=off", "preset=null", *extra]


def test_the_refusals():
    for env in ("env.id=tests.envs.dict_envs:CueTask", "env=CartPole-v1"):
        plain = [o for o in bits() if not o.startswith(("env.id", "+env.kwargs"))]
        with pytest.raises(UserError, match="needs a goal env"):
            Runner(compose_train_config([*plain, env]))
    with pytest.raises(UserError, match="her_goal_selection_strategy='later'"):
        compose_train_config(bits("dqn", 4, 400, "algo.her_goal_selection_strategy=later"))
    with pytest.raises(UserError, match="her_n_sampled_goal=-1"):
        compose_train_config(bits("dqn", 4, 400, "algo.her_n_sampled_goal=-1"))
    with pytest.raises(UserError, match="env.normalize_obs=false"):
        compose_train_config(bits("dqn", 4, 400, "env.normalize_obs=true"))
    with pytest.raises(UserError, match="num_seeds=1"):
        compose_train_config(bits("dqn", 4, 400, "num_seeds=2"))

    class NoReward:  # a goal Dict, no compute_reward
        name = "nogoal"
        venv = None
    with pytest.raises(UserError, match="env nogoal has none"):
        goal_reward(NoReward())


def test_her_resumes_exactly_episode_bookkeeping_included(tmp_path):
    """2 x 200 steps in one run, and 200 + a resume from the step-200 checkpoint: the same
    final weights (the replay restored with its running episodes)."""
    from rltrain.api import train

    over = bits("dqn", 4, 400, "checkpoint.freq=200", "checkpoint.save_buffer=true",
                "algo.train_freq=2")
    train(over, run_dir=tmp_path / "run")
    periodic = checkpoint.load(tmp_path / "run" / "checkpoints" / "step_000000200.pt")
    saved = periodic["replay"]
    assert saved_replay_class(saved) is HerReplayBuffer and saved["size"] == 200
    assert saved["cur_len"].shape == (2,) and (saved["ep_len"] > 0).any()
    resumed = Runner(to_train_config(periodic["config"]), tmp_path / "resumed",
                     resume_from=periodic)
    assert type(resumed.replay) is HerReplayBuffer
    assert torch.equal(resumed.replay.cur_start, saved["cur_start"])
    resumed.run()
    a, r = final_weights(tmp_path / "run"), final_weights(tmp_path / "resumed")
    assert a.keys() == r.keys() and all(torch.equal(a[k], r[k]) for k in a)


def test_the_env_reward_reaches_the_replay_through_the_vector_env():
    cfg = compose_train_config(bits())
    runner = Runner(cfg)
    fn = runner.replay.compute_reward
    ag, dg = np.array([[1, 0, 1, 1], [0, 0, 0, 0]], np.float32), np.zeros((2, 4), np.float32)
    assert fn(ag, dg, [{}, {}]).tolist() == [-1.0, 0.0]


def success_rate(result: dict, n_bits: int) -> float:
    """Episodes that reached the goal (a failure lasts `n_bits` steps at -1 each)."""
    return float(np.mean([r > -n_bits for r in result["returns"]]))


def test_dqn_learns_8_bit_flipping_with_her_and_not_without(tmp_path):
    """Seeded, one env, 3,000 steps (about 5 s each): success 0.98 with HER, 0.02 without
    (measured, seed 0)."""
    from rltrain.api import train

    def run(replay: str) -> float:
        over = ["algo=dqn", "env.id=tests.envs.goal_envs:BitFlipping", "+env.kwargs.n_bits=8",
                "env.num_envs=1", "total_timesteps=3000", f"algo.replay={replay}",
                "algo.learning_starts=200", "algo.batch_size=128", "algo.hidden_sizes=[64]",
                "eval.freq=0", "eval.episodes=50", "eval.num_envs=1", "logger=none",
                "progress=off", "preset=null", "seed=0"]
        return success_rate(train(over, run_dir=tmp_path / replay), 8)

    assert run("her") >= 0.9
    assert run("uniform") <= 0.2
