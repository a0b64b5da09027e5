"""Env ids as a new user types them: ids with `/` (`ALE/Pong-v5`), short aliases, the tuned preset
each spelling gets, one line for a missing extra, the no-preset defaults and their console line,
and on-policy budgets that are never overshot silently.

Everything runs in-process (`compose_train_config`, `run_cli`); the few training runs are
`debug=smoke`-sized.
"""

from __future__ import annotations

import sys

import pytest

from rltrain.config.compose import compose_train_config
from rltrain.config.schema import ENV_ALIASES
from rltrain.config.store import _yaml_names, preset_env_name
from rltrain.config.validation import default_num_envs, to_train_config
from rltrain.envs.families import family_of, register_on_demand, require_extra
from rltrain.errors import UserError
from rltrain.runner.callbacks import LoopState
from rltrain.runner.on_policy import rollout_steps
from tests.e2e.harness import EXIT_USAGE, assert_refused, run_cli

ATARI_ALIASES = ("breakout", "pong", "spaceinvaders", "seaquest", "qbert", "beamrider", "enduro",
                 "asteroids", "mspacman")
OTHER_ALIASES = ("halfcheetah", "hopper", "walker2d", "ant", "humanoid", "swimmer", "lunarlander",
                 "lunarlander_continuous", "bipedalwalker", "mountaincar", "mountaincar_continuous")
QUIET = ["logger=none", "progress=off"]


def has_preset(name: str) -> bool:
    return name in _yaml_names("tuned")


# ---- ids with `/` and aliases ---------------------------------------------------------------

@pytest.mark.parametrize("argv", [
    ["algo=ppo", "env=ALE/Breakout-v5"],
    ["algo=ppo", "env.id=ALE/Breakout-v5"],
    ["algo=ppo", "env=breakout"],
])
def test_an_ale_id_or_its_alias_composes(argv):
    assert compose_train_config(argv).env.id == "ALE/Breakout-v5"


@pytest.mark.parametrize("alias", ATARI_ALIASES + OTHER_ALIASES)
def test_every_alias_names_its_gymnasium_id(alias):
    cfg = compose_train_config(["algo=ppo", f"env={alias}"])
    assert cfg.env.id == ENV_ALIASES[alias]
    assert (family_of(cfg.env.id) == "atari") == (alias in ATARI_ALIASES)


def test_an_ale_id_is_registered_on_demand_only_for_ale_ids():
    import gymnasium as gym

    register_on_demand("CartPole-v1")  # nothing to do, and no ale-py needed
    register_on_demand("ALE/Pong-v5")
    assert "ALE/Pong-v5" in gym.registry and "ALE/Breakout-v5" in gym.registry


@pytest.mark.parametrize("arg", ["env.id=ALE/Pongg-v5", "env=ALE/Pongg-v5"])
def test_an_unknown_ale_id_is_one_line_with_the_closest_ids(arg):
    with pytest.raises(UserError, match="unknown env 'ALE/Pongg-v5': did you mean ALE/Pong-v5"):
        compose_train_config(["algo=ppo", arg])


@pytest.mark.parametrize(("typo", "suggested", "not_suggested"), [
    ("Hoper-v5", "did you mean Hopper-v5 or", ("Hopper-v4", "Hopper-v3")),
    ("Hoper-v3", "did you mean Hopper-v3 or Hopper-v5", ("Hopper-v4",))])
def test_a_typo_gets_the_current_version_not_old_ones_that_need_mujoco_py(typo, suggested,
                                                                          not_suggested):
    """`Hoper-v5` suggested Hopper-v5, Hopper-v4 and Hopper-v3; v3 needs mujoco-py (a failed
    import line and gymnasium's deprecation warning). An old version is suggested only to a
    typo that asks for that version."""
    with pytest.raises(UserError) as err:
        compose_train_config(["algo=sac", f"env.id={typo}"])
    assert suggested in str(err.value)
    assert not any(old in str(err.value) for old in not_suggested), str(err.value)


@pytest.mark.parametrize(("legacy", "modern"), [
    ("PongNoFrameskip-v4", "ALE/Pong-v5"), ("Breakout-v0", "ALE/Breakout-v5"),
    ("SpaceInvadersDeterministic-v4", "ALE/SpaceInvaders-v5"), ("ALE/Pong-v4", "ALE/Pong-v5")])
