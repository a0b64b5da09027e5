"""Inputs that once ended in a traceback, an unbounded allocation or a wrong folder (issue 44):
each is now one `rltrain: error:` line with exit code 2, or, for a quoted `resume=`, works.

Every case runs `rltrain.cli.main` in-process (`harness.run_cli`) with a tiny budget. The env
factories below are the user code some cases name (`env.id=tests.e2e.test_refused_inputs:...`).
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import gymnasium as gym
import pytest

from rltrain.errors import UserError
from rltrain.nets.config import MAX_ONE_HOT
from tests.e2e.harness import EXIT_USAGE, assert_refused, run_cli, tree

MODULE = "tests.e2e.test_refused_inputs"
SMOKE = ["debug=smoke", "env.num_envs=2", "algo.n_steps=64", "algo.batch_size=64",
         "logger=none", "progress=off"]


class Categorical(gym.Env):
    """One step episodes over a categorical observation space (Discrete or MultiDiscrete)."""

    action_space = gym.spaces.Discrete(2)

    def __init__(self, space: gym.Space):
        self.observation_space = space

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        return self.observation_space.sample(), {}

    def step(self, action):
        return self.observation_space.sample(), 0.0, True, False, {}


def huge_discrete() -> gym.Env:
    """Discrete(10**7), the issue's space: its one-hot would be a 10**7-wide first layer. No
    test trains it (a build without the cap takes ~24 GB); `rltrain debug=smoke
    env.id=tests.e2e.test_refused_inputs:huge_discrete` shows the refusal."""
    return Categorical(gym.spaces.Discrete(10**7))


def wide_multi_discrete() -> gym.Env:
    """MultiDiscrete of two entries under the cap each, over it together (and small enough
    that a build without the cap trains in a second rather than being killed)."""
    half = MAX_ONE_HOT // 2 + 1
    return Categorical(gym.spaces.MultiDiscrete([half, half]))


def taxi_sized() -> gym.Env:
    """Discrete(500), as Taxi: one-hot as before."""
    return Categorical(gym.spaces.Discrete(500))


# ---- 1. env.kwargs a registered id's constructor refuses ----------------------------------

@pytest.mark.parametrize(("argv", "fragment"), [
    (["env=Hopper-v5", "+env.kwargs.frame_skip=0"],
     "env Hopper-v5: ZeroDivisionError: float division by zero (check env.kwargs.frame_skip=0)"),
    (["env=Hopper-v5", "+env.kwargs.xml_file=/nonexistent.xml"],
     "env Hopper-v5: OSError: File /nonexistent.xml does not exist (check "
     "env.kwargs.xml_file='/nonexistent.xml')"),
    (["env=LunarLander-v3", "+env.kwargs.gravity=5"],
     "env LunarLander-v3: AssertionError: gravity (current value: 5) must be between -12 and 0 "
     "(check env.kwargs.gravity=5)"),
])
def test_env_kwarg_a_registered_env_refuses_is_one_line(argv, fragment, tmp_path, monkeypatch,
                                                        capfd):
    pytest.importorskip("mujoco" if "Hopper" in argv[0] else "Box2D")
    result = run_cli([*SMOKE, *argv, f"hydra.run.dir={tmp_path / 'run'}"], tmp_path,
                     monkeypatch, capfd)
    assert_refused(result, EXIT_USAGE, fragment)
    assert not (tmp_path / "run").exists()  # failed before its first step: no folder left


# ---- 2. an output folder behind a broken symbolic link -------------------------------------

@pytest.mark.parametrize(("link", "below", "fragment"), [
    ("dangling", "", "is a symbolic link to {tmp}/missing/folder, which does not exist"),
    ("dangling", "run", "is a symbolic link to {tmp}/missing/folder, which does not exist"),
    ("loop", "", "is a symbolic link that loops"),
    ("loop", "run", "is a symbolic link that loops"),
])
def test_output_folder_behind_a_broken_link_is_one_line(link, below, fragment, tmp_path,
                                                        monkeypatch, capfd):
    path = tmp_path / link
    path.symlink_to(tmp_path / "missing" / "folder" if link == "dangling" else path)
    target = path / below if below else path
    result = run_cli([*SMOKE, f"hydra.run.dir={target}"], tmp_path, monkeypatch, capfd)
    assert_refused(result, EXIT_USAGE, f"output folder {target} cannot be created: {path} "
                                       + fragment.format(tmp=tmp_path))
    assert tree(tmp_path) == {link}  # the link as it was; nothing made where it points


# ---- 3. resume= of a folder whose name needs quotes ----------------------------------------

def test_resume_of_a_quoted_folder_with_spaces_and_accents_continues_it(tmp_path, monkeypatch,
                                                                        capfd):
    from rltrain.checkpoint import format as checkpoint

    run = tmp_path / "my runs" / "été"
    # the argv elements as a shell passes them for `rltrain "hydra.run.dir='...'"`: the quotes
    # are part of the value, and Hydra's grammar takes them off
    first = run_cli([*SMOKE, "total_timesteps=128", f"hydra.run.dir='{run}'"], tmp_path,
                    monkeypatch, capfd)
    assert first.rc == 0, first.describe()
    assert (run / "checkpoints" / "final.pt").is_file()
    result = run_cli([f"resume='{run}'", "total_timesteps=256", "progress=off"], tmp_path,
                     monkeypatch, capfd)
    assert result.rc == 0, result.describe()
    saved = checkpoint.load(run / "checkpoints" / "latest.pt")
    assert saved["counters"]["global_step"] == 256
    assert (run / ".hydra" / "resume").is_dir()  # the resume recorded in the run's own folder
    assert {p.name for p in tmp_path.iterdir()} == {"my runs"}  # no folder named "'" beside it


def _as_suggested(argv: list[str], tmp_path, monkeypatch, capfd) -> list[str]:
    """`argv` refused for its last, unquoted non-ASCII path; then as the error line quotes it."""
    refused = run_cli(argv, tmp_path, monkeypatch, capfd)
    key, _, value = argv[-1].partition("=")
    assert_refused(refused, EXIT_USAGE, f"cannot parse {argv[-1]}: Hydra reads 'é' (not ASCII) "
                                        f"only inside quotes; in a shell: '{key}=\"{value}\"'")
    return [*argv[:-1], *shlex.split(refused.err.rpartition("in a shell: ")[2])]


def test_an_unquoted_non_ascii_path_is_one_line_whose_quoting_works(tmp_path, monkeypatch, capfd):
    from rltrain.checkpoint import format as checkpoint

    run = tmp_path / "résumé"
    train = _as_suggested([*SMOKE, "total_timesteps=128", f"hydra.run.dir={run}"], tmp_path,
                          monkeypatch, capfd)
    assert tree(tmp_path) == set()  # refused before anything was written
    assert run_cli(train, tmp_path, monkeypatch, capfd).rc == 0
    evaluate = _as_suggested(["eval", "episodes=1", f"ckpt={run}"], tmp_path, monkeypatch, capfd)
    assert run_cli(evaluate, tmp_path, monkeypatch, capfd).rc == 0
    assert (run / "eval" / "results.json").is_file()
    resume = _as_suggested(["total_timesteps=256", "progress=off", f"resume={run}"], tmp_path,
                           monkeypatch, capfd)
    assert run_cli(resume, tmp_path, monkeypatch, capfd).rc == 0
    assert checkpoint.load(run / "checkpoints" / "latest.pt")["counters"]["global_step"] == 256
    assert {p.name for p in tmp_path.iterdir()} == {"résumé"}


# ---- 4. rltrain report into a folder it cannot write ----------------------------------------

@pytest.fixture
def sweep(tmp_path: Path) -> Path:
    """A folder of one evaluated run, as `rltrain report` reads it."""
    run = tmp_path / "sweep" / "0"
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "overrides.yaml").write_text("- algo=ppo\n")
    (run / "metrics.csv").write_text("step,time,name,value\n64,1.0,eval/mean_reward,1.0\n")
    return tmp_path / "sweep"


def test_report_out_that_is_a_file_is_one_line(sweep, tmp_path, monkeypatch, capfd):
    (tmp_path / "notes.txt").write_text("mine\n")
    result = run_cli(["report", str(sweep), "--out", str(tmp_path / "notes.txt")], tmp_path,
                     monkeypatch, capfd)
    assert_refused(result, EXIT_USAGE, f"report: --out {tmp_path / 'notes.txt'} is a file")
    assert (tmp_path / "notes.txt").read_text() == "mine\n"
    result = run_cli(["report", str(sweep), "--out", str(tmp_path / "notes.txt" / "sub")],
                     tmp_path, monkeypatch, capfd)
    assert_refused(result, EXIT_USAGE, "report: cannot create the output folder")


def test_report_whose_write_is_denied_is_one_line(sweep, tmp_path, monkeypatch, capfd):
    """A read-only folder as root sees it on NFS (root squashed), or any write refused:
    simulated, since root ignores the modes `chmod` sets."""
    import rltrain.report.cli as report_cli

    def denied(groups, path, root):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(report_cli, "write_csv", denied)
    before = tree(sweep)
    result = run_cli(["report", str(sweep)], tmp_path, monkeypatch, capfd)
    assert_refused(result, EXIT_USAGE, f"report: cannot write {sweep / 'report.csv'}: "
                                       "Permission denied")
    assert tree(sweep) == before


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0,
                    reason="root writes into read-only folders")
def test_report_of_a_read_only_folder_is_one_line(sweep, tmp_path, monkeypatch, capfd):
    before = tree(sweep)
    sweep.chmod(0o555)
    try:
        result = run_cli(["report", str(sweep)], tmp_path, monkeypatch, capfd)
    finally:
        sweep.chmod(0o755)
    assert_refused(result, EXIT_USAGE, f"report: cannot write into {sweep} (read-only)")
    assert tree(sweep) == before


# ---- 5. categorical observations too large to one-hot ---------------------------------------

def test_categorical_observations_too_wide_to_one_hot_are_one_line(tmp_path, monkeypatch,
                                                                   capfd):
    """Two entries under the cap each, over it together: small enough that a build without the
    cap trains in a second (a `Discrete(10**7)` one would take ~24 GB before the kernel kills
    it: `test_one_hot_cap_refuses_discrete_ten_million` checks that one without building)."""
    result = run_cli([*SMOKE, f"env.id={MODULE}:wide_multi_discrete", "net.hidden=[4]",
                      f"hydra.run.dir={tmp_path / 'run'}"], tmp_path, monkeypatch, capfd)
    assert_refused(result, EXIT_USAGE, "categorical observations MultiDiscrete([32769, 32769]) "
                                       "would one-hot into 65,538 network inputs, more than "
                                       "65,536 (rltrain.nets.config.MAX_ONE_HOT)")
    assert "give the env a Box observation" in result.err
    assert not (tmp_path / "run").exists()


def test_one_hot_cap_refuses_discrete_ten_million():
    from rltrain.nets.encoder import make_encoder
    from rltrain.nets.spec import NetSpec

    with pytest.raises(UserError, match=r"Discrete\(10,000,000\) would one-hot into "
                                        r"10,000,000 network inputs"):
        make_encoder(NetSpec(obs_shape=(1,), hidden=(64,), obs_nvec=(10**7,)))


def test_one_hot_cap_counts_every_categorical_entry_and_keeps_taxi():
    from rltrain.nets.encoder import OneHot, make_encoder
    from rltrain.nets.spec import NetSpec

    encoder, width = make_encoder(NetSpec(obs_shape=(1,), hidden=(4,), obs_nvec=(500,)))
    assert isinstance(encoder, OneHot) and width == 500
    half = NetSpec(obs_shape=(1,), hidden=(), obs_nvec=(MAX_ONE_HOT // 2 + 1,))
    with pytest.raises(UserError, match=r"a Discrete\(32,769\), b Discrete\(32,769\) would "
                                        r"one-hot into 65,538"):
        make_encoder(NetSpec(obs_shape=(), hidden=(4,), entries=(("a", half), ("b", half))))


def test_taxi_sized_categorical_observations_still_train(tmp_path, monkeypatch, capfd):
    result = run_cli([*SMOKE, f"env.id={MODULE}:taxi_sized", "net.hidden=[4]",
                      f"hydra.run.dir={tmp_path / 'run'}"], tmp_path, monkeypatch, capfd)
    assert result.rc == 0, result.describe()
    assert (tmp_path / "run" / "checkpoints" / "latest.pt").is_file()


# ---- 6. num_seeds beyond this machine's memory ----------------------------------------------

def test_num_seeds_of_a_billion_is_refused_when_composed():
    """Checked from the config alone: a build without the bound grows for minutes (a billion
    seed configs, then runners) until the kernel kills it, so this case never trains."""
    from rltrain.config.compose import compose_train_config

    with pytest.raises(UserError, match="num_seeds=1,000,000,000: each seed needs at least"):
        compose_train_config([*SMOKE, "num_seeds=1000000000"])


def test_num_seeds_beyond_memory_is_one_line_before_anything_is_built(tmp_path, monkeypatch,
                                                                      capfd):
    from rltrain.config.compose import compose_train_config
    from rltrain.config.validation import seed_bytes

    per_seed = seed_bytes(compose_train_config([*SMOKE, "num_seeds=2"]))
    monkeypatch.setattr("rltrain.config.validation.available_memory", lambda: 2 * per_seed)
    compose_train_config([*SMOKE, "num_seeds=2"])  # exactly fits
    result = run_cli([*SMOKE, "num_seeds=3", f"hydra.run.dir={tmp_path / 'run'}"], tmp_path,
                     monkeypatch, capfd)
    assert_refused(result, EXIT_USAGE, "num_seeds=3: each seed needs at least")
    assert "at most num_seeds=2 fit" in result.err
    assert tree(tmp_path) == set()
