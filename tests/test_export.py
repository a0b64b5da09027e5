"""`rltrain export`: ONNX / TorchScript round trips of a discrete and a continuous policy, the
normalization really folded in, a broken export detected, and one-line errors."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from rltrain import api, cli
from rltrain.checkpoint import format as checkpoint
from rltrain.config.registry import ALGOS
from rltrain.config.schema import EnvConfig, TrainConfig, WrapperConfig, config_to_dict
from rltrain.config.validation import validate
from rltrain.envs.make import make_env
from rltrain.envs.normalize import NormalizeObs
from rltrain.envs.vec_env import GymVecEnv
from rltrain.errors import UserError
from rltrain.evaluation.agent import build_agent, load_checkpoint
from rltrain.export import formats
from rltrain.export.check import compare_actions, sample_observations
from rltrain.export.command import export_policy
from rltrain.export.module import ExportedPolicy, find_layer, torch_actions

# Seconds-long runs: enough steps for the weights and the observation statistics to move.
COMMON = ["logger=none", "progress=off", "eval.freq=0", "eval.episodes=1", "eval.num_envs=1",
          "checkpoint.freq=0", "algo.hidden_sizes=[16,16]", "env.max_episode_steps=50"]
RUNS = {
    "discrete": ["algo=ppo", "env=CartPole-v1", "total_timesteps=128", "env.num_envs=2",
                 "algo.n_steps=32", "algo.batch_size=32", "algo.n_epochs=1"],
    "continuous": ["algo=sac", "env=Pendulum-v1", "total_timesteps=200", "env.num_envs=1",
                   "algo.learning_starts=100", "algo.batch_size=32", "env.normalize_obs=true"],
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """A tiny trained PPO CartPole run (Discrete) and SAC Pendulum run (Box, normalized obs)."""
    out = {}
    for kind, overrides in RUNS.items():
        run_dir = tmp_path_factory.mktemp(kind)
        api.train([*overrides, *COMMON], run_dir=run_dir)
        out[kind] = run_dir
    return out


def _agent(run_dir: Path):
    """(policy, eval env with the stored statistics, checkpoint payload) of a run."""
    path, payload, cfg = load_checkpoint(run_dir)
    env = make_env(cfg.env, num_envs=1, training=False)
    return build_agent(cfg, env, payload, path, "cpu").policy, env, payload


def _random_obs(env, n: int, seed: int) -> np.ndarray:
    """Random observations drawn the way the export check draws them."""
    space = find_layer(env, GymVecEnv).venv.single_observation_space
    return sample_observations(space, find_layer(env, NormalizeObs), n, seed)


@pytest.mark.parametrize("fmt", ["onnx", "torchscript"])
@pytest.mark.parametrize("kind", ["discrete", "continuous"])
def test_export_round_trip_gives_the_torch_policys_actions(runs, kind, fmt):
    if fmt == "onnx":  # skip where the `export` extra is not installed
        for module in ("onnx", "onnxscript", "onnxruntime"):
            pytest.importorskip(module)
    result = export_policy(runs[kind], fmt)
    target = runs[kind] / "export" / formats.FORMATS[fmt]
    assert result["path"] == str(target) and target.is_file()
    assert result["ok"] and result["samples"] == 1000 and result["mismatches"] == 0
    # Reload independently and compare on observations the command did not see (other batch size).
    policy, env, _ = _agent(runs[kind])
    obs = _random_obs(env, 37, seed=123)
    exported, reference = formats.load(fmt, target)(obs), torch_actions(policy, env, obs)
    env.close()
    if kind == "discrete":
        assert exported.dtype == np.int64 and exported.shape == (37,)
        assert np.array_equal(exported, reference)
        assert result["max_abs_diff"] == 0.0
    else:
        assert exported.dtype == np.float32 and exported.shape == (37, 1)
        assert np.abs(exported - reference).max() < 1e-5
        assert result["max_abs_diff"] < 1e-5 and result["normalized_obs"]


def test_normalization_is_folded_into_the_export(runs):
    """exported(raw obs) == env action of policy(normalized obs), with the stored statistics,
    and differs from the policy applied to the raw observations."""
    result = export_policy(runs["continuous"], "torchscript", check_samples=10)
    policy, env, payload = _agent(runs["continuous"])
    env.close()
    rms = payload["env"]["obs_rms"]
    assert rms["count"] > 100  # trained: the statistics moved away from (0, 1)
    raw = np.array([[1.0, 0.0, 0.0], [-0.5, 0.8, 3.0], [0.0, -1.0, -7.5]], dtype=np.float32)
    z = ((torch.from_numpy(raw).double() - rms["mean"]) / torch.sqrt(rms["var"] + 1e-8))
    z = z.clamp(-10.0, 10.0).float()
    with torch.no_grad():
        expected = 2.0 * policy.act(z, deterministic=True).clamp(-1, 1).numpy()  # Pendulum: ±2
        unfolded = 2.0 * policy.act(torch.from_numpy(raw), deterministic=True).numpy()
    exported = formats.load("torchscript", Path(result["path"]))(raw)
    np.testing.assert_allclose(exported, expected, atol=1e-5)
    assert np.abs(exported - unfolded).max() > 1e-3


@pytest.mark.parametrize("name", list(ALGOS))
def test_every_algorithm_exports_to_torchscript(name, tmp_path, recwarn):
    """Untrained policies of every registered algorithm, with stored normalizer statistics;
    tracing them warns of nothing (a TracerWarning means a Python branch on a traced value)."""
    spec = ALGOS[name]
    discrete = "box" not in spec.action_kinds
    env_id = "CartPole-v1" if discrete else "Pendulum-v1"
    cfg = validate(TrainConfig(algo=spec.config(name=name, hidden_sizes=[16]),
                               env=EnvConfig(id=env_id, num_envs=1, normalize_obs=True)))
    env = make_env(cfg.env, num_envs=1)
    algo = spec.build(cfg.algo, env.spec, "cpu")
    dim = env.spec.obs_shape[0]
    env.close()
    stats = {"mean": torch.linspace(-0.5, 0.5, dim, dtype=torch.float64),
             "var": torch.linspace(0.1, 4.0, dim, dtype=torch.float64), "count": 100.0}
    path = checkpoint.save({"config": config_to_dict(cfg), "algo": algo.state_dict(),
                            "env": {"obs_rms": stats}, "counters": {}},
                           tmp_path / "checkpoints" / "latest.pt")
    result = export_policy(path, "torchscript", check_samples=200)
    assert result["ok"] and result["normalized_obs"]
    assert result["action_shape"] == ([] if discrete else [1])
    assert not [w for w in recwarn if issubclass(w.category, torch.jit.TracerWarning)]


@pytest.mark.parametrize("fmt", ["onnx", "torchscript"])
def test_a_float64_env_exports_a_float32_input_and_says_so(fmt, tmp_path, monkeypatch, capsys):
    """The export takes float32 whatever the env's float dtype (the networks' dtype): the
    printed line and the file's metadata say float32, and float32 observations run. They said
    the env's float64, which ONNX Runtime then refused ("Unexpected input data type")."""
    if fmt == "onnx":
        pytest.importorskip("onnxruntime")
    wrapper = WrapperConfig(name="DtypeObservation", kwargs={"dtype": "float64"})
    cfg = validate(TrainConfig(algo=ALGOS["ppo"].config(name="ppo", hidden_sizes=[16]),
                               env=EnvConfig(id="Pendulum-v1", num_envs=1, wrappers=[wrapper])))
    env = make_env(cfg.env, num_envs=1)
    assert find_layer(env, GymVecEnv).venv.single_observation_space.dtype == np.float64
    algo = ALGOS["ppo"].build(cfg.algo, env.spec, "cpu")
    env.close()
    path = checkpoint.save({"config": config_to_dict(cfg), "algo": algo.state_dict(), "env": {},
                            "counters": {}}, tmp_path / "checkpoints" / "latest.pt")
    monkeypatch.setattr(sys, "argv", ["rltrain", "export", f"ckpt={path}", f"format={fmt}",
                                      "check_samples=50"])
    cli.main()
    assert "float32 obs [batch, 3]" in capsys.readouterr().out
    out = Path(path).parent.parent / "export" / f"policy.{'onnx' if fmt == 'onnx' else 'pt'}"
    assert formats.read_metadata(fmt, out)["obs_dtype"] == "float32"
    if fmt == "onnx":
        import onnxruntime

        session = onnxruntime.InferenceSession(str(out), providers=["CPUExecutionProvider"])
        assert session.get_inputs()[0].type == "tensor(float)"
        action = session.run(None, {"obs": np.zeros((2, 3), np.float32)})[0]
    else:
        with torch.no_grad():
            action = torch.jit.load(str(out))(torch.zeros(2, 3, dtype=torch.float32)).numpy()
    assert action.shape == (2, 1) and np.isfinite(action).all()


