"""Config composition from the real conf/ tree, tuned presets, and one-line errors for mistakes."""

from __future__ import annotations

import re
import sys
from importlib import resources

import pytest
import torch
from omegaconf import OmegaConf

from rltrain.algos.configs.ppo import PPOConfig
from rltrain.checks import check_device
from rltrain.config.compose import (
    compose_job,
    compose_train_config,
    normalize_overrides,
    train_config_of,
)
from rltrain.config.overrides import (
    check_overrides,
    compose_checked,
    first_of_sweeps,
    sweep_variants,
)
from rltrain.config.registry import ALGOS
from rltrain.config.schema import (
    AlgoConfig,
    EvalRunConfig,
    ExportConfig,
    TrainConfig,
    config_to_dict,
)
from rltrain.config.validation import default_num_envs, to_train_config
from rltrain.envs.aliases import ENV_ALIASES
from rltrain.envs.families import family_of
from rltrain.errors import UserError
from tests.conftest import config_value, preset_values


def compose(*overrides: str):
    return compose_checked("config", list(overrides))


def train_config(*overrides: str) -> TrainConfig:
    return compose_train_config(list(overrides))


def user_error(*overrides: str) -> str:
    """The message of the UserError that composing and validating `overrides` raises."""
    with pytest.raises(UserError) as err:
        train_config(*overrides)
    message = str(err.value)
    assert "\n" not in message, "user errors are one line"
    return message


@pytest.fixture(scope="module")
def pendulum():
    """The default composed config (PPO on Pendulum-v1 with its preset), composed once."""
    return compose("env=pendulum")


# ---- composition and tuned presets -----------------------------------------------------------

def test_gymnasium_id_and_short_env_name_compose_identical_configs():
    by_id, by_name = compose("env=Pendulum-v1"), compose("env=pendulum")
    assert OmegaConf.to_container(by_id) == OmegaConf.to_container(by_name)
    assert by_id.env.id == "Pendulum-v1"


@pytest.mark.parametrize("env", ["Pendulum-v1", "pendulum"])
def test_tuned_preset_is_applied_for_either_env_spelling(env):
    cfg = train_config(f"env={env}")
    assert cfg.preset == "ppo_pendulum"
    for key, value in preset_values("ppo_pendulum").items():  # every value the file sets
        assert config_value(cfg, key) == value, key


@pytest.mark.parametrize("env", ["CartPole-v1", "cartpole"])
def test_cartpole_preset_is_applied_for_either_env_spelling(env):
    cfg = train_config(f"env={env}")
    assert cfg.preset == "ppo_cartpole" and cfg.env.id == "CartPole-v1"
    for key, value in preset_values("ppo_cartpole").items():
        assert config_value(cfg, key) == value, key


def test_default_config_is_ppo_on_pendulum_with_its_preset():
    cfg = train_config()
    assert isinstance(cfg.algo, PPOConfig)
    assert (cfg.env.id, cfg.preset) == ("Pendulum-v1", "ppo_pendulum")


def test_user_override_wins_over_the_tuned_preset():
    cfg = train_config("env=pendulum", "algo.gamma=0.95", "env.num_envs=16", "total_timesteps=3000")
    assert (cfg.algo.gamma, cfg.env.num_envs, cfg.total_timesteps) == (0.95, 16, 3000)
    preset = preset_values("ppo_pendulum")  # the rest of the preset stays
    assert cfg.preset == "ppo_pendulum" and cfg.algo.n_steps == preset["algo.n_steps"]


@pytest.mark.parametrize("extra", [[], ["env=cartpole"]])
def test_env_id_on_the_command_line_drops_the_preset_of_the_env_group(extra):
    argv = normalize_overrides([*extra, "env.id=Acrobot-v1"])
    assert argv[-1] == "~tuned"
    cfg = train_config(*argv)
    assert (cfg.env.id, cfg.preset, cfg.env.num_envs, cfg.algo.gamma) == (
        "Acrobot-v1", None, default_num_envs(PPOConfig()), PPOConfig().gamma)
    explicit = ["env.id=Acrobot-v1", "tuned=ppo_cartpole"]  # asked for by name: kept
    assert normalize_overrides(explicit) == explicit


