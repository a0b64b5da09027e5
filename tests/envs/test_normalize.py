"""Observation normalization and reward scaling wrappers, and their saved statistics."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
import torch

from rltrain.config.schema import EnvConfig
from rltrain.envs.make import env_state, load_env_state, make_env
from rltrain.envs.normalize import NormalizeObs, RunningMeanStd, ScaleReward
from rltrain.types import EnvSpec, StepResult


class ScriptedEnv:
    """A VecEnv that replays a fixed reset observation and a list of StepResults."""

    def __init__(self, reset_obs: list, steps: list[StepResult]):
        self.spec = EnvSpec((len(reset_obs[0]),), "discrete", 2, len(reset_obs))
        self.device = torch.device("cpu")
        self._reset_obs, self._steps = torch.tensor(reset_obs), list(steps)

    def reset(self, seed=None):
        return self._reset_obs.clone()

    def step(self, action):
        res = self._steps.pop(0)
        return StepResult(res.obs.clone(), res.reward.clone(), res.terminated, res.truncated,
                          res.final_obs.clone(), dict(res.info))

    def close(self):
        pass


def step(obs, reward=(0.0, 0.0), terminated=(False, False), final_obs=None) -> StepResult:
    obs = torch.tensor(obs)
    return StepResult(obs, torch.tensor(reward), torch.tensor(terminated),
                      torch.tensor([False, False]),
                      obs if final_obs is None else torch.tensor(final_obs))


def obs_env() -> ScriptedEnv:
    # Reset [0,0],[2,4]; one step to [4,8],[6,12] where row 0 ended with final obs [5,10].
    return ScriptedEnv([[0.0, 0.0], [2.0, 4.0]],
                       [step([[4.0, 8.0], [6.0, 12.0]], final_obs=[[5.0, 10.0], [6.0, 12.0]])])


def test_running_mean_std_matches_numpy_over_batches():
    rng = np.random.default_rng(0)
    batches = [rng.normal(3.0, 2.0, (n, 2)) for n in (5, 1, 17)]
    rms = RunningMeanStd((2,), torch.device("cpu"))
    for b in batches:
        rms.update(torch.as_tensor(b))
    data = np.concatenate(batches)
    np.testing.assert_allclose(rms.mean.numpy(), data.mean(0), rtol=1e-4)
    np.testing.assert_allclose(rms.var.numpy(), data.var(0), rtol=1e-4)
    assert rms.count == pytest.approx(23, abs=1e-3)


def test_running_statistics_never_change_a_state_dict_taken_earlier():
    # A checkpoint's state_dict holds the CPU tensors themselves: updates must build new ones.
    rms = RunningMeanStd((2,), torch.device("cpu"))
    rms.update(torch.tensor([[1.0, 2.0], [3.0, 6.0]]))
    saved = rms.state_dict()
    before = (saved["mean"].clone(), saved["var"].clone())
    rms.update(torch.tensor([[10.0, -4.0]]))
    assert torch.equal(saved["mean"], before[0]) and torch.equal(saved["var"], before[1])
    assert not torch.equal(rms.mean, before[0])


def test_normalized_obs_and_final_obs_share_no_elements():
    env = NormalizeObs(obs_env())
    env.reset()
    res = env.step(torch.tensor([0, 0]))
    final = res.final_obs.clone()
    res.obs.fill_(123.0)  # a buffer writing into one must leave the other alone
    assert torch.equal(res.final_obs, final)


def test_normalize_obs_applies_the_same_statistics_to_obs_and_final_obs():
    env = NormalizeObs(obs_env(), clip=10.0)
    env.reset()
    res = env.step(torch.tensor([0, 0]))
    # Statistics of the 4 observations seen ([0,0] [2,4] [4,8] [6,12]): mean [3, 6], var [5, 20].
    sd = torch.tensor([math.sqrt(5.0), math.sqrt(20.0)])
    torch.testing.assert_close(res.obs, (torch.tensor([[4.0, 8.0], [6.0, 12.0]]) - torch.tensor([3.0, 6.0])) / sd,
                               atol=1e-4, rtol=1e-4)
    # Row 0's final obs [5, 10] uses the same statistics: (2/√5, 4/√20).
    torch.testing.assert_close(res.final_obs[0], torch.tensor([2.0, 4.0]) / sd, atol=1e-4, rtol=1e-4)
    assert res.obs.dtype == res.final_obs.dtype == torch.float32


def test_normalize_obs_with_training_off_keeps_statistics_frozen_and_clips():
    env = NormalizeObs(obs_env(), clip=5.0, training=False)
    assert env.reset().tolist() == [[0.0, 0.0], [2.0, 4.0]]  # mean 0, var 1: unchanged
    res = env.step(torch.tensor([0, 0]))
    assert res.obs.tolist() == [[4.0, 5.0], [5.0, 5.0]]  # clipped to ±5
    assert env.rms.mean.tolist() == [0.0, 0.0] and env.rms.var.tolist() == [1.0, 1.0]


def test_scale_reward_divides_by_std_of_discounted_return_reset_at_episode_end():
    env = ScaleReward(ScriptedEnv([[0.0], [0.0]], [
        step([[0.0], [0.0]], reward=(1.0, 3.0), terminated=(False, True)),
        step([[0.0], [0.0]], reward=(1.0, 1.0)),
    ]), gamma=0.5)
    env.reset()
    # Discounted returns seen: [1, 3] (var 1), so rewards are divided by 1.
    assert env.step(torch.tensor([0, 0])).reward.tolist() == pytest.approx([1.0, 3.0], rel=1e-3)
    # Row 1 ended, its return restarts: row 0 1·0.5 + 1 = 1.5, row 1 0·0.5 + 1 = 1.
    # Returns seen [1, 3, 1.5, 1]: mean 1.625, var (0.390625 + 1.890625 + 0.015625 + 0.390625)/4
    # = 0.671875, so the rewards [1, 1] become 1/√0.671875.
    expected = 1.0 / math.sqrt(0.671875)
    assert env.step(torch.tensor([0, 0])).reward.tolist() == pytest.approx([expected] * 2, rel=1e-3)


def test_saved_statistics_restore_into_a_frozen_eval_env_and_load_weights_only():
    train = ScaleReward(NormalizeObs(obs_env()), gamma=0.99)
    train.reset()
    train.step(torch.tensor([0, 0]))
    state = env_state(train)
    assert set(state) == {"obs_rms", "ret_rms"}
    buf = io.BytesIO()
    torch.save(state, buf)
    buf.seek(0)
    state = torch.load(buf, weights_only=True)  # checkpoints load this way

    evaluation = NormalizeObs(obs_env(), training=False)
    load_env_state(evaluation, state)
    inner = train.env
    probe = torch.tensor([[1.0, 1.0], [7.0, -3.0]])
    torch.testing.assert_close(evaluation.normalize(probe), inner.normalize(probe))
    torch.testing.assert_close(evaluation.rms.var, inner.rms.var)


def test_make_env_adds_reward_scaling_only_for_training():
    cfg = EnvConfig(id="CartPole-v1", num_envs=1, normalize_obs=True, normalize_reward=True)
    train, evaluation = make_env(cfg), make_env(cfg, training=False)
    assert isinstance(train, ScaleReward) and isinstance(train.env, NormalizeObs)
    assert train.env.training
    assert isinstance(evaluation, NormalizeObs) and not evaluation.training
    train.close()
    evaluation.close()


class RandomEnv:
    """A VecEnv of random float32 observations, rewards of every scale and random episode ends
    (`final_obs` its own tensor on the rows that ended, else `obs` itself), from a seed."""

    def __init__(self, num_envs: int, dim: int, seed: int, dtypes=(torch.float32, torch.float32),
                 grad: bool = False):
        self.spec = EnvSpec((dim,), "discrete", 2, num_envs)
        self.device = torch.device("cpu")
        self.gen = torch.Generator().manual_seed(seed)
        self.dtypes, self.grad = dtypes, grad

    def _obs(self) -> torch.Tensor:
        n, dim = self.spec.num_envs, self.spec.obs_shape[0]
        x = torch.randn(n, dim, generator=self.gen) * 10 ** torch.randint(-3, 4, (1,), generator=self.gen)
        return x.to(self.dtypes[0]).requires_grad_(self.grad)

    def reset(self, seed=None):
        return self._obs()

    def step(self, action):
        n = self.spec.num_envs
        obs = self._obs()
        ended = torch.rand(n, generator=self.gen) < 0.05
        reward = torch.randn(n, generator=self.gen) * 10 ** torch.randint(-2, 3, (1,), generator=self.gen)
        final = torch.where(ended.unsqueeze(1), self._obs(), obs) if ended.any() else obs
        return StepResult(obs, reward.to(self.dtypes[1]).requires_grad_(self.grad), ended,
                          torch.zeros(n, dtype=torch.bool), final)

    def close(self):
        pass


@pytest.mark.parametrize(("num_envs", "dtypes", "grad"), [
    (1, (torch.float32, torch.float32), False),
    (3, (torch.float32, torch.float32), False),
    (1, (torch.float64, torch.float64), False),  # a batched env's own dtypes: any float
    (2, (torch.bfloat16, torch.float16), False),
    (2, (torch.float32, torch.float32), True),  # a differentiable simulator's tensors
])
def test_the_numpy_path_on_the_cpu_is_the_torch_path_bit_for_bit(num_envs, dtypes, grad,
                                                                 monkeypatch):
    """The CPU's numpy arithmetic (and the one-row fold) against torch's ops, 400 steps of
    observations, rewards and episode ends at scales from 1e-3 to 1e3: every output equal, in
    value and dtype (a float64 reward came back float64 and off in the 8th digit; bfloat16 or
    grad-requiring tensors raised in numpy)."""
    from rltrain.envs import normalize

    def run() -> list[torch.Tensor]:
        env = ScaleReward(NormalizeObs(RandomEnv(num_envs, 5, 3, dtypes, grad), clip=5.0),
                          gamma=0.99)
        outs = [env.reset()]
        for _ in range(400):
            res = env.step(None)
            outs += [res.obs, res.final_obs, res.reward]
        rms = env.env.rms
        return [*outs, rms.mean, rms.var, env.rms.mean, env.rms.var]

    fast = run()
    monkeypatch.setattr(normalize, "in_numpy", lambda *args: False)
    monkeypatch.setattr(RunningMeanStd, "_fold_row", lambda self, row: self._fold(
        row, torch.var_mean(row.unsqueeze(0), 0, correction=0)[0], 1))
    reference = run()
    assert all(a.dtype == b.dtype and torch.equal(a.detach(), b.detach())
               for a, b in zip(fast, reference, strict=True))
