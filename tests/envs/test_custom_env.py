"""Your own environments: `module:Id`, `env.import`, factories, native VecEnvs, wrappers by name,
and the one-line errors when any of them is wrong. The user's module is `tests/envs/my_envs.py`."""

from __future__ import annotations

import csv
import os
import re
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest
import torch

from rltrain.checkpoint import format as checkpoint
from rltrain.config.schema import EnvConfig, WrapperConfig
from rltrain.envs.contract import ContractChecked
from rltrain.envs.make import make_env, make_one_env
from rltrain.envs.trust import NamedCode
from rltrain.envs.vec_env import GymVecEnv
from rltrain.errors import UserError
from rltrain.evaluation.command import evaluate
from rltrain.runner.runner import Runner
from tests.e2e.harness import EXIT_TRAINING, assert_refused, run_cli
from tests.e2e.test_cli import RLTRAIN, assert_one_error_line, describe
from tests.envs import my_envs
from tests.envs.my_envs import GOAL_REWARD, STEP_COST, CorridorVecEnv

MODULE = "tests.envs.my_envs"
REPO = Path(__file__).resolve().parents[2]
RIGHT, LEFT = torch.tensor([1, 1]), torch.tensor([0, 0])
# RewardOffset(+1) inside ClipReward(<= 1): steps pay 0.9, reaching the goal pays 2 -> 1
WRAPPERS = [{"name": f"{MODULE}:RewardOffset", "kwargs": {"offset": 1.0}},
            {"name": "ClipReward", "kwargs": {"min_reward": -1, "max_reward": 1}},
            {"name": "TimeAwareObservation"}]


@pytest.fixture(autouse=True)
def _no_learning_curve(monkeypatch):
    monkeypatch.setattr("rltrain.runner.runner.write_run_curve", lambda run_dir: None)