def test_generic_gymnasium_id_composes_with_its_id_and_schema_defaults():
    cfg = train_config("env=Acrobot-v1")
    assert cfg.env.id == "Acrobot-v1"
    assert cfg.preset is None
    assert (cfg.env.num_envs, cfg.algo.gamma) == (default_num_envs(PPOConfig()), PPOConfig().gamma)


def test_namespaced_gymnasium_id_composes_into_the_env_group():
    assert compose("env=phys2d/CartPole-v1").env.id == "phys2d/CartPole-v1"


def test_smoke_debug_mode_shrinks_the_run():
    cfg = train_config("debug=smoke", "env=pendulum")
    assert (cfg.total_timesteps, cfg.eval.freq, cfg.eval.episodes, cfg.logger.log_freq) == (
        512, 256, 2, 0)
    # the preset's value: smoke leaves env and algo fields alone
    assert cfg.env.num_envs == preset_values("ppo_pendulum")["env.num_envs"]


def test_smoke_debug_mode_works_with_the_cartpole_preset():
    # smoke must not shrink env.num_envs: 32 steps * 2 envs would not be divisible by the
    # ppo_cartpole preset's batch_size=256.
    try:
        train_config("debug=smoke", "env=CartPole-v1")
    except UserError as exc:
        pytest.fail(f"`rltrain debug=smoke env=CartPole-v1` is refused: {exc}")


def test_logger_none_turns_off_tensorboard_and_keeps_metrics_csv():
    cfg = train_config("logger=none")
    assert (cfg.logger.tensorboard, cfg.logger.csv) == (False, True)
    assert (cfg.logger.wandb.enabled, cfg.logger.swanlab.enabled) == (False, False)


def test_step_counts_accept_scientific_notation_and_become_ints():
    cfg = train_config("total_timesteps=5e4", "eval.freq=2.5e3", "checkpoint.freq=1e4")
    assert cfg.total_timesteps == 50000 and type(cfg.total_timesteps) is int
    assert cfg.eval.freq == 2500 and type(cfg.eval.freq) is int
    assert cfg.checkpoint.freq == 10000


def test_checkpoint_dict_converts_back_to_the_same_config():
    cfg = train_config("env=CartPole-v1", "algo.lr=1e-4", "seed=3")
    assert to_train_config(config_to_dict(cfg)) == cfg


@pytest.mark.parametrize("name", sorted(ALGOS))
def test_every_algo_yaml_converts_to_its_dataclass(name):
    spec = ALGOS[name]
    cfg = train_config(f"algo={name}", "env=Acrobot-v1")
    assert type(cfg.algo) is spec.config and issubclass(spec.config, AlgoConfig)
    assert cfg.algo.name == name
    # every value in the YAML reaches the dataclass (nothing is dropped or renamed)
    text = resources.files("rltrain.conf").joinpath("algo", f"{name}.yaml").read_text()
    values = {k: v for k, v in OmegaConf.to_container(OmegaConf.create(text)).items()
              if k != "defaults"}
    if cfg.preset is None:
        for key, value in values.items():
            assert getattr(cfg.algo, key) == value, f"algo.{key}"
    structured = OmegaConf.merge(OmegaConf.structured(spec.config), values)
    assert type(OmegaConf.to_object(structured)) is spec.config


TUNED = sorted(p.name[:-5] for p in resources.files("rltrain.conf").joinpath("tuned").iterdir()
               if p.name.endswith(".yaml"))