def test_box_actions_are_clipped_and_rescaled_like_the_env():
    """A policy acting outside [-1, 1] gets the env's clip and rescale, folded into the export."""

    class Wide(torch.nn.Module):
        def act(self, obs: torch.Tensor, deterministic: bool = True) -> torch.Tensor:
            return obs[:, :1] * 3.0  # in [-3, 3]: the clip matters

    env = make_env(EnvConfig(id="MountainCarContinuous-v0"), num_envs=1, training=False)
    obs = torch.linspace(-1, 1, 9).repeat(2, 1).T.contiguous()
    exported = ExportedPolicy(Wide(), env)(obs).numpy()
    np.testing.assert_allclose(exported, env.to_env_action(Wide().act(obs)), atol=1e-6)
    assert exported.min() == -1.0 and exported.max() == 1.0
    env.close()


@pytest.mark.parametrize("kind", ["discrete", "continuous"])
def test_the_check_detects_a_broken_export(runs, tmp_path, kind):
    policy, env, _ = _agent(runs[kind])
    obs = _random_obs(env, 500, seed=0)
    reference = torch_actions(policy, env, obs)
    module = ExportedPolicy(policy, env)
    env.close()
    example = torch.from_numpy(obs[:2])
    formats.write("torchscript", module, example, tmp_path / "good.pt")
    good = formats.load("torchscript", tmp_path / "good.pt")(obs)
    assert compare_actions(good, reference, discrete=kind == "discrete", action_scale=2.0).ok
    with torch.no_grad():  # a weight-level corruption: every parameter shifted by noise
        gen = torch.Generator().manual_seed(0)
        for p in module.parameters():
            p.add_(0.5 * torch.randn(p.shape, generator=gen))
    formats.write("torchscript", module, example, tmp_path / "broken.pt")
    broken = formats.load("torchscript", tmp_path / "broken.pt")(obs)
    verdict = compare_actions(broken, reference, discrete=kind == "discrete", action_scale=2.0)
    assert not verdict.ok and verdict.mismatches > 50