@pytest.mark.parametrize("key", ["env", "env.id"])
def test_a_legacy_atari_id_is_one_line_naming_the_v5_id(legacy, modern, key):
    pytest.importorskip("ale_py")
    with pytest.raises(UserError) as err:
        compose_train_config(["algo=ppo", f"{key}={legacy}"])
    assert str(err.value) == (f"unknown env {legacy!r}: ale-py's legacy Atari ids are not used; "
                              f"rltrain trains the v5 ids, with its Atari preprocessing: "
                              f"env={modern}")


def test_unknown_ids_are_never_matched_to_a_legacy_atari_id():
    """Legacy ids exist in gymnasium's registry once ale-py was imported (an ALE run before),
    but not in a new process: suggesting them sent users to another 'unknown env'."""
    import gymnasium as gym

    register_on_demand("ALE/Pong-v5")
    assert "Pong-v4" in gym.registry  # what ale-py registered besides the v5 ids
    with pytest.raises(UserError) as err:
        compose_train_config(["algo=ppo", "env=Pong-v3"])
    assert "Pong-v4" not in str(err.value) and "Pong-v0" not in str(err.value)


def test_a_sweep_over_ale_ids_registers_every_value(tmp_path, monkeypatch, capfd):
    # `-m env=a,b`: the first value composes here; the second must be a known option too
    from rltrain.config.compose import register_options
    from rltrain.config.overrides import compose_checked

    argv = ["algo=ppo", "env=ALE/Pong-v5,ALE/Breakout-v5"]
    assert compose_train_config(argv).env.id == "ALE/Pong-v5"
    register_options(argv)
    assert compose_checked("config", ["algo=ppo", "env=ALE/Breakout-v5"]).env.id == "ALE/Breakout-v5"


def test_the_cli_prints_the_config_of_an_ale_id(tmp_path, monkeypatch, capfd):
    result = run_cli(["algo=ppo", "env=ALE/Pong-v5", "--cfg", "job"], tmp_path, monkeypatch, capfd)
    assert result.rc == 0, result.describe()
    assert "id: ALE/Pong-v5" in result.out


# ---- which preset applies -------------------------------------------------------------------

@pytest.mark.parametrize(("option", "name"), [
    ("ALE/Pong-v5", "atari"), ("ALE/Alien-v5", "atari"), ("pong", "atari"), ("breakout", "atari"),
    ("HalfCheetah-v5", "halfcheetah"), ("halfcheetah", "halfcheetah"),
    ("LunarLanderContinuous-v3", "lunarlander_continuous"), ("MountainCar-v0", "mountaincar"),
    ("CartPole-v1", "cartpole"), ("cartpole", "cartpole"),
    ("Reacher-v5", None), ("my_envs:make_maze", None),
])
def test_the_preset_name_of_an_env_option(option, name):
    assert preset_env_name(option) == name


@pytest.mark.parametrize("env", ["ALE/Pong-v5", "pong", "ALE/Alien-v5"])
def test_every_atari_game_gets_the_one_atari_preset(env):
    if not has_preset("ppo_atari"):
        pytest.skip("conf/tuned/ppo_atari.yaml is not written yet")
    assert compose_train_config(["algo=ppo", f"env={env}"]).preset == "ppo_atari"


@pytest.mark.parametrize("env", ["HalfCheetah-v5", "halfcheetah"])
def test_both_spellings_of_an_alias_get_its_preset(env):
    if not has_preset("sac_halfcheetah"):
        pytest.skip("conf/tuned/sac_halfcheetah.yaml is not written yet")
    assert compose_train_config(["algo=sac", f"env={env}"]).preset == "sac_halfcheetah"


def test_a_missing_preset_file_means_no_preset():
    assert not has_preset("a2c_humanoid")
    assert compose_train_config(["algo=a2c", "env=humanoid"]).preset is None
    assert compose_train_config(["algo=ppo", "env.id=ALE/Pong-v5"]).preset is None  # env.id drops it


# ---- a missing extra is one line naming it ------------------------------------------------