@pytest.mark.parametrize("preset", TUNED)
def test_every_tuned_preset_composes_and_validates(preset):
    algo = "ppo_lstm" if preset.startswith("ppo_lstm_") else preset.partition("_")[0]
    env = preset[len(algo) + 1:]
    env = "ALE/Breakout-v5" if env == "atari" else env  # <algo>_atari applies to every ALE game
    family = family_of(ENV_ALIASES.get(env, env))
    if family == "robotics":  # its extra lives in a venv of its own (make test-robotics)
        pytest.importorskip("gymnasium_robotics")
    cfg = train_config(f"algo={algo}", f"env={env}")
    assert cfg.preset == preset and cfg.algo.name == algo.partition("_")[0]  # ppo_lstm is ppo
    # what checkpoints store: the plain dict of OmegaConf's structured round trip, however made
    assert config_to_dict(cfg) == OmegaConf.to_container(OmegaConf.structured(cfg), resolve=True)


# ---- mistakes become one-line UserErrors -----------------------------------------------------

def test_typo_field_names_the_key_and_suggests_the_real_one():
    message = user_error("algo.lrr=1")
    assert "algo.lrr" in message and "did you mean algo.lr" in message


@pytest.mark.parametrize("override, near", [("total_timestep=5", "total_timesteps"),
                                            ("env.num_env=2", "env.num_envs")])
def test_typo_fields_at_other_levels_suggest_the_real_one(override, near):
    assert f"did you mean {near}" in user_error(override)


@pytest.mark.parametrize("override, near", [
    ("lr=1e-3", "algo.lr"), ("gamma=0.9", "algo.gamma"), ("num_envs=4", "env.num_envs or eval.num_envs"),
    ("rmsprop_alpha=0.9", "algo.rmsprop_alpha (a2c)"), ("n_steps=5", "algo.n_steps (a2c, ars, ppo, pqn, trpo)"),
    ("episodes=3", "eval.episodes")])
def test_a_section_field_given_at_the_top_level_suggests_its_section(override, near):
    assert user_error(override) == f"unknown field '{override.split('=')[0]}': did you mean {near}?"


def test_plus_prefixed_unknown_field_composes_but_is_refused_by_validation():
    cfg = compose("+algo.lrr=1")  # the schema does not guard `+` additions ...
    with pytest.raises(UserError, match="lrr") as err:
        to_train_config(cfg)  # ... the conversion to TrainConfig does
    assert "\n" not in str(err.value)


def test_unknown_algo_is_one_line_with_a_suggestion():
    message = user_error("algo=dqnn")
    assert message.startswith("unknown algo 'dqnn'")
    assert re.search(r"did you mean|choose one of", message)
    assert any(name in message for name in ALGOS)
    assert "_schema" not in message


def test_unknown_env_is_one_line_suggesting_the_closest_id():
    message = user_error("env=Pendulm-v1")
    assert message.startswith("unknown env 'Pendulm-v1'") and "did you mean Pendulum-v1" in message


def test_wrong_type_names_the_key_value_and_expected_type():
    assert user_error("algo.lr=abc") == "algo.lr=abc: expected float, got str"
    assert user_error("env.num_envs=many") == "env.num_envs=many: expected integer, got str"


@pytest.mark.parametrize("override, fragment", [
    ("total_timesteps=0", "total_timesteps=0"),
    ("total_timesteps=-5", "total_timesteps=-5"),
    ("total_timesteps=1.5", "whole number"),
    ("env.num_envs=0", "env.num_envs=0 must be > 0"),
    ("eval.episodes=0", "eval.episodes=0"),
    ("progress=fancy", "progress='fancy'"),
    ("env.vectorization=threads", "env.vectorization='threads'"),
    ("checkpoint.keep_last=-1", "checkpoint.keep_last=-1"),
])
def test_invalid_values_are_refused_with_the_field_named(pendulum, override, fragment):
    # Validation happens after composition; merging into one composed config keeps this fast.
    with pytest.raises(UserError, match=re.escape(fragment)) as err:
        to_train_config(OmegaConf.merge(pendulum, OmegaConf.from_dotlist([override])))
    assert "\n" not in str(err.value)


def test_batch_size_that_does_not_divide_the_rollout_is_refused(pendulum):
    bad = OmegaConf.merge(pendulum, OmegaConf.from_dotlist(["algo.batch_size=100"]))
    preset = preset_values("ppo_pendulum")
    rollout = preset["algo.n_steps"] * preset["env.num_envs"]  # the message names the rollout
    with pytest.raises(UserError, match=f"algo.batch_size=100 .*{rollout}") as err:
        to_train_config(bad)
    assert "\n" not in str(err.value)


