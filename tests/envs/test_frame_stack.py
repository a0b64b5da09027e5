"""`env.frame_stack` for vector observations: the stack against a naive per-row history, episode
boundaries that never leak an earlier episode's observations, and the config's errors."""

from __future__ import annotations

import pytest
import torch

from rltrain.config.compose import compose_train_config
from rltrain.envs.frame_stack import VectorFrameStack
from rltrain.envs.make import capture_problem, make_env
from rltrain.errors import UserError
from rltrain.types import EnvSpec, StepResult


class Script:
    """A 2-row VecEnv whose obs at step t are [t, row]; row 0 ends at step 2, row 1 at step 3."""

    spec = EnvSpec(obs_shape=(2,), action_kind="discrete", action_dim=2, num_envs=2)
    device = torch.device("cpu")
    ends = {2: [True, False], 3: [False, True]}

    def reset(self, seed=None):
        self.t = 0
        return torch.tensor([[0.0, 0.0], [0.0, 1.0]])

    def step(self, action):
        self.t += 1
        final = torch.tensor([[self.t, 0.0], [self.t, 1.0]])
        done = torch.tensor(self.ends.get(self.t, [False, False]))
        obs = torch.where(done.unsqueeze(1), -final, final)  # a reset row starts at -[t, row]
        return StepResult(obs, torch.zeros(2), done, torch.zeros(2, dtype=torch.bool), final, {})

    def close(self):
        pass


def naive(history: list[list[float]], k: int, dim: int = 2) -> list[float]:
    """The last k observations of one row's current episode, zero-padded in front."""
    padded = [[0.0] * dim] * max(0, k - len(history)) + history[-k:]
    return [x for obs in padded for x in obs]


def test_the_stack_matches_a_naive_per_row_history_across_episode_ends():
    env = VectorFrameStack(Script(), 3)
    assert env.spec.obs_shape == (6,)
    obs = env.reset()
    hist = [[[0.0, 0.0]], [[0.0, 1.0]]]
    assert obs.tolist() == [naive(h, 3) for h in hist]
    for t in range(1, 6):
        res = env.step(torch.zeros(2, dtype=torch.long))
        for row in range(2):
            ended = bool(res.terminated[row])
            hist[row].append([float(t), float(row)])
            assert res.final_obs[row].tolist() == naive(hist[row], 3), (t, row)
            if ended:  # the new episode's first observation alone, nothing of the old one
                hist[row] = [[-float(t), -float(row)]]
            assert res.obs[row].tolist() == naive(hist[row], 3), (t, row)


def test_frame_stack_builds_from_the_config_and_says_resume_restarts_episodes():
    cfg = compose_train_config(["algo=ppo", "env=CartPole-v1", "env.frame_stack=4", "tuned=none",
                                "env.num_envs=2", "logger=none"])
    env = make_env(cfg.env)
    try:
        assert env.spec.obs_shape == (16,) and env.reset(0).shape == (2, 16)
        assert "env.frame_stack" in capture_problem(env)
    finally:
        env.close()


@pytest.mark.parametrize("overrides, message", [
    (["env.frame_stack=-1"], "env.frame_stack=-1 must be a whole number >= 0"),
    (["env=pixel_cartpole", "env.frame_stack=2"], "use env.atari.frame_stack"),
])
def test_bad_frame_stack_settings_are_one_line(overrides, message):
    with pytest.raises(UserError, match=message):
        cfg = compose_train_config(["algo=ppo", *overrides, "env.num_envs=1", "logger=none"])
        make_env(cfg.env).close()