def test_export_command_exits_1_when_the_export_disagrees(runs, monkeypatch, capsys):
    real_load = formats.load
    monkeypatch.setattr(formats, "load", lambda fmt, path: lambda obs: real_load(fmt, path)(obs) + 1e-3)
    monkeypatch.setattr(sys, "argv", ["rltrain", "export", f"ckpt={runs['continuous']}",
                                      "format=torchscript", "check_samples=50"])
    with pytest.raises(SystemExit) as exc:
        cli.main()
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 1 and len(err.splitlines()) == 1
    assert "policy.pt does NOT match the torch policy: max |Δ| = 0.001" in err


def test_export_command_prints_the_agreement(runs, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["rltrain", "export", f"ckpt={runs['discrete']}",
                                      "format=torchscript", "check_samples=200"])
    cli.main()
    out = capsys.readouterr().out
    assert "float32 obs [batch, 4] -> int64 env action [batch]" in out
    assert "export: policy.pt matches the torch policy on 200 random observations (identical" in out


def test_missing_onnx_packages_are_one_line_naming_the_extra(monkeypatch, capsys, tmp_path):
    for name in ("onnx", "onnxscript", "onnxruntime"):  # `import <name>` now fails
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setattr(sys, "argv", ["rltrain", "export", f"ckpt={tmp_path}/missing.pt"])
    with pytest.raises(SystemExit) as exc:
        cli.main()
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2  # checked before the (missing) checkpoint is even looked at
    assert err == ('rltrain: error: format=onnx needs onnx, onnxscript, onnxruntime: '
                   'pip install "rltrain[export]"')