# ---- devices, and the configs of `rltrain eval` / `rltrain export` ---------------------------

def with_override(cfg, override: str):
    return OmegaConf.merge(cfg, OmegaConf.from_dotlist([override]))


def test_cuda_device_is_checked_against_the_gpus_of_this_machine(pendulum, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    for ok in ("cuda", "cuda:0", "cuda:1", "auto", "cpu"):
        assert to_train_config(with_override(pendulum, f"device={ok}")).device == ok
    message = ("device=cuda:2: this machine has 2 CUDA GPU(s), cuda:0 to cuda:1; use "
               "device=cuda:0 or device=cpu")
    with pytest.raises(UserError, match=re.escape(message)):
        to_train_config(with_override(pendulum, "device=cuda:2"))


@pytest.mark.parametrize("name", ["cpu", "cpu:0", "cuda", "cuda:1", "cuda:12", "mps", "mps:0",
                                  "meta", "xla", "gpu", "CPU", "cuda:-1", "cuda:01", "cuda: 1",
                                  " cpu", "cuda:0 ", "cuda:1:2", "cuda:", ""])
def test_device_names_are_read_as_torch_reads_them(name):
    # check_device reads the name without torch: it accepts exactly what torch.device accepts,
    # among the cpu, cuda and mps devices
    try:
        accepted = torch.device(name).type in ("cpu", "cuda", "mps")
    except (RuntimeError, TypeError, ValueError):
        accepted = False
    try:
        check_device("device", name, here=False)
        passed = True
    except UserError:
        passed = False
    assert passed == accepted


def test_config_a_checkpoint_stores_keeps_the_device_it_was_trained_on(pendulum, monkeypatch):
    # `rltrain eval` of a run trained on a GPU, on a machine without one, picks its own device
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    saved = config_to_dict(to_train_config(pendulum))
    saved["device"] = "cuda:3"
    assert to_train_config(saved).device == "cuda:3"
    with pytest.raises(UserError, match=re.escape("device=cuda:3: no CUDA GPU is available")):
        to_train_config(saved, here=True)
    saved["device"] = "banana"  # a name torch does not know is refused wherever it comes from
    with pytest.raises(UserError, match="device=banana: choose cpu, cuda, cuda:N, mps or auto"):
        to_train_config(saved)


@pytest.mark.parametrize(("schema", "field", "value", "fragment"), [
    (EvalRunConfig, "episodes", 0, "episodes=0 must be > 0"),
    (EvalRunConfig, "num_envs", -1, "num_envs=-1 must be > 0"),
    (EvalRunConfig, "video_episodes", 0, "video_episodes=0 must be > 0"),
    (EvalRunConfig, "seed", 2**32, "seed=4294967296 must be in [0, 4294967295]"),
    (EvalRunConfig, "device", "gpu", "device=gpu: choose cpu, cuda, cuda:N, mps or auto"),
    (ExportConfig, "format", "zip", "format='zip': choose one of onnx, torchscript"),
    (ExportConfig, "check_samples", 0, "check_samples=0 must be > 0"),
    (ExportConfig, "seed", -1, "seed=-1 must be in [0, 4294967295]"),
])
def test_eval_and_export_configs_refuse_values_they_cannot_use(schema, field, value, fragment):
    cfg = schema(ckpt="run", **{field: value})
    with pytest.raises(UserError, match=re.escape(fragment)):
        cfg.validate()
    assert schema(ckpt="run").validate() == schema(ckpt="run")


def test_missing_mandatory_value_names_the_key():
    with pytest.raises(UserError, match=r"missing value for ckpt: add `ckpt=...`"):
        compose_checked("eval", [])


# ---- sweeps --------------------------------------------------------------------------------

def test_sweep_overrides_are_checked_with_their_first_value():
    assert first_of_sweeps(["seed=0,1,2", "algo.lr=1e-3", "hydra.run.dir=x",
                            "algo.gamma=interval(0.9,0.99)", "algo.n_steps=range(16,64,16)",
                            "env=choice(cartpole,pendulum)"]) == [
        "seed=0", "algo.lr=1e-3", "algo.n_steps=16", "env=cartpole"]
    check_overrides(["seed=0,1", "env=CartPole-v1,Pendulum-v1"])
    with pytest.raises(UserError, match="algo.lrr"):
        check_overrides(["seed=0,1", "algo.lrr=1,2"])


def test_sweep_variants_give_every_other_value_once_and_long_number_sweeps_by_their_ends():
    argv = ["algo=ppo,a2c,dqn", "seed=range(0,1000)", "algo.lr=1e-3", "hydra.run.dir=x",
            "algo.gamma=interval(0.9,0.99)", "algo.batch_size=64,100,128,64"]
    assert sweep_variants(argv) == [
        ["algo=a2c", "seed=0", "algo.lr=1e-3", "algo.batch_size=64"],
        ["algo=dqn", "seed=0", "algo.lr=1e-3", "algo.batch_size=64"],
        ["algo=ppo", "seed=999", "algo.lr=1e-3", "algo.batch_size=64"],  # 1000 values: the ends
        ["algo=ppo", "seed=0", "algo.lr=1e-3", "algo.batch_size=100"],  # short: every value
        ["algo=ppo", "seed=0", "algo.lr=1e-3", "algo.batch_size=128"],
    ]
    assert sweep_variants(["seed=3", "algo.lr=1e-3"]) == []  # no sweep: the first job is all
    long = sweep_variants([f"algo.lr={','.join([*map(str, range(1, 20)), 'nan', '-inf'])}"])
    assert [v[0] for v in long] == ["algo.lr=19", "algo.lr=nan", "algo.lr=-inf"]


@pytest.mark.parametrize(("sweep", "message"), [
    (["algo=ppo,dqnn"], "unknown algo 'dqnn': did you mean dqn or qrdqn or pqn?"),
    (["seed=0,1,-5"], "seed=-5 must be in [0, 4294967295]"),
    (["seed=range(0,1000)", "algo.lr=1e-3,-1"], "algo.lr=-1.0 must be a finite number > 0"),
    (["algo.lr=1e-3,nan"], "algo.lr=nan must be a finite number > 0"),
    (["algo.n_steps=2048", "algo.batch_size=64,100,128"], "algo.batch_size=100 does not divide"),
    # a pair no single variant has: dqn with Pendulum (the grid's job 3)
    (["algo=ppo,dqn", "env=CartPole-v1,Pendulum-v1"], "algo=dqn cannot handle Pendulum-v1's Box "
                                                      "action space; algorithms that fit: a2c"),
])
def test_a_multirun_refuses_a_bad_value_of_any_sweep_before_its_first_job(
        sweep, message, tmp_path, monkeypatch, capsys):
    from rltrain import cli

    monkeypatch.chdir(tmp_path)
    tiny = ["total_timesteps=64", "eval.episodes=1", "logger=none", "progress=off"]  # a regression: fast
    env = [] if any(a.startswith("env=") for a in sweep) else ["env=CartPole-v1"]
    monkeypatch.setattr(sys, "argv", ["rltrain", "-m", *env, *sweep, *tiny,
                                      f"hydra.sweep.dir={tmp_path / 'sweep'}"])
    with pytest.raises(SystemExit) as exit_info:
        cli.main()
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"rltrain: error: {message}") and "\n" not in err
    assert list(tmp_path.iterdir()) == []  # no job ran: no sweep folder, no outputs/


