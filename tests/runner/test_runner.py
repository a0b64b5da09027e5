"""The Runner and the on-policy loop: callbacks, stopping, user-built algorithms, truncation."""

from __future__ import annotations

import csv

import pytest
import torch

from rltrain import api
from rltrain.algos.ppo import PPO
from rltrain.checkpoint import format as checkpoint
from rltrain.errors import UserError
from rltrain.runner.callbacks import EVENTS, Callbacks, LoopState
from rltrain.runner.runner import CONSTRUCTOR_FLAGS, Runner

ORDER = ["pre_iteration", "pre_rollout", "post_rollout", "pre_update", "post_update",
         "post_iteration"]


def test_callbacks_fire_in_order_for_every_event_with_the_typed_loop_state(tmp_path, tiny_cfg):
    assert set(ORDER) == set(EVENTS)
    seen: list[tuple] = []
    states: list[LoopState] = []

    def record(event):
        def fn(state):
            assert isinstance(state, LoopState)
            states.append(state)
            seen.append((event, state.global_step, state.iteration))
        return fn

    cfg = tiny_cfg(total_timesteps=96)  # 16 steps × 2 envs = 32 env steps per iteration
    Runner(cfg, tmp_path, callbacks={e: [record(e)] for e in EVENTS}).run()
    expected = []
    for i in range(3):
        before, after = 32 * i, 32 * (i + 1)
        expected += [("pre_iteration", before, i), ("pre_rollout", before, i),
                     ("post_rollout", after, i), ("pre_update", after, i),
                     ("post_update", after, i + 1), ("post_iteration", after, i + 1)]
    assert seen == expected
    assert all(s is states[0] for s in states)  # one LoopState, updated in place
    assert "train/policy_loss" in states[0].metrics


def test_several_callbacks_on_one_event_run_in_registration_order():
    calls: list[str] = []
    cbs = Callbacks()
    cbs.add("post_update", lambda s: calls.append("first"))
    cbs.add("post_update", lambda s: calls.append("second"))
    cbs.fire("post_update", LoopState(total_timesteps=1))
    cbs.fire("pre_update", LoopState(total_timesteps=1))  # nothing registered: no call
    assert calls == ["first", "second"]


def test_callback_setting_stop_ends_training_after_the_iteration(tmp_path, tiny_cfg):
    def stop(state):
        state.stop, state.stop_reason = True, "enough"

    runner = Runner(tiny_cfg(total_timesteps=10_000), tmp_path)
    runner.add_callback("post_iteration", stop)
    runner.run()
    assert (runner.state.iteration, runner.state.global_step) == (1, 32)
    latest = checkpoint.load(tmp_path / "checkpoints" / "latest.pt")
    assert latest["counters"]["global_step"] == 32


@pytest.mark.parametrize("how", ["constructor", "add_callback"])
def test_unknown_callback_event_is_a_user_error_naming_the_events(tmp_path, tiny_cfg, how):
    with pytest.raises(UserError, match="unknown callback event 'post_step': choose one of"):
        if how == "constructor":
            Runner(tiny_cfg(), tmp_path, callbacks={"post_step": [print]})
        else:
            Runner(tiny_cfg(), tmp_path).add_callback("post_step", print)


def test_a_runner_is_configured_by_its_constructor_never_after(tmp_path, tiny_cfg):
    # a seed batch built its members, then flipped their flags; now it passes them, once
    plain = Runner(tiny_cfg(), tmp_path / "plain")
    assert (plain.setup_lines, plain.stop_line, plain.resume_target, plain.background_evals.allowed) \
        == (True, True, tmp_path / "plain", True)
    member = Runner(tiny_cfg(), tmp_path / "batch" / "seed_0", setup_lines=False,
                    stop_line=False, resume_target=tmp_path / "batch", background_eval=False)
    assert (member.setup_lines, member.stop_line, member.resume_target, member.background_evals.allowed) \
        == (False, False, tmp_path / "batch", False)
    assert set(CONSTRUCTOR_FLAGS) == {"setup_lines", "stop_line", "resume_target"}
    for name in CONSTRUCTOR_FLAGS:
        with pytest.raises(AttributeError, match=rf"Runner\.{name} is set once, by Runner\("):
            setattr(member, name, getattr(plain, name))
    assert member.stop_line is False and member.resume_target == tmp_path / "batch"
    member.started = True  # what the run itself changes is still its own
    assert member.started


def test_algorithm_built_in_python_is_the_one_trained(tmp_path, tiny_cfg):
    cfg = tiny_cfg()
    torch.manual_seed(0)
    mine = PPO(cfg.algo, Runner(cfg, tmp_path / "probe").env.spec)
    before = {k: v.clone() for k, v in mine.policy.state_dict().items()}
    runner = Runner(cfg, tmp_path / "run", algo=mine)
    assert runner.algo is mine
    runner.run()
    after = mine.policy.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)
    saved = checkpoint.load(tmp_path / "run" / "checkpoints" / "final.pt")["algo"]["policy"]
    assert all(torch.equal(saved[k], after[k]) for k in after)