def test_unknown_format_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="format='tflite': choose one of onnx, torchscript"):
        export_policy(tmp_path / "missing.pt", "tflite")


def test_sampled_observations_respect_bounds_and_statistics():
    import gymnasium as gym

    space = gym.spaces.Box(np.array([-1.0, -np.inf, -3e38], np.float32),
                           np.array([1.0, np.inf, 3e38], np.float32))
    x = sample_observations(space, None, 2000, seed=0)
    assert x.dtype == np.float32 and x.shape == (2000, 3)
    assert x[:, 0].min() >= -1 and x[:, 0].max() <= 1 and x[:, 0].std() > 0.5  # uniform in bounds
    assert abs(x[:, 1].std() - 1) < 0.1 and abs(x[:, 2].std() - 1) < 0.1  # huge bounds: normal
    stats = SimpleNamespace(rms=SimpleNamespace(mean=torch.tensor([0.0, 5.0, 100.0]),
                                                var=torch.tensor([1.0, 4.0, 9.0])))
    x = sample_observations(space, stats, 4000, seed=0)
    assert x[:, 0].min() >= -1 and x[:, 0].max() <= 1  # clipped to the bounds
    np.testing.assert_allclose(x[:, 1:].mean(0), [5.0, 100.0], atol=0.6)
    np.testing.assert_allclose(x[:, 1:].std(0), [8.0, 12.0], rtol=0.05)  # 4x the observed std


def test_a_typo_in_an_export_field_is_one_line(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(sys, "argv", ["rltrain", "export", f"ckpt={tmp_path}", "formt=onnx"])
    with pytest.raises(SystemExit) as exc:
        cli.main()
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2 and err.startswith("rltrain: error: unknown field 'formt': did you mean format")


def test_a_policy_trained_on_the_native_torch_env_exports_against_gymnasium(tmp_path):
    run_dir = tmp_path / "native"
    api.train(["algo=ppo", "env=Pendulum-v1", "env.backend=torch", "total_timesteps=128",
               "env.num_envs=2", "algo.n_steps=32", "algo.batch_size=32", "algo.n_epochs=1",
               *COMMON], run_dir=run_dir)
    result = export_policy(run_dir, "torchscript", check_samples=100)
    assert result["ok"] and result["action_kind"] == "box" and result["action_shape"] == [1]


def test_onnx_export_under_an_info_root_logger_prints_no_optimizer_passes(runs, tmp_path, caplog):
    """After `rltrain.train()` the root logger is at INFO; onnxscript's and onnx_ir's graph
    passes logged each pass there ("Removed 5 unused nodes"). They stay quiet, and their loggers'
    levels are what they were after the export."""
    pytest.importorskip("onnxscript")
    caplog.set_level(logging.INFO)
    before = {name: logging.getLogger(name).level for name in ("onnxscript", "onnx_ir")}
    result = export_policy(runs["discrete"], "onnx", out=tmp_path / "p.onnx", check_samples=10)
    assert result["ok"]
    chatter = [r for r in caplog.records if r.name.split(".")[0] in ("onnxscript", "onnx_ir")]
    assert not chatter, [r.getMessage() for r in chatter]
    assert {name: logging.getLogger(name).level for name in before} == before


@pytest.mark.parametrize("kwargs, message", [
    ({"check_samples": 0}, "check_samples=0 must be > 0"),
    ({"seed": None}, "seed=None must be an integer"),
    ({"seed": -2}, "seed=-2"),
    ({"fmt": "tflite"}, "format='tflite': choose one of onnx, torchscript"),
])
def test_export_policy_from_python_checks_its_arguments_as_rltrain_export_does(
        runs, kwargs, message):
    with pytest.raises(UserError, match=message.replace("(", r"\(")):
        export_policy(runs["discrete"], **kwargs)


def test_export_into_a_folder_is_refused_naming_a_file_to_give(runs, tmp_path):
    """`rltrain export out=<a folder>` ended in an IsADirectoryError traceback."""
    pytest.importorskip("onnxscript")
    with pytest.raises(UserError, match=r"out=.* is a folder: give the file to write, e\.g\. "
                                        r"out=.*policy\.onnx"):
        export_policy(runs["discrete"], "onnx", out=tmp_path)