# ---- one way in: compose_train_config, validated once per run ------------------------------

@pytest.mark.parametrize("flags", [["--cfg", "job"], ["-c", "job"], ["--info", "config"]])
def test_a_flag_after_env_id_works(flags, tmp_path, monkeypatch, capfd):
    """`~tuned` went after the flags (`algo=ppo env.id=X --cfg job ~tuned`), and Hydra's
    parser refused it: "unrecognized arguments: ~tuned"."""
    from tests.e2e.harness import run_cli

    result = run_cli(["algo=ppo", "env.id=CartPole-v1", *flags], tmp_path, monkeypatch, capfd)
    assert result.rc == 0 and "name: ppo" in result.out and "CartPole-v1" in result.out, \
        result.describe()
    assert normalize_overrides(["algo=ppo", "env.id=CartPole-v1", "--cfg", "job"]) == [
        "algo=ppo", "env.id=CartPole-v1", "~tuned", "--cfg", "job"]


@pytest.mark.parametrize("arg, hint", [("algo=dqn_schema", "use algo=dqn"),
                                       ("env=env_schema", "choose an env= option")])
def test_a_schema_is_not_an_option(arg, hint):
    """`algo=dqn_schema` was accepted: it skips conf/algo/dqn.yaml and trains the bare
    dataclass; `--help` lists the schemas beside the options."""
    with pytest.raises(UserError, match=f"is the typed schema behind the .* {hint}"):
        compose_train_config([arg, "env.id=CartPole-v1"] if arg.startswith("algo") else [arg])