@pytest.mark.parametrize(("argv", "module", "message"), [
    (["algo=sac", "env=HalfCheetah-v5"], "mujoco", 'HalfCheetah-v5 needs MuJoCo: pip install "rltrain[mujoco]"'),
    (["algo=sac", "env=hopper"], "mujoco", 'Hopper-v5 needs MuJoCo: pip install "rltrain[mujoco]"'),
    (["algo=ppo", "env=lunarlander"], "Box2D", 'LunarLander-v3 needs Box2D: pip install "rltrain[box2d]"'),
    (["algo=ppo", "env=ALE/Pong-v5"], "ale_py", 'ALE/Pong-v5 needs Atari'),
    (["algo=ppo", "env=breakout"], "cv2", 'ALE/Breakout-v5 needs Atari'),
    (["algo=sac", "env.id=FetchReach-v4", "algo.replay=her"], "gymnasium_robotics",
     'FetchReach-v4 needs gymnasium-robotics: pip install "rltrain[robotics]"'),
])
def test_a_missing_extra_is_one_line_naming_it(argv, module, message, tmp_path, monkeypatch, capfd):
    monkeypatch.setitem(sys.modules, module, None)  # `import module` now raises ImportError
    with pytest.raises(UserError, match="rltrain\\[") as info:
        compose_train_config(argv)
    assert str(info.value).startswith(message) and "\n" not in str(info.value)
    result = run_cli(argv, tmp_path, monkeypatch, capfd)
    assert_refused(result, EXIT_USAGE, message)


@pytest.mark.parametrize(("env_id", "family"), [
    ("FetchReach-v4", "robotics"), ("FetchPush-v4", "robotics"), ("PointMaze_UMaze-v3", "robotics"),
    ("AntMaze_UMaze-v5", "robotics"), ("HandManipulateBlock-v1", "robotics"),
    ("Ant-v5", "mujoco"), ("Reacher-v5", "mujoco"), ("CartPole-v1", None),
])
def test_gymnasium_robotics_ids_are_their_own_family(env_id, family):
    assert family_of(env_id) == family


@pytest.mark.parametrize(("robotics", "mujoco", "refused"), [
    ((1, 4, 2), (3, 12, 0), True), ((1, 4, 2), (4, 0, 0), True), ((1, 4, 2), (3, 11, 0), False),
    ((1, 4, 3), (4, 0, 0), False), ((), (4, 0, 0), False),
])
def test_a_robotics_release_that_cannot_build_with_its_mujoco_is_one_line(robotics, mujoco,
                                                                           refused, monkeypatch):
    from rltrain.envs import families

    versions = {"gymnasium-robotics": robotics, "mujoco": mujoco}
    monkeypatch.setattr(families, "_version", versions.__getitem__)
    if not refused:
        families.check_robotics_mujoco("FetchReach-v4")
        return
    with pytest.raises(UserError, match='pip install "mujoco<3.12"') as info:
        families.check_robotics_mujoco("FetchReach-v4")
    assert "\n" not in str(info.value) and str(info.value).startswith("FetchReach-v4: ")


def test_an_id_outside_the_families_needs_no_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "mujoco", None)
    require_extra("CartPole-v1")
    require_extra("my_envs:Maze-v0")


# ---- no-preset defaults -------------------------------------------------------------------

@pytest.mark.parametrize(("algo", "num_envs"), [
    ("dqn", 1), ("sac", 1), ("td3", 1), ("ddpg", 1), ("ppo", 8), ("a2c", 8),
])
def test_without_a_preset_off_policy_uses_one_env_and_on_policy_eight(algo, num_envs):
    env = "CartPole-v1" if algo == "dqn" else "Pendulum-v1"
    cfg = compose_train_config([f"algo={algo}", f"env.id={env}"])
    assert cfg.preset is None and cfg.env.num_envs == num_envs == default_num_envs(cfg.algo)
    if num_envs == 1:  # one gradient step per env step
        assert cfg.algo.train_freq == cfg.algo.gradient_steps == 1


def test_the_command_line_and_a_preset_still_choose_num_envs():
    assert compose_train_config(["algo=sac", "env.id=Pendulum-v1", "env.num_envs=4"]).env.num_envs == 4
    assert compose_train_config(["algo=ppo", "env=pendulum"]).env.num_envs == 32  # ppo_pendulum


