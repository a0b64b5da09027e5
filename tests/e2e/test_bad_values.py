"""Bad values on the command line: one error line, exit code 2, and nothing written.

Every case runs `rltrain.cli.main` in-process (`harness.run_cli`). Training cases get
`hydra.run.dir=<tmp>/run`, which must not exist afterwards: validation happens before Hydra
creates the run folder. Eval and export cases share one tiny trained run, whose folder must gain
no file. The boundaries of each range are accepted (`test_boundary_values_are_accepted`), so the
checks are not stricter than the values rltrain can use.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from rltrain.checks import SEED_MAX
from rltrain.config.overrides import check_overrides, compose_checked
from rltrain.config.schema import EvalRunConfig, ExportConfig, to_command_config
from tests.e2e.harness import EXIT_USAGE, assert_refused, run_cli, tree

NO_CUDA = pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA GPU")
NO_MPS = pytest.mark.skipif(torch.backends.mps.is_available(), reason="this machine has MPS")
FEW_GPUS = pytest.mark.skipif(torch.cuda.device_count() > 7, reason="this machine has a cuda:7")


def tiny(argv: list[str]) -> list[str]:
    """`argv` after a tiny budget that suits the algorithm it names (PPO otherwise), on CartPole
    (Pendulum for the Box-only DDPG, TD3 and SAC) unless `argv` names an env."""
    algo = next((a.split("=", 1)[1] for a in argv if a.startswith("algo=")), "ppo")
    default = "Pendulum-v1" if algo in ("ddpg", "td3", "sac") else "CartPole-v1"
    env = [] if any(a.startswith("env=") for a in argv) else [f"env={default}"]
    sizes = {"ppo": ["algo.n_steps=64", "algo.batch_size=64"], "a2c": []}
    extra = sizes.get(algo, ["algo.buffer_size=1000"])
    return ["debug=smoke", *env, "env.num_envs=2", *extra, "logger=none", "progress=off", *argv]


def case(argv: list[str], fragment: str, *marks: pytest.MarkDecorator) -> object:
    """One row of a table: (argv, expected exit code, fragment of the error line)."""
    return pytest.param(argv, EXIT_USAGE, fragment, id=" ".join(argv)[:70], marks=marks)


TRAIN_CASES = [
    # seeds: numpy's np.random.seed takes [0, 2**32 - 1]
    case(["seed=-1"], "seed=-1 must be in [0, 4294967295]"),
    case(["seed=18446744073709551616"], "seed=18446744073709551616 must be in [0, 4294967295]"),
    case([f"seed={SEED_MAX}", "seeds_per_trial=2"], f"would train seed {SEED_MAX + 1}"),
    case(["seeds_per_trial=0"], "seeds_per_trial=0 must be >= 1"),
    # budgets and cadences
    case(["total_timesteps=nan"], "total_timesteps=nan must be a positive whole number"),
    case(["total_timesteps=inf"], "total_timesteps=inf must be a positive whole number"),
    case(["eval.freq=nan"], "eval.freq=nan must be a non-negative whole number"),
    case(["checkpoint.freq=nan"], "checkpoint.freq=nan must be a non-negative whole number"),
    case(["logger.log_freq=nan"], "logger.log_freq=nan must be a non-negative whole number"),
    case(["logger.log_interval=-1"], "logger.log_interval=-1.0 must be a finite number >= 0"),
    case(["torch_threads=-1"], "torch_threads=-1 must be >= 0"),
    # fields every algorithm has
    case(["algo.lr=-1"], "algo.lr=-1.0 must be a finite number > 0"),
    case(["algo.lr=nan"], "algo.lr=nan must be a finite number > 0"),
    case(["algo.lr=0"], "algo.lr=0.0 must be a finite number > 0"),
    case(["algo.gamma=2"], "algo.gamma=2.0 must be in [0, 1]"),
    case(["algo.gamma=nan"], "algo.gamma=nan must be in [0, 1]"),
    # PPO
    case(["algo.gae_lambda=1.5"], "algo.gae_lambda=1.5 must be in [0, 1]"),
    case(["algo.clip_range=0"], "algo.clip_range=0.0 must be a finite number > 0"),
    case(["algo.clip_range_vf=0"], "algo.clip_range_vf=0.0 must be a finite number > 0"),
    case(["algo.ent_coef=-0.01"], "algo.ent_coef=-0.01 must be a finite number >= 0"),
    case(["algo.vf_coef=-1"], "algo.vf_coef=-1.0 must be a finite number >= 0"),
    case(["algo.max_grad_norm=nan"], "algo.max_grad_norm=nan must be a finite number >= 0"),
    case(["algo.target_kl=0"], "algo.target_kl=0.0 must be a finite number > 0"),
    case(["algo.log_std_init=inf"], "algo.log_std_init=inf must be a finite number"),
    # env
    case(["env.max_episode_steps=0"], "env.max_episode_steps=0 must be > 0"),
    case(["env.clip_obs=0"], "env.clip_obs=0.0 must be a finite number > 0"),
    case(["env.clip_obs=nan"], "env.clip_obs=nan must be a finite number > 0"),
    case(["+env.kwargs.foo=1"], "env.kwargs.foo: CartPole-v1 takes sutton_barto_reward, render_mode"),
    case(["env=Pendulum-v1", "+env.kwargs.foo=1"], "env.kwargs.foo: Pendulum-v1 takes render_mode, g"),
    # null where a value is needed: the choices (Hydra's own line was "Error merging override")
    case(["env.backend=null"], "env.backend=null: choose auto, gymnasium, envpool, ale, torch"),
    case(["env.vectorization=NULL"], "env.vectorization=null: choose sync or async"),
    case(["progress=null"], "progress=null: choose one of auto, bar, plain, off"),
    case(["algo=null"], "unknown algo null: choose one of a2c, ars, crossq, ddpg, dqn, ppo, ppo_lstm, pqn, qrdqn, sac, td3, tqc, trpo"),
    case(["env.backend=~"], "cannot parse env.backend=~: Hydra reads '~' only inside quotes; "
                            "in a shell: 'env.backend=\"~\"'"),
    case(["algo.lr=null"], "algo.lr=null: expected a float, got null"),
    case(["logger.csv=null"], "logger.csv=null: expected a bool, got null"),
    # devices
    case(["device=cuda"], "device=cuda: no CUDA GPU is available (torch.cuda.is_available() is "
                          "False); use device=cpu", NO_CUDA),
    case(["device=cuda:7"], "device=cuda:7: ", FEW_GPUS),  # no GPU, or "this machine has N"
    case(["device=banana"], "device=banana: choose cpu, cuda, cuda:N, mps or auto"),
    case(["device=mps"], "device=mps: MPS is not available", NO_MPS),
    # the other algorithms
    case(["algo=a2c", "algo.rmsprop_alpha=1.5"], "algo.rmsprop_alpha=1.5 must be in [0, 1]"),
    case(["algo=a2c", "algo.vf_coef=nan"], "algo.vf_coef=nan must be a finite number >= 0"),
    case(["algo=a2c", "algo.optimizer_eps=-1"], "algo.optimizer_eps=-1.0 must be a finite number"),
    case(["algo=dqn", "env=CartPole-v1", "algo.lr_final=-1"], "algo.lr_final=-1.0 must be a finite"),
    case(["algo=dqn", "env=CartPole-v1", "algo.max_grad_norm=-1"], "algo.max_grad_norm=-1.0 must"),
    case(["algo=dqn", "env=CartPole-v1", "algo.gamma=1.5"], "algo.gamma=1.5 must be in [0, 1]"),
    case(["algo=sac", "algo.alpha=nan"], "algo.alpha=nan must be a finite number > 0"),
    case(["algo=sac", "algo.alpha_lr=nan"], "algo.alpha_lr=nan must be a finite number > 0"),
    case(["algo=sac", "algo.target_entropy=nan"], "algo.target_entropy=nan must be a finite number"),
    case(["algo=sac", "algo.log_std_min=nan"], "algo.log_std_min=nan must be a finite number"),
    case(["algo=sac", "algo.tau=0"], "algo.tau=0.0 must be in (0, 1]"),
    case(["algo=sac", "algo.lr_decay_steps=-1"], "algo.lr_decay_steps=-1.0 must be a finite number"),
    case(["algo=td3", "algo.lr_final=nan"], "algo.lr_final=nan must be a finite number >= 0"),
    case(["algo=td3", "algo.target_noise=nan"], "algo.target_noise=nan must be a finite number >= 0"),
    case(["algo=ddpg", "algo.action_noise=nan"], "algo.action_noise=nan must be a finite number"),
    case(["algo=ddpg", "algo.critic_lr=nan"], "algo.critic_lr=nan must be a finite number > 0"),
]

EVAL_CASES = [
    case(["eval", "episodes=0"], "episodes=0 must be > 0"),
    case(["eval", "seed=-1"], "seed=-1 must be in [0, 4294967295]"),
    case(["eval", "seed=18446744073709551616"], "must be in [0, 4294967295]"),
    case(["eval", "num_envs=0"], "num_envs=0 must be > 0"),
    case(["eval", "episodes=null"], "episodes=null: expected an int, got null"),
    case(["eval", "video_episodes=0"], "video_episodes=0 must be > 0 (or null"),
    case(["eval", "video=true", "video_episodes=0"], "video_episodes=0 must be > 0"),
    case(["eval", "device=banana"], "device=banana: choose cpu, cuda, cuda:N, mps or auto"),
    case(["eval", "device=cuda"], "device=cuda: no CUDA GPU is available", NO_CUDA),
    case(["export", "check_samples=0"], "check_samples=0 must be > 0"),
    case(["export", "format=zip"], "format='zip': choose one of onnx, torchscript"),
    case(["export", "seed=-1"], "seed=-1 must be in [0, 4294967295]"),
    # null for a string field: its choices, as train's `env.backend=null` (not "expected a str")
    case(["export", "format=null"], "format=null: choose one of onnx, torchscript"),
    case(["export", "format=NULL"], "format=null: choose one of onnx, torchscript"),
    case(["eval", "device=null"], "device=null: choose cpu, cuda, cuda:N, mps or auto"),
    # training options: the checkpoint fixes the algorithm and the env
    case(["eval", "algo=dqn"], "unknown field 'algo' (algorithm and env come from the checkpoint)"),
    case(["export", "env=Pendulum-v1"], "unknown field 'env' (algorithm and env come from the "
                                        "checkpoint): valid fields: ckpt, format, out"),
]


@pytest.mark.parametrize(("argv", "code", "fragment"), TRAIN_CASES)
def test_bad_training_value_is_one_line_and_creates_no_run_folder(argv, code, fragment, tmp_path,
                                                                 monkeypatch, capfd):
    run_dir = tmp_path / "run"
    result = run_cli([*tiny(argv), f"hydra.run.dir={run_dir}"], tmp_path, monkeypatch, capfd)
    assert_refused(result, code, fragment)
    assert tree(tmp_path) == set()  # no run folder, no outputs/


def test_too_long_output_folder_name_is_one_line(tmp_path, monkeypatch, capfd):
    run_dir = tmp_path / ("a" * 300)
    result = run_cli([*tiny([]), f"hydra.run.dir={run_dir}"], tmp_path, monkeypatch, capfd)
    assert_refused(result, EXIT_USAGE, "output folder name too long: aaaa")
    assert "300 bytes" in result.err and "limit is 255" in result.err
    assert tree(tmp_path) == set()


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="no /proc on this system")
def test_an_output_folder_on_a_virtual_file_system_is_one_line(tmp_path, monkeypatch, capfd):
    result = run_cli([*tiny([]), "hydra.run.dir=/proc/rltrain_run"], tmp_path, monkeypatch, capfd)
    assert_refused(result, EXIT_USAGE, "output folder /proc/rltrain_run cannot be created: /proc "
                                       "is a virtual file system")
    assert tree(tmp_path) == set()


def test_env_kwarg_of_the_wrong_type_is_one_line(tmp_path, monkeypatch, capfd):
    # the name is one FrozenLake takes, so only building the env finds the bad value: after
    # Hydra has created the run folder (check_env does not build envs)
    argv = [*tiny(["env=FrozenLake-v1", "+env.kwargs.success_rate=abc"]),
            f"hydra.run.dir={tmp_path / 'run'}"]
    result = run_cli(argv, tmp_path, monkeypatch, capfd)
    assert_refused(result, EXIT_USAGE, "env FrozenLake-v1: TypeError: unsupported operand")


@pytest.mark.parametrize("entry_point, message", [
    ("rltrain_no_such_module:Env", "needs a package that is not installed: ModuleNotFoundError: "
                                   "No module named 'rltrain_no_such_module'"),
    ("tests.e2e.test_bad_values:needs_missing_package", "needs a package that is not installed: "
                                                        "DependencyNotInstalled: pip install x"),
    ("tests.e2e.test_bad_values:imports_a_misspelled_name", "failed to import what it needs: "
                                                            "ImportError: cannot import name"),
])
def test_env_that_cannot_import_what_it_needs_is_one_line(entry_point, message, tmp_path,
                                                          monkeypatch, capfd):
    """gymnasium ids such as phys2d/CartPole-v1 (jax) or GymV21Environment-v0 (shimmy), and an
    env module with a bad import of its own (not called a missing package)."""
    import gymnasium as gym

    monkeypatch.setitem(gym.registry, "NeedsMissing-v0",
                        gym.envs.registration.EnvSpec("NeedsMissing-v0", entry_point))
    argv = [*tiny(["env=NeedsMissing-v0"]), f"hydra.run.dir={tmp_path / 'run'}"]
    result = run_cli(argv, tmp_path, monkeypatch, capfd)
    assert_refused(result, EXIT_USAGE, f"env NeedsMissing-v0 {message}")


def needs_missing_package(**kwargs: object) -> None:
    import gymnasium as gym

    raise gym.error.DependencyNotInstalled("pip install x")


def imports_a_misspelled_name(**kwargs: object) -> None:
    from gymnasium import Envv  # noqa: F401 - the user's typo


def test_report_of_only_unreadable_runs_is_one_line(tmp_path, monkeypatch, capfd):
    run = tmp_path / "sweep" / "0"
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "overrides.yaml").write_text("- algo=ppo\n- [unclosed\n")
    (run / "metrics.csv").write_text("step,time,name,value\n64,1.0,eval/mean_reward,1.0\n")
    result = run_cli(["report", str(tmp_path / "sweep")], tmp_path, monkeypatch, capfd)
    assert_refused(result, EXIT_USAGE, "report: none of the 1 run(s) below")
    assert f"skipped run {run}: {run / '.hydra' / 'overrides.yaml'}: not readable YAML" in result.out


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory) -> Path:
    """One tiny PPO CartPole run (128 env steps), shared by the eval and export cases."""
    from rltrain import api

    run_dir = tmp_path_factory.mktemp("bad_values") / "run"
    api.train([*tiny([]), "total_timesteps=128"], run_dir)
    return run_dir


@pytest.mark.parametrize(("argv", "code", "fragment"), EVAL_CASES)
def test_bad_eval_or_export_value_is_one_line_and_writes_nothing(argv, code, fragment,
                                                                 trained_run, tmp_path,
                                                                 monkeypatch, capfd):
    before = tree(trained_run)
    result = run_cli([argv[0], f"ckpt={trained_run}", *argv[1:]], tmp_path, monkeypatch, capfd)
    assert_refused(result, code, fragment)
    assert tree(trained_run) == before
    assert tree(tmp_path) == set()


def test_a_bare_word_after_ckpt_is_one_line_naming_the_fields(trained_run, tmp_path,
                                                             monkeypatch, capfd):
    result = run_cli(["eval", f"ckpt={trained_run}", "video"], tmp_path, monkeypatch, capfd)
    assert_refused(result, EXIT_USAGE, "'video' is not key=value: valid fields: ckpt, episodes")


@pytest.mark.parametrize("command", ["eval", "export"])
def test_a_bare_checkpoint_path_is_one_line_asking_for_ckpt(command, trained_run, tmp_path,
                                                            monkeypatch, capfd):
    result = run_cli([command, str(trained_run)], tmp_path, monkeypatch, capfd)
    assert_refused(result, EXIT_USAGE, f"'{trained_run}' is not key=value: give the checkpoint "
                                       f"as ckpt={trained_run}")


@pytest.mark.parametrize("overrides", [  # several boundaries per compose: each costs 0.5 s
    ["seed=0", "algo.gamma=1.0", "algo.gae_lambda=0", "algo.ent_coef=0", "algo.max_grad_norm=0",
     "total_timesteps=1", "eval.freq=0", "checkpoint.freq=0", "torch_threads=0",
     "env.max_episode_steps=1", "env.clip_obs=1e-3", "device=cpu",
     "+env.kwargs.sutton_barto_reward=true"],
    [f"seed={SEED_MAX}", "algo.gamma=0", "algo.gae_lambda=1", "algo.clip_range=1e-3",
     "device=auto", "+env.kwargs.max_episode_steps=20"],
    [f"seed={SEED_MAX - 1}", "seeds_per_trial=2"],
    ["algo=a2c", "algo.rmsprop_alpha=1", "algo.optimizer_eps=0"],
    ["algo=dqn", "algo.exploration_final_eps=0", "algo.lr_final=0"],
    ["algo=sac", "algo.tau=1.0", "algo.target_entropy=0", "algo.alpha_lr=1e-5",
     "algo.lr_decay_steps=${total_timesteps}", "algo.lr_final=0"],
    ["algo=td3", "algo.target_noise=0", "algo.action_noise=0"],
], ids=["ppo-low", "ppo-high", "seeds", "a2c", "dqn", "sac", "td3"])
def test_boundary_values_are_accepted(overrides):
    check_overrides(tiny(overrides))  # what `rltrain` runs before Hydra; raises if refused


@pytest.mark.parametrize(("schema", "name", "overrides"), [
    (EvalRunConfig, "eval", ["seed=0", f"seed={SEED_MAX}", "episodes=1", "num_envs=1",
                             "video_episodes=1", "video_episodes=null", "device=auto"]),
    (ExportConfig, "export", ["seed=0", f"seed={SEED_MAX}", "check_samples=1",
                              "format=torchscript"]),
])
def test_boundary_values_of_eval_and_export_are_accepted(schema, name, overrides):
    for override in overrides:
        cfg = to_command_config(compose_checked(name, ["ckpt=run", override]))
        assert isinstance(cfg, schema)