# ---- through the CLI ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def cli_run(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    """`rltrain env.id=tests.envs.my_envs:Corridor-v0` with three wrappers, 256 steps, run from
    the repo root (the module is found in the current folder, as a user's would be)."""
    run_dir = tmp_path_factory.mktemp("custom") / "run"
    wrappers = ("[{name:'tests.envs.my_envs:RewardOffset',kwargs:{offset:1.0}},"
                "{name:ClipReward,kwargs:{min_reward:-1,max_reward:1}},{name:TimeAwareObservation}]")
    args = ["debug=smoke", f"env.id={MODULE}:Corridor-v0", f"env.wrappers={wrappers}",
            "env.num_envs=2", "algo.n_steps=32", "algo.batch_size=64", "algo.hidden_sizes=[16,16]",
            "total_timesteps=256", "eval.freq=128", "logger=none", "progress=off",
            f"hydra.run.dir={run_dir}"]
    env = {k: v for k, v in os.environ.items() if k not in ("RLTRAIN_DEBUG", "PYTHONPATH")}
    proc = subprocess.run([*RLTRAIN, *args], cwd=REPO, capture_output=True, text=True, timeout=180,
                          env={**env, "SDL_VIDEODRIVER": "dummy"})
    return proc, run_dir


def test_cli_trains_a_registered_env_of_ones_own_module_with_wrappers(cli_run):
    proc, run_dir = cli_run
    assert proc.returncode == 0, describe(proc)
    payload = checkpoint.load(run_dir / "checkpoints" / "final.pt")
    assert payload["config"]["env"]["id"] == f"{MODULE}:Corridor-v0"
    assert payload["counters"]["global_step"] == 256
    # TimeAwareObservation: the policy sees [position, 1, time] -> a first layer of width 3
    assert any(tuple(t.shape) == (16, 3) for t in payload["algo"]["policy"].values())
    # the checkpoint names code: not imported; the hint gives the command line's and Python's form
    hint = re.escape(f"add env.import={MODULE} to this command (evaluate or export_policy in "
                     f"Python: named=NamedCode(modules=frozenset({{'{MODULE}'}})), rltrain.envs.trust)")
    with pytest.raises(UserError, match=hint):
        evaluate(run_dir, episodes=4, write=False)
    # rebuilt from the checkpoint's config, once the user names the module again
    result = evaluate(run_dir, episodes=4, write=False, named=NamedCode(frozenset({MODULE})))
    for ret, length in zip(result["returns"], result["lengths"], strict=True):
        expected = 0.9 * (length - 1) + 1.0 if length < 50 else 0.9 * 50  # wrappers in order
        assert ret == pytest.approx(expected, abs=1e-5), (ret, length)


def run_train_command(argv: list[str], monkeypatch, cwd: Path) -> list[str]:
    """Run the CLI's checks for `argv` (everything before Hydra) in `cwd`, where the run's
    folder is claimed; return what Hydra would get."""
    from rltrain.cli import train as cli

    monkeypatch.chdir(cwd)
    seen: list[str] = []
    monkeypatch.setattr(cli, "_train_task", lambda args, collective, composed=None: seen.extend(args))
    monkeypatch.setattr(sys, "argv", ["rltrain", *argv])
    cli.train_command(argv)
    return seen


@pytest.mark.parametrize("argv", [
    [f"env.id={MODULE}:Corridor-v0"],
    [f"env={MODULE}:Corridor-v0"],
    [f"env.import={MODULE}", "env=Corridor-v0"],
    [f"env.imports=[{MODULE}]", "env.id=Corridor-v0"],
    [f"env.id={MODULE}:make_corridor", "+env.kwargs.length=3"],
    [f"env.id={MODULE}:make_vec_corridor"],
    [f"env.id={MODULE}:CorridorVecEnv", "+env.kwargs.horizon=5"],
    ["env=CartPole-v1", "env.backend=torch"],
], ids=["module_id", "group_choice", "import_alias", "imports_list", "factory", "vec_factory",
        "vec_class", "native"])
def test_every_env_form_passes_the_cli_checks_before_hydra(argv, monkeypatch, tmp_path):
    if "env=Corridor-v0" in argv:  # prove the import happens first: forget the module and its id
        monkeypatch.delitem(sys.modules, MODULE)
        monkeypatch.delitem(gym.registry, "Corridor-v0")
    hydra_argv = run_train_command(argv, monkeypatch, tmp_path)
    assert hydra_argv, "the checks refused a valid command line"
    if argv[0].startswith("env.import="):
        assert hydra_argv[0] == f"env.imports=[{MODULE}]"


BAD = {
    "missing_module": (["env.id=my_pkg.envs:Maze-v0"],
                       "cannot import env module 'my_pkg.envs': No module named 'my_pkg'"),
    "missing_import": (["env.import=my_pkg.envs"],
                       "cannot import env module 'my_pkg.envs': No module named 'my_pkg'"),
    "unknown_id": ([f"env.id={MODULE}:Corridr-v0"],
                   f"module '{MODULE}' registers no env 'Corridr-v0' and has no factory of that "
                   f"name: did you mean Corridor-v0"),
    "unknown_group_choice": ([f"env={MODULE}:Corridr-v0"], "did you mean Corridor-v0"),
    "unknown_wrapper": (["env.wrappers=[{name:ClipRewards}]"],
                        "unknown wrapper 'ClipRewards': did you mean ClipReward"),
    "wrapper_kwargs": (["env.wrappers=[{name:ClipReward,kwargs:{mn:1}}]"],
                       "env.wrappers ClipReward: got an unexpected keyword argument 'mn'"),
    "wrapper_shape": (["env.wrappers=[TimeAwareObservation]"],
                      "env.wrappers[0]: expected a mapping {name: ..., kwargs: ...}, got str"),
    "factory_kwargs": ([f"env.id={MODULE}:make_corridor", "+env.kwargs.lenght=3"],
                       "got an unexpected keyword argument 'lenght'"),
    "kwargs_without_plus": ([f"env.id={MODULE}:make_corridor", "env.kwargs.length=3"],
                            "env.kwargs.length is not set yet: add it with a leading +, as "
                            "`+env.kwargs.length=3`"),
    "vec_wrappers": ([f"env.id={MODULE}:make_vec_corridor", "env.wrappers=[{name:ClipReward}]"],
                     "env.wrappers wrap gymnasium envs"),
    "native_other_id": (["env=Acrobot-v1", "env.backend=torch"],
                        "env.backend=torch has no native 'Acrobot-v1': available are "
                        "CartPole-v1, Pendulum-v1"),
    "bad_backend": (["env.backend=jax"], "env.backend='jax': choose auto, gymnasium, envpool, ale, torch"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_env_input_is_one_error_line_exit_2_and_no_run_dir(name, tmp_path, monkeypatch, capfd):
    from rltrain.cli import main

    argv, fragment = BAD[name]
    monkeypatch.delenv("RLTRAIN_DEBUG", raising=False)
    monkeypatch.setattr(sys, "argv", ["rltrain", *argv, f"hydra.run.dir={tmp_path / 'run'}"])
    with pytest.raises(SystemExit) as exit_info:
        main()
    out, err = capfd.readouterr()
    assert_one_error_line(exit_info.value.code, out, err, fragment)
    assert not (tmp_path / "run").exists()


# ---- make_env ------------------------------------------------------------------------------------

def test_module_id_builds_the_registered_env_of_that_module():
    env = make_env(EnvConfig(id=f"{MODULE}:Corridor-v0", num_envs=2))
    assert isinstance(env, GymVecEnv) and env.spec.obs_shape == (2,)
    env.reset(seed=0)
    rewards = [env.step(RIGHT).reward.tolist() for _ in range(4)]
    assert rewards == [[pytest.approx(STEP_COST)] * 2] * 3 + [[GOAL_REWARD] * 2]
    env.close()


def test_factory_gets_env_kwargs_and_the_time_limit_and_wrappers_apply_in_order():
    cfg = EnvConfig(id=f"{MODULE}:make_corridor", num_envs=2, kwargs={"length": 2},
                    max_episode_steps=3, wrappers=[WrapperConfig(**w) for w in WRAPPERS])
    env = make_env(cfg)
    assert env.spec.obs_shape == (3,)  # TimeAwareObservation added the time
    env.reset(seed=0)
    res = [env.step(a) for a in (RIGHT, RIGHT)]  # length 2: the goal in two steps
    assert [r.reward.tolist() for r in res] == [[pytest.approx(0.9)] * 2, [1.0, 1.0]]  # 2 -> 1
    assert res[1].terminated.all() and res[1].info["episode"]["length"].tolist() == [2, 2]
    res = [env.step(a) for a in (LEFT, LEFT, LEFT)]  # never reaches the goal: time limit 3
    assert res[2].truncated.all() and res[2].info["episode"]["length"].tolist() == [3, 3]
    env.close()


def test_gymnasium_wrappers_get_tuples_where_a_command_line_can_only_write_lists(
        tmp_path, monkeypatch, capfd):
    """ResizeObservation(shape=...) refuses a list ("requires shape to be a tuple"), and Hydra
    has no tuples: the standard resize of CarRacing and other image envs was unusable."""
    resize = "env.wrappers=[{name:ResizeObservation,kwargs:{shape:[40,40]}}]"
    result = run_cli(["algo=ppo", "env.id=rltrain.envs.pixels:PixelCartPole", resize,
                      "env.num_envs=2", "algo.n_steps=32", "algo.batch_size=32",
                      "total_timesteps=64", "eval.episodes=1", "logger=none",
                      "hydra.run.dir=run"], tmp_path, monkeypatch, capfd)
    assert result.rc == 0, result.describe()
    payload = checkpoint.load(tmp_path / "run" / "checkpoints" / "final.pt")
    assert payload["config"]["env"]["wrappers"][0]["kwargs"]["shape"] == [40, 40]  # as given
    env = make_env(EnvConfig(id="rltrain.envs.pixels:PixelCartPole", num_envs=1, wrappers=[
        WrapperConfig(name="ResizeObservation", kwargs={"shape": [40, 40]})]))
    assert env.spec.obs_shape == (40, 40, 3) and tuple(env.reset(0).shape) == (1, 40, 40, 3)
    env.close()


@pytest.mark.parametrize("name", ["make_vec_corridor", "CorridorVecEnv"])
def test_batched_factory_or_class_is_built_directly_with_num_envs_device_and_kwargs(name):
    CorridorVecEnv.built.clear()
    env = make_env(EnvConfig(id=f"{MODULE}:{name}", num_envs=3, kwargs={"length": 2}),
                   torch.device("cpu"), num_envs=5)
    # no gymnasium adapter in between: only the check of its first reset and step
    assert isinstance(env, ContractChecked) and isinstance(env.env, CorridorVecEnv)
    assert CorridorVecEnv.built == [{"num_envs": 5, "device": torch.device("cpu"), "length": 2,
                                     "horizon": 20}]


def test_a_batched_factory_must_return_a_vec_env(monkeypatch):
    monkeypatch.setattr(my_envs, "make_junk", lambda num_envs, device: object(), raising=False)
    with pytest.raises(UserError, match=f"env factory {MODULE}:make_junk returned an object of "
                                        f"type object, not a VecEnv"):
        make_env(EnvConfig(id=f"{MODULE}:make_junk"))


def test_a_per_env_factory_must_return_a_gymnasium_env():
    with pytest.raises(UserError, match="returned an object of type int, not a gymnasium.Env"):
        make_env(EnvConfig(id=f"{MODULE}:make_nothing", num_envs=1))


def test_a_batched_env_cannot_give_one_gymnasium_env_for_video():
    with pytest.raises(UserError, match="is a batched VecEnv"):
        make_one_env(EnvConfig(id=f"{MODULE}:make_vec_corridor"), render_mode="rgb_array")


# ---- a native VecEnv of one's own, through the Runner ------------------------------------------

def test_own_native_vec_env_trains_through_the_runner_with_its_infos(tmp_path, tiny_cfg):
    CorridorVecEnv.built.clear()
    cfg = tiny_cfg(total_timesteps=256, logger={"csv": True, "log_freq": 0},
                   env={"id": f"{MODULE}:CorridorVecEnv", "max_episode_steps": None,
                        "kwargs": {"horizon": 6}})
    runner = Runner(cfg, tmp_path)
    assert isinstance(runner.env.env, CorridorVecEnv) and isinstance(runner.eval_env.env, CorridorVecEnv)
    assert [b["num_envs"] for b in CorridorVecEnv.built] == [2, 2]  # train, eval
    assert all(b["horizon"] == 6 for b in CorridorVecEnv.built)
    result = runner.run()
    assert runner.state.global_step == 256
    assert len(runner.episodes.lengths) >= 256 // 6 and max(runner.episodes.lengths) <= 6
    assert result["episodes"] == 2 and result["mean_length"] <= 6
    with open(tmp_path / "metrics.csv", newline="") as f:
        rows = [(r["name"], float(r["value"])) for r in csv.DictReader(f)]
    names = {n for n, _ in rows}
    assert {"reward/goal", "reward/step_cost", "extra/position"} <= names
    assert all(0.0 <= v <= 4.0 for n, v in rows if n == "extra/position")
    assert all(-0.6 - 1e-6 <= v <= 0.0 for n, v in rows if n == "reward/step_cost")  # <= 6 x -0.1f32


class BreaksTheContract:
    """A batched env that returns one field of the wrong kind (see `BUGS`)."""

    def __init__(self, env, bug: str):
        self.env, self.bug, self.spec, self.device = env, bug, env.spec, env.device

    def reset(self, seed=None):
        obs = self.env.reset(seed)
        return obs.numpy() if self.bug == "numpy_obs" else obs

    def step(self, action):
        res = self.env.step(action)
        n = self.spec.num_envs
        if self.bug == "wide_obs":
            res.obs = torch.zeros(n, self.spec.obs_shape[0] + 2)
        elif self.bug == "column_reward":
            res.reward = res.reward.reshape(n, 1)
        elif self.bug == "int_terminated":
            res.terminated = res.terminated.long()
        elif self.bug == "tuple":
            return (res.obs, res.reward)
        return res


BUGS = {  # bug -> fragment of the one line
    "numpy_obs": "reset() is ndarray, the VecEnv contract wants a tensor of shape [3, 2]",
    "wide_obs": "step().obs is a torch.float32 tensor of shape [3, 4], the VecEnv contract "
                "wants a tensor of shape [3, 2]",
    "column_reward": "step().reward is a torch.float32 tensor of shape [3, 1], the VecEnv "
                     "contract wants a floating tensor of shape [3]",
    "int_terminated": "step().terminated is a torch.int64 tensor of shape [3], the VecEnv "
                      "contract wants a bool tensor of shape [3]",
    "tuple": "step() returned tuple, the VecEnv contract wants a StepResult",
}


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_a_batched_env_that_breaks_the_contract_is_one_line_naming_the_field(bug):
    from rltrain.errors import EnvError

    inner = make_env(EnvConfig(id=f"{MODULE}:CorridorVecEnv", num_envs=3), num_envs=3).env
    env = ContractChecked(BreaksTheContract(inner, bug), "mine:Broken")
    with pytest.raises(EnvError) as err:
        env.reset(seed=0)
        env.step(torch.zeros(3, dtype=torch.int64))
    assert str(err.value).startswith("env mine:Broken: ") and BUGS[bug] in str(err.value)


@pytest.mark.parametrize("what, fragment", [
    ("obs", "step() returned a non-finite observation (nan at index (1, 0))"),
    ("reward", "step() returned a non-finite reward (inf at index (1,))")])
def test_a_batched_env_going_non_finite_after_its_first_step_is_blamed_not_the_lr(
        what, fragment, tmp_path, monkeypatch, capfd):
    """Step 40 of a batched env (not its first, whose shapes are checked) returns a NaN
    observation or an inf reward: one line blaming the env at that step, exit 1, where it
    surfaced updates later as a non-finite loss with a hint to lower the learning rate."""
    result = run_cli(["algo=ppo", f"env.id={MODULE}:CorruptingCorridorVecEnv",
                      f"env.import={MODULE}", "env.num_envs=4", f"+env.kwargs.what={what}",
                      "+env.kwargs.at=40", "total_timesteps=512", "algo.n_steps=16",
                      "algo.batch_size=32", "progress=off", "logger=none", "hydra.run.dir=run"],
                     tmp_path, monkeypatch, capfd)
    assert_refused(result, EXIT_TRAINING, f"env {MODULE}:CorruptingCorridorVecEnv: {fragment}")
    assert "not the learning rate" in result.err and "(at env step 156)" in result.err


def test_huge_finite_values_are_not_called_non_finite():
    """The fast test sums everything, and 3e38 + 3e38 overflows float32 to inf: the exact
    search behind it must clear such a step, not stop the run."""
    inner = make_env(EnvConfig(id=f"{MODULE}:CorridorVecEnv", num_envs=3), num_envs=3).env

    class Huge(BreaksTheContract):
        def step(self, action):
            res = self.env.step(action)
            res.obs = torch.full_like(res.obs, 3e38)
            res.reward = torch.full_like(res.reward, 3e38)
            return res

    env = ContractChecked(Huge(inner, ""), "mine:Huge")
    env.reset(seed=0)
    assert env.step(torch.zeros(3, dtype=torch.int64)).reward[0].item() == pytest.approx(3e38)


def test_the_refusal_of_unnamed_code_gives_both_forms_with_every_module_in_order():
    """A Python caller who named one of two modules got only the command line's form; the
    Python form listed a set, in an order that changed from process to process."""
    from rltrain.envs.trust import require_named

    env = {"id": "zeta.envs:Maze-v0", "imports": ["alpha.extra"]}
    with pytest.raises(UserError) as refused:
        require_named(env, NamedCode(frozenset({"zeta.envs"})), "run/checkpoints/final.pt")
    assert str(refused.value).endswith(
        "add env.import=alpha.extra to this command (evaluate or export_policy in Python: "
        "named=NamedCode(modules="
        "frozenset({'alpha.extra', 'zeta.envs'})), rltrain.envs.trust)")