def test_a_saved_config_keeps_its_num_envs_and_an_unset_one_is_resolved():
    from rltrain.config.schema import config_to_dict

    saved = config_to_dict(compose_train_config(["algo=sac", "env.id=Pendulum-v1"]))
    assert saved["env"]["num_envs"] == 1  # what a checkpoint stores: resolved
    assert to_train_config({**saved, "env": {**saved["env"], "num_envs": 8}}).env.num_envs == 8
    assert to_train_config({**saved, "env": {**saved["env"], "num_envs": None}}).env.num_envs == 1


def test_the_no_preset_line_names_the_defaults_that_matter(tmp_path, monkeypatch, capfd):
    result = run_cli(["algo=dqn", "env.id=Acrobot-v1", "debug=smoke", *QUIET], tmp_path,
                     monkeypatch, capfd)
    assert result.rc == 0, result.describe()
    text = result.out + result.err
    line = next(x for x in text.splitlines() if "no tuned preset" in x)
    assert ("no tuned preset for (dqn, Acrobot-v1); using defaults (yours where you set them): "
            "num_envs=1, lr=") in line
    for name in ("buffer_size=", "learning_starts=", "batch_size=", "train_freq=1", "gradient_steps=1"):
        assert name in line, line


def test_a_preset_run_says_which_and_no_defaults_line(tmp_path, monkeypatch, capfd):
    result = run_cli(["algo=ppo", "env=cartpole", "debug=smoke", *QUIET], tmp_path, monkeypatch, capfd)
    assert result.rc == 0, result.describe()
    text = result.out + result.err
    assert "applied tuned preset conf/tuned/ppo_cartpole.yaml" in text
    assert "no tuned preset" not in text


def test_the_on_policy_defaults_line_names_n_steps():
    from rltrain.runner.messages import defaults_that_matter

    cfg = compose_train_config(["algo=ppo", "env.id=Pendulum-v1"])
    assert defaults_that_matter(cfg, 8) == f"num_envs=8, lr={cfg.algo.lr:g}, n_steps={cfg.algo.n_steps}"


# ---- on-policy budgets ----------------------------------------------------------------------

def steps_of_a_run(total: int, n_steps: int, num_envs: int) -> tuple[int, list[int]]:
    state = LoopState(total_timesteps=total)
    rollouts = []
    while state.global_step < total:
        steps = rollout_steps(state, n_steps, num_envs)
        rollouts.append(steps)
        state.global_step += steps * num_envs
    return state.global_step, rollouts


@pytest.mark.parametrize(("total", "n_steps", "num_envs", "rollouts"), [
    (4096, 2048, 1, [2048, 2048]),  # ppo_hopper's shape: exactly two rollouts
    (4096, 2048, 8, [512]),  # a budget smaller than one rollout: one short rollout
    (5000, 2048, 1, [2048, 2048, 904]),  # the last rollout shortened
    (100, 2048, 4, [25]),
])
def test_a_budget_divisible_by_num_envs_is_trained_exactly(total, n_steps, num_envs, rollouts):
    assert steps_of_a_run(total, n_steps, num_envs) == (total, rollouts)


def test_ppo_on_hopper_trains_exactly_its_budget(tmp_path, monkeypatch, capfd):
    cfg = compose_train_config(["algo=ppo", "env=Hopper-v5", "total_timesteps=4096"])
    total, _ = steps_of_a_run(cfg.total_timesteps, cfg.algo.n_steps, cfg.env.num_envs)
    assert total == 4096


@pytest.mark.parametrize(("total", "said"), [
    (4096, None),  # smaller than one rollout (2048 x 8): honoured exactly
    (100, "104 env steps in all (4 past total_timesteps"),  # not a multiple of 8 envs: said
])
def test_a_small_on_policy_budget_is_honoured_or_said(total, said, tmp_path, monkeypatch, capfd):
    result = run_cli(["algo=ppo", "env.id=Pendulum-v1", f"total_timesteps={total}", "eval.episodes=1",
                      "eval.num_envs=1", *QUIET], tmp_path, monkeypatch, capfd)
    assert result.rc == 0, result.describe()
    text = result.out + result.err
    done = f"done: {total if said is None else 104:,} env steps"
    assert done in text, text
    assert (said is None) == ("past total_timesteps" not in text)
    if said is not None:
        assert said in text


