"""Evaluation episodes, and `evaluate` rebuilding an agent from a checkpoint alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from rltrain.algos.ppo import PPO
from rltrain.checkpoint import format as checkpoint
from rltrain.checkpoint.run_dir import RunDir
from rltrain.config.schema import EnvConfig, config_to_dict
from rltrain.envs.make import make_env
from rltrain.errors import UserError
from rltrain.evaluation.command import evaluate
from rltrain.evaluation.episodes import eval_metrics, run_episodes


class EndAtThree:
    """Deterministic CounterEnv policy: continue at k < 2, terminate from k = 2 (episodes of 3)."""

    def __init__(self) -> None:
        self.calls: list[bool] = []

    def act(self, obs: torch.Tensor, deterministic: bool = True) -> torch.Tensor:
        self.calls.append(deterministic)
        return (obs[:, 0] >= 2).long()


def test_run_episodes_runs_exactly_the_requested_number_of_episodes(counter_env_id):
    env = make_env(EnvConfig(id=counter_env_id, num_envs=2, max_episode_steps=10), training=False)
    policy = EndAtThree()
    result = run_episodes(policy, env, episodes=5, deterministic=True, seed=0)
    env.close()
    # Each episode: rewards 1 + 2 + 3 (terminated at k = 3).
    assert result["episodes"] == 5
    assert result["returns"] == [6.0] * 5 and result["lengths"] == [3] * 5
    assert (result["mean_reward"], result["std_reward"]) == (6.0, 0.0)
    assert (result["min_reward"], result["max_reward"], result["mean_length"]) == (6.0, 6.0, 3.0)
    assert set(policy.calls) == {True}
    # rows share the episodes evenly: 2 + 3 episodes of 3 steps need 9 vector steps
    assert len(policy.calls) == 9


def test_run_episodes_counts_truncated_episodes_with_their_raw_return(counter_env_id):
    env = make_env(EnvConfig(id=counter_env_id, num_envs=1, max_episode_steps=2), training=False)

    class NeverEnd:
        def act(self, obs, deterministic=True):
            return torch.zeros(obs.shape[0], dtype=torch.long)

    result = run_episodes(NeverEnd(), env, episodes=2, seed=0)
    env.close()
    assert result["returns"] == [3.0, 3.0] and result["lengths"] == [2, 2]


def test_eval_metrics_are_the_eval_namespace_of_the_result():
    result = {"mean_reward": 1.0, "std_reward": 2.0, "min_reward": 0.0, "max_reward": 3.0,
              "mean_length": 4.0, "returns": [1.0]}
    assert eval_metrics(result) == {"eval/mean_reward": 1.0, "eval/std_reward": 2.0,
                                    "eval/min_reward": 0.0, "eval/max_reward": 3.0,
                                    "eval/mean_length": 4.0}


def test_results_go_to_the_run_eval_folder():
    assert RunDir.of_checkpoint("/r/run/checkpoints/latest.pt").eval == Path("/r/run/eval")
    assert RunDir.of_checkpoint("/r/elsewhere/model.pt").eval == Path("/r/elsewhere/eval")


def save_ppo_checkpoint(cfg, run_dir: Path, name: str = "latest.pt") -> Path:
    env = make_env(cfg.env, num_envs=1)
    algo = PPO(cfg.algo, env.spec)
    env.close()
    return checkpoint.save({"config": config_to_dict(cfg), "algo": algo.state_dict(), "env": {},
                            "counters": {"global_step": 777}},
                           run_dir / "checkpoints" / name)


def test_evaluate_rebuilds_the_agent_from_the_checkpoint_and_writes_results(tmp_path, tiny_cfg):
    cfg = tiny_cfg(env={"max_episode_steps": 20})
    path = save_ppo_checkpoint(cfg, tmp_path)
    result = evaluate(tmp_path, episodes=3, num_envs=2, seed=5)  # a run dir works
    assert result["checkpoint"] == str(path)
    assert (result["algo"], result["env"], result["global_step"]) == ("ppo", "CartPole-v1", 777)
    assert result["episodes"] == 3 and len(result["returns"]) == 3
    assert all(1 <= n <= 20 for n in result["lengths"])  # the stored time limit is applied
    written = json.loads((tmp_path / "eval" / "results.json").read_text())
    assert written["returns"] == result["returns"]
    assert written["mean_reward"] == pytest.approx(sum(result["returns"]) / 3)
    assert result["results_path"] == str(tmp_path / "eval" / "results.json")


def test_evaluate_is_reproducible_with_the_same_seed(tmp_path, tiny_cfg):
    path = save_ppo_checkpoint(tiny_cfg(env={"max_episode_steps": 20}), tmp_path)
    a = evaluate(path, episodes=2, num_envs=2, seed=1, deterministic=False, write=False)
    b = evaluate(path, episodes=2, num_envs=2, seed=1, deterministic=False, write=False)
    assert a["returns"] == b["returns"]


def test_evaluate_refuses_weights_that_do_not_match_the_stored_config(tmp_path, tiny_cfg):
    path = save_ppo_checkpoint(tiny_cfg(), tmp_path)
    data = checkpoint.load(path)
    data["config"]["algo"]["hidden_sizes"] = [8]  # the stored weights are 16-wide
    checkpoint.save({k: v for k, v in data.items() if k != "format_version"}, path)
    with pytest.raises(UserError, match="network weights do not match"):
        evaluate(path, episodes=1, num_envs=1, write=False)


def test_evaluate_of_a_missing_checkpoint_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        evaluate(tmp_path / "missing.pt", episodes=1)


def test_an_episode_that_never_ends_is_cut_and_the_evaluation_ends(counter_env_id, caplog):
    """An env without a time limit and a policy that never ends its episode: each row gives
    its running episode as its last one at the cap, with a warning, instead of a hang."""
    env = make_env(EnvConfig(id=counter_env_id, num_envs=2), training=False)  # no time limit

    class NeverEnd:
        def act(self, obs, deterministic=True):
            return torch.zeros(obs.shape[0], dtype=torch.long)

    result = run_episodes(NeverEnd(), env, episodes=4, seed=0, max_episode_steps=5)
    env.close()
    assert result["episodes"] == 2 and result["lengths"] == [5, 5]  # one cut episode per row
    assert result["returns"] == [15.0, 15.0]  # rewards 1 + 2 + 3 + 4 + 5, raw
    assert "ran 5 steps without ending" in caplog.text and "env.max_episode_steps" in caplog.text


def test_a_long_evaluation_says_how_far_it_got(counter_env_id, caplog, monkeypatch):
    """Breakout evaluated without FIRE runs 27,000 steps an episode: minutes with nothing on
    the console. A heartbeat every HEARTBEAT_S seconds (0 here: every step)."""
    import logging

    from rltrain.evaluation import episodes as evaluation

    monkeypatch.setattr(evaluation, "HEARTBEAT_S", 0.0)
    env = make_env(EnvConfig(id=counter_env_id, num_envs=2, max_episode_steps=10), training=False)
    with caplog.at_level(logging.INFO, logger="rltrain"):
        run_episodes(EndAtThree(), env, episodes=4, seed=0)
    env.close()
    beats = [r.getMessage() for r in caplog.records if r.getMessage().startswith("evaluation:")]
    assert len(beats) == 6  # before each of the 6 vector steps (2 rows x 2 episodes of 3)
    assert beats[0].startswith("evaluation: 0 of 4 episodes done, 0 env steps so far (")
    assert beats[-1].startswith("evaluation: 2 of 4 episodes done, 10 env steps so far (")


class WithoutEpisodeInfo:
    """A VecEnv that reports ends (terminated / truncated) but no info["episode"], as a native
    batched env may: evaluation once waited for episodes it never counted."""

    def __init__(self, env):
        self.env, self.spec, self.device = env, env.spec, env.device

    def reset(self, seed=None):
        return self.env.reset(seed)

    def step(self, action):
        res = self.env.step(action)
        res.info.pop("episode", None)
        return res


def test_an_env_without_episode_info_is_evaluated_from_its_own_rewards(counter_env_id):
    env = make_env(EnvConfig(id=counter_env_id, num_envs=2, max_episode_steps=10), training=False)
    calls = iter(range(10**9))  # a regression stops with EvalInterrupted, not a hang
    result = run_episodes(EndAtThree(), WithoutEpisodeInfo(env), episodes=5, deterministic=True,
                          seed=0, stop=lambda: next(calls) > 1000)
    env.close()
    assert result["returns"] == [6.0] * 5 and result["lengths"] == [3] * 5


def test_package_names_are_the_api_functions_after_every_submodule_is_loaded():
    """README's `from rltrain import train, evaluate, Runner`: a submodule of the same name,
    once imported (training imports them all), would shadow the lazy name on the package."""
    import importlib
    import pkgutil

    import rltrain

    for mod in pkgutil.walk_packages(rltrain.__path__, "rltrain."):
        if not mod.name.endswith("__main__"):  # (running the command, not a module to load)
            importlib.import_module(mod.name)
    from rltrain import Runner, evaluate, train
    from rltrain.api import train as api_train
    from rltrain.runner.runner import Runner as RunnerClass

    assert evaluate is rltrain.evaluation.command.evaluate and train is api_train and Runner is RunnerClass


@pytest.mark.parametrize("kwargs, message", [
    ({"episodes": 0}, "episodes=0 must be > 0"),
    ({"episodes": -3}, "episodes=-3 must be > 0"),
    ({"num_envs": 0}, "num_envs=0 must be > 0"),
    ({"seed": None}, "seed=None must be an integer"),
    ({"seed": -1}, "seed=-1"),
    ({"episodes": 2.5}, "episodes=2.5 must be an integer"),
])
def test_evaluate_from_python_checks_its_arguments_as_rltrain_eval_does(kwargs, message,
                                                                         tiny_cfg, tmp_path):
    """From Python these were a ValueError (zero-size array), an IndexError, a TypeError, an
    env error blaming CartPole for seed=-1, or an evaluation of zero envs."""
    save_ppo_checkpoint(tiny_cfg(), tmp_path)
    with pytest.raises(UserError, match=message.replace(".", r"\.")):
        evaluate(tmp_path, **kwargs)
    assert not (tmp_path / "eval").exists()


def test_evaluate_refuses_a_run_folder_it_cannot_write_before_evaluating(tiny_cfg, tmp_path,
                                                                         monkeypatch):
    """A read-only run: `rltrain eval` ended in a PermissionError traceback after the episodes."""
    import os

    save_ppo_checkpoint(tiny_cfg(), tmp_path)
    played = []
    monkeypatch.setattr("rltrain.evaluation.command.run_episodes", lambda *a, **k: played.append(1))
    monkeypatch.setattr(os, "access", lambda path, mode: Path(path) != tmp_path.absolute())
    with pytest.raises(UserError, match="evaluate writes eval/results.json into the run folder "
                                        r"\(copy the run somewhere writable; from Python, "
                                        r"write=False\), and .* is not writable"):
        evaluate(tmp_path, episodes=2)
    assert played == []
    monkeypatch.undo()
    assert evaluate(tmp_path, episodes=2, num_envs=2, write=False)["episodes"] == 2


@pytest.mark.parametrize(("algo", "env_id"), [("dqn", "CartPole-v1"), ("td3", "Pendulum-v1")])
def test_deterministic_false_on_a_deterministic_policy_says_so_and_records_it(
        tmp_path, algo, env_id):
    """DQN's, TD3's and DDPG's policies have no stochastic mode: `deterministic=false` was
    reported as a "(stochastic)" evaluation of the same actions."""
    from rltrain.api import train

    train([f"algo={algo}", f"env.id={env_id}", "total_timesteps=200", "algo.learning_starts=100",
           "algo.hidden_sizes=[8]", "eval.episodes=1", "env.max_episode_steps=20", "logger=none",
           "progress=off"], run_dir=tmp_path / "run")
    greedy = evaluate(tmp_path / "run", episodes=2, num_envs=1, write=False)
    result = evaluate(tmp_path / "run", episodes=2, num_envs=1, deterministic=False, write=False)
    assert result["deterministic"] is True and result["returns"] == greedy["returns"]
    assert result["note"].startswith(f"{algo}'s policy is deterministic") and "note" not in greedy


def test_deterministic_false_on_a_stochastic_policy_has_no_note(tmp_path, tiny_cfg):
    path = save_ppo_checkpoint(tiny_cfg(env={"max_episode_steps": 20}), tmp_path)
    result = evaluate(path, episodes=2, num_envs=2, seed=1, deterministic=False, write=False)
    assert result["deterministic"] is False and "note" not in result