def test_api_train_accepts_a_train_config_algo_and_callbacks(tmp_path, tiny_cfg):
    cfg = tiny_cfg()
    mine = PPO(cfg.algo, Runner(cfg, tmp_path / "probe").env.spec)
    updates: list[int] = []
    result = api.train(cfg, run_dir=tmp_path / "run", algo=mine,
                       callbacks={"post_update": [lambda s: updates.append(s.iteration)]})
    assert updates == [1, 2]
    assert result["episodes"] == cfg.eval.episodes


def test_run_writes_checkpoints_evaluates_on_schedule_and_prunes_periodic_ones(tmp_path, tiny_cfg):
    cfg = tiny_cfg(total_timesteps=128, checkpoint={"freq": 32, "keep_last": 2},
                   eval={"freq": 64}, logger={"csv": True, "log_freq": 0})
    result = Runner(cfg, tmp_path).run()
    names = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    assert names == ["best.pt", "final.pt", "latest.pt", "step_000000096.pt", "step_000000128.pt"]
    assert result["step"] == 128
    with open(tmp_path / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    eval_steps = sorted({int(r["step"]) for r in rows if r["name"] == "eval/mean_reward"})
    assert eval_steps == [64, 128]  # the final evaluation is not repeated at step 128
    train_steps = sorted({int(r["step"]) for r in rows if r["name"] == "train/policy_loss"})
    assert train_steps == [32, 64, 96, 128]
    assert {"time/sps", "rollout/mean_reward"} <= {r["name"] for r in rows}


class ValueIsObs:
    """Stub on-policy algorithm: V(obs) = obs[0], scripted actions, records the update batch."""

    def __init__(self, actions: list[list[int]]):
        self.actions, self.t, self.batches = actions, 0, []
        self.policy = self

    def act(self, obs, deterministic: bool = True):
        if deterministic is not True or self.t >= len(self.actions):  # evaluation: continue
            return torch.zeros(obs.shape[0], dtype=torch.long)
        action = torch.tensor(self.actions[self.t])
        self.t += 1
        return action, torch.zeros(obs.shape[0]), self.value(obs)

    def value(self, obs):
        return obs[:, 0].clone()

    def update(self, batch, progress_remaining: float = 1.0):
        self.batches.append(batch)
        return {}

    def state_dict(self):
        return {}


def test_on_policy_loop_bootstraps_truncated_steps_from_value_of_final_obs(tmp_path, tiny_cfg,
                                                                          counter_env_id):
    # CounterEnv: obs after step k is [k], reward k, action 1 terminates; time limit 2 truncates.
    # Row 0 acts 0,0,0: truncated at t=1 (final obs [2]); obs [0,1,0]; after the rollout obs [1].
    # Row 1 acts 1,0,0: terminated at t=0; truncated at t=2 (final obs [2]); obs [0,0,1].
    # γ = λ = 0.5, V(obs) = obs[0]:
    # Row 0: V = [0, 1, 0]; next V = [1, V(final [2]) = 2, V(last obs [1]) = 1]; rewards [1, 2, 1]
    #        δ = [1 + 0.5·1 − 0, 2 + 0.5·2 − 1, 1 + 0.5·1 − 0] = [1.5, 2, 1.5]
    #        A2 = 1.5; A1 = 2 (episode ended); A0 = 1.5 + 0.25·2 = 2;  R = A + V = [2, 3, 1.5]
    # Row 1: V = [0, 0, 1]; next V = [-(terminated), 1, V(final [2]) = 2]; rewards [1, 1, 2]
    #        δ = [1 − 0, 1 + 0.5·1 − 0, 2 + 0.5·2 − 1] = [1, 1.5, 2]
    #        A2 = 2; A1 = 1.5 + 0.25·2 = 2; A0 = 1 (episode ended);  R = [1, 2, 3]
    algo = ValueIsObs([[0, 1], [0, 0], [0, 0]])
    cfg = tiny_cfg(algo={"n_steps": 3, "batch_size": 6, "gamma": 0.5, "gae_lambda": 0.5},
                   env={"id": counter_env_id, "max_episode_steps": 2}, total_timesteps=6)
    Runner(cfg, tmp_path, algo=algo).run()
    (batch,) = algo.batches
    # flattened t-major: [t0 row0, t0 row1, t1 row0, t1 row1, t2 row0, t2 row1]
    assert batch.obs[:, 0].tolist() == [0.0, 0.0, 1.0, 0.0, 0.0, 1.0]
    assert batch.values.tolist() == [0.0, 0.0, 1.0, 0.0, 0.0, 1.0]
    assert batch.advantages.tolist() == [2.0, 1.0, 2.0, 2.0, 1.5, 2.0]
    assert batch.returns.tolist() == [2.0, 1.0, 3.0, 2.0, 1.5, 3.0]