def test_compose_train_config_spells_the_short_forms_and_is_idempotent():
    argv = ["net.hidden=[32]", "env.import=gymnasium.envs", "env.id=Acrobot-v1"]
    normalized = normalize_overrides(argv)
    assert normalized == ["algo.net.hidden=[32]", "env.imports=[gymnasium.envs]",
                          "env.id=Acrobot-v1", "~tuned"]
    assert normalize_overrides(normalized) == normalized
    cfg = compose_train_config(argv)
    assert (cfg.algo.net.hidden, cfg.env.imports, cfg.env.id, cfg.preset) == (
        [32], ["gymnasium.envs"], "Acrobot-v1", None)
    assert compose_train_config(normalized, normalized=True) == cfg


@pytest.fixture()
def counted(monkeypatch) -> dict[str, int]:
    """Calls of the config validation and of the env check, counted."""
    import rltrain.config.validation
    import rltrain.envs.check

    calls = {"validate": 0, "check_env": 0}

    def counter(name: str, orig):
        def counting(*args, **kwargs):
            calls[name] += 1
            return orig(*args, **kwargs)
        return counting

    for module, name in ((rltrain.config.validation, "validate"), (rltrain.envs.check, "check_env")):
        monkeypatch.setattr(module, name, counter(name, getattr(module, name)))
    return calls


def test_a_single_cli_run_validates_and_checks_its_env_once(counted, tmp_path, monkeypatch):
    import sys

    from rltrain import cli

    built: list[TrainConfig] = []

    class FakeRunner:  # the config's journey ends where the Runner starts
        def __init__(self, cfg, run_dir, **kwargs):
            built.append(cfg)
            self.stopper = None

        def run(self):
            return {"mean_reward": 0.0}

    monkeypatch.setattr("rltrain.launch.Runner", FakeRunner)
    argv = ["env=CartPole-v1", "net.hidden=[16]", "logger=none", f"hydra.run.dir={tmp_path}"]
    monkeypatch.setattr(sys, "argv", ["rltrain", *argv])
    cli.main()
    assert counted == {"validate": 1, "check_env": 1}  # before: validate 2 (pre-check + job)
    assert built == [train_config("env=CartPole-v1", "net.hidden=[16]", "logger=none")]


def test_a_job_composing_other_values_validates_its_own_config(counted):
    composed = compose_job(["seed=0,1", "env=CartPole-v1"])
    checked = composed.train_cfg
    assert (checked.seed, counted["validate"]) == (0, 1)
    same = train_config_of(compose("seed=0", "env=CartPole-v1"), composed)  # a single run: reused
    assert same == checked and same is not checked and counted["validate"] == 1
    other = train_config_of(compose("seed=1", "env=CartPole-v1"), composed)  # a sweep's 2nd job
    assert other.seed == 1 and counted["validate"] == 2
    alone = train_config_of(compose("seed=0", "env=CartPole-v1"))  # nothing handed over
    assert alone == checked and counted["validate"] == 3