def test_resolving_an_ale_id_registers_it_in_a_fresh_process():
    # eval, export and resume make their env through resolve_env_id, with no command-line env=
    import subprocess

    code = ("import gymnasium as gym; from rltrain.envs.custom import resolve_env_id; "
            "assert 'ALE/Pong-v5' not in gym.registry; print(resolve_env_id('ALE/Pong-v5').env_id)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ALE/Pong-v5", out.stderr


def test_composing_a_non_atari_env_does_not_import_ale_py():
    import subprocess

    code = ("import sys; from rltrain.config.compose import compose_train_config; "
            "compose_train_config(['algo=ppo', 'env=cartpole']); "
            "compose_train_config(['algo=ppo', 'env=Acrobot-v1']); print('ale_py' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "False", out.stderr


def test_a_seed_batch_says_its_preset_once_and_each_seeds_folder(tmp_path, monkeypatch, capfd):
    result = run_cli(["algo=ppo", "env=cartpole", "debug=smoke", "num_seeds=3", *QUIET], tmp_path,
                     monkeypatch, capfd)
    assert result.rc == 0, result.describe()
    lines = (result.out + result.err).splitlines()
    preset = [x for x in lines if "applied tuned preset conf/tuned/ppo_cartpole.yaml" in x]
    assert len(preset) == 1 and "[seed" not in preset[0], preset
    for seed in range(3):
        assert any(f"[seed {seed}] training ppo on CartPole-v1" in x for x in lines), lines
    assert (lines.index(preset[0])
            < next(i for i, x in enumerate(lines) if "as one batch" in x)), lines


def test_a_seed_batch_without_preset_says_the_defaults_once(tmp_path, monkeypatch, capfd):
    result = run_cli(["algo=dqn", "env.id=Acrobot-v1", "debug=smoke", "num_seeds=2", *QUIET],
                     tmp_path, monkeypatch, capfd)
    assert result.rc == 0, result.describe()
    assert (result.out + result.err).count("no tuned preset for (dqn, Acrobot-v1)") == 1


@pytest.mark.parametrize(("argv", "head"), [
    (["algo=ppo", "env.id=HalfCheetah-v5"], "no tuned preset for (ppo, HalfCheetah-v5) (conf/"
     "tuned/ppo_halfcheetah.yaml exists: env=halfcheetah applies it, unless env.id= or ~tuned "
     "is given); using defaults"),
    (["algo=ppo", "env.id=ALE/Pong-v5"], "no tuned preset for (ppo, ALE/Pong-v5) (conf/tuned/"
     "ppo_atari.yaml exists: env=ALE/Pong-v5 applies it, unless"),
    (["algo=dqn", "env=cartpole", "~tuned"], "no tuned preset for (dqn, CartPole-v1) (conf/tuned/"
     "dqn_cartpole.yaml exists: env=cartpole applies it, unless env.id= or ~tuned is given)"),
    (["algo=ppo_lstm", "env=breakout"], "no tuned preset for (ppo_lstm, ALE/Breakout-v5); using"),
    (["algo=ppo", "env=halfcheetah", "algo.recurrent=gru"],
     None),  # the preset applies: no such line
    (["algo=ddpg", "env=halfcheetah"], "no tuned preset for (ddpg, HalfCheetah-v5); using"),
])
def test_the_no_preset_line_names_the_algo_option_and_a_preset_the_options_skipped(argv, head,
                                                                                   caplog):
    """`algo=ppo_lstm` read as (ppo, ...) though ppo has an Atari preset; `env.id=` of an id
    with a preset said nothing of it."""
    import logging

    from rltrain.runner.messages import say_setup

    cfg = compose_train_config(argv)
    with caplog.at_level(logging.INFO, logger="rltrain"):
        say_setup(cfg, 8)
    lines = [r.getMessage() for r in caplog.records if "tuned preset" in r.getMessage()]
    if head is None:
        assert lines[0].startswith("applied tuned preset"), lines
    else:
        assert len(lines) == 1 and lines[0].startswith(head), lines
