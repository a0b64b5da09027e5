"""Bad files, run folders and envs, tried as an adversarial user would, through the CLI in-process.

Every case asserts its exit code (2: bad input, 1: a training fault), at most two lines on
stderr, no traceback, that nothing was written where nothing should be, and that no code named
inside a file ran (each such file names a module or a command that would create a marker).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch

from rltrain.checkpoint import format as checkpoint
from tests.e2e.harness import EXIT_TRAINING, EXIT_USAGE, assert_refused, run_cli, tree

TINY = ["debug=smoke", "env=CartPole-v1", "env.num_envs=2", "algo.n_steps=32",
        "algo.batch_size=64", "algo.hidden_sizes=[16,16]", "progress=off", "logger=none"]
EVIL_MODULE = "rltrain_evil_module"  # written into the case folder; importing it leaves MARKER
MARKER = "MARKER"


def evil(payload: dict, **env: object) -> dict:
    """`payload` with its stored env config changed (a copy)."""
    out = {**payload, "config": {**payload["config"], "env": {**payload["config"]["env"], **env}}}
    return out


class Malicious:
    """Pickles to a call of os.system: a plain `torch.load` would run it."""

    def __reduce__(self):
        return (os.system, (f"touch {MARKER}",))


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A finished tiny PPO CartPole run (512 steps), trained once for the module."""
    from rltrain.api import train

    run = tmp_path_factory.mktemp("trust") / "run"
    train([*TINY, "checkpoint.freq=128"], run_dir=run)
    return run


def make_files(trained: Path, folder: Path) -> None:
    """Every file and folder the cases name, in `folder` (which is also the cwd)."""
    shutil.copytree(trained, folder / "run")
    payload = checkpoint.load(trained / "checkpoints" / "latest.pt")
    files = {
        "evil_id.pt": evil(payload, id="os:system", kwargs={"command": f"touch {MARKER}"}),
        "evil_imports.pt": evil(payload, imports=[EVIL_MODULE]),
        "evil_wrapper.pt": evil(payload, wrappers=[{"name": f"{EVIL_MODULE}:Wrap", "kwargs": {}}]),
        "evil_factory.pt": evil(payload, id=f"{EVIL_MODULE}:make"),
    }
    for name, content in files.items():
        torch.save(content, folder / name)
    for name in ("evil_id", "evil_imports", "evil_wrapper"):
        (folder / f"{name}_run" / "checkpoints").mkdir(parents=True)
        shutil.copy(folder / f"{name}.pt", folder / f"{name}_run" / "checkpoints" / "latest.pt")
    (folder / f"{EVIL_MODULE}.py").write_text(
        "import pathlib\npathlib.Path('MARKER').touch()\nmake = Wrap = None\n")
    torch.save({"weights": Malicious()}, folder / "pickle_bomb.pt")
    (folder / "random.pt").write_bytes(os.urandom(4096))
    (folder / "empty.pt").write_bytes(b"")
    with zipfile.ZipFile(folder / "foreign.pt", "w") as z:
        z.writestr("hello.txt", "not a checkpoint")
    torch.save([1, 2, 3], folder / "list.pt")
    os.mkfifo(folder / "fifo.pt")
    (folder / "empty_dir").mkdir()
    (folder / "half_run" / ".hydra").mkdir(parents=True)
    (folder / "half_run" / "metrics.csv").write_text("step,time,name,value\n")


# name -> (argv, exit code, fragment of the error line); {run} is a finished run
CASES = {
    # ---- code named inside a checkpoint is never imported or called --------------------
    "eval_env_id_names_os_system": (["eval", "ckpt=evil_id.pt"], 2, "add env.import=os"),
    "eval_env_imports_module": (["eval", "ckpt=evil_imports.pt"], 2,
                                f"add env.import={EVIL_MODULE}"),
    "eval_wrapper_names_module": (["eval", "ckpt=evil_wrapper.pt"], 2,
                                  f"add env.import={EVIL_MODULE}"),
    "eval_factory_names_module": (["eval", "ckpt=evil_factory.pt"], 2,
                                  f"add env.import={EVIL_MODULE}"),
    "export_env_id_names_os_system": (["export", "ckpt=evil_id.pt", "format=torchscript"], 2,
                                      "never imports code named in a file"),
    "export_env_imports_module": (["export", "ckpt=evil_imports.pt", "format=torchscript"], 2,
                                  "never imports code named in a file"),
    "export_wrapper_names_module": (["export", "ckpt=evil_wrapper.pt", "format=torchscript"], 2,
                                    "never imports code named in a file"),
    "resume_env_id_names_os_system": (["resume=evil_id_run"], 2, "add env.import=os"),
    "resume_env_imports_module": (["resume=evil_imports_run"], 2, "never imports code"),
    "resume_wrapper_names_module": (["resume=evil_wrapper_run"], 2, "never imports code"),
    "eval_names_a_module_not_recorded": (["eval", "ckpt=evil_id.pt", "env.import=json"], 2,
                                         "does not use module 'json'"),
    "eval_env_id_differs_from_recorded": (["eval", "ckpt=evil_id.pt", "env.id=json:loads"], 2,
                                          "does not match"),
    "eval_other_env_field": (["eval", "ckpt={run}", "env.max_episode_steps=3"], 2,
                             "takes only env.import="),
    "resume_names_a_module_not_recorded": (["resume={run}", "env.import=json",
                                            "total_timesteps=1024"], 2, "does not use module"),
    "eval_pickle_bomb": (["eval", "ckpt=pickle_bomb.pt"], 2, "not a readable rltrain checkpoint"),
    # ---- files that are not checkpoints ---------------------------------------------------
    "eval_random_bytes": (["eval", "ckpt=random.pt"], 2, "not a readable rltrain checkpoint"),
    "eval_empty_file": (["eval", "ckpt=empty.pt"], 2, "checkpoint"),
    "eval_foreign_zip": (["eval", "ckpt=foreign.pt"], 2, "checkpoint"),
    "eval_not_a_dict": (["eval", "ckpt=list.pt"], 2, "not an rltrain checkpoint"),
    "eval_fifo_does_not_hang": (["eval", "ckpt=fifo.pt"], 2, "not a regular file"),
    "eval_directory_without_checkpoints": (["eval", "ckpt=empty_dir"], 2, "no checkpoints/"),
    "eval_missing_file": (["eval", "ckpt=nothing_here.pt"], 2, "does not exist"),
    "export_fifo_does_not_hang": (["export", "ckpt=fifo.pt"], 2, "not a regular file"),
    "resume_fifo": (["resume=fifo.pt"], 2, "not a regular file"),
    "resume_directory_without_checkpoints": (["resume=empty_dir"], 2, "no checkpoints/"),
    "resume_random_bytes": (["resume=random.pt"], 2, "not a readable rltrain checkpoint"),
    # ---- run folders: a finished or foreign run is never written into --------------------
    "train_into_a_finished_run": ([*TINY, "hydra.run.dir=run"], 2, "holds a finished run"),
    "resume_auto_on_a_finished_run": ([*TINY, "resume=auto", "hydra.run.dir=run"], 2,
                                      "holds a finished run"),
    "resume_a_finished_run_without_more_steps": (["resume=run"], 2, "total_timesteps=<more than"),
    "resume_a_finished_run_with_fewer_steps": (["resume=run", "total_timesteps=256"], 2,
                                               "holds a finished run"),
    "train_into_a_folder_with_run_data": ([*TINY, "hydra.run.dir=half_run"], 2,
                                          "holds a run that ended before its first checkpoint"),
    "train_into_an_unfinished_run": ([*TINY, "hydra.run.dir=evil_id_run"], 2,
                                     "already holds a run; continue it with `rltrain resume="),
}
# cases whose folder (relative to the cwd) must not change at all
UNTOUCHED = {"train_into_a_finished_run": "run", "resume_auto_on_a_finished_run": "run",
             "resume_a_finished_run_without_more_steps": "run",
             "resume_a_finished_run_with_fewer_steps": "run",
             "train_into_a_folder_with_run_data": "half_run",
             "train_into_an_unfinished_run": "evil_id_run",
             "resume_env_id_names_os_system": "evil_id_run",
             "resume_env_imports_module": "evil_imports_run",
             "resume_wrapper_names_module": "evil_wrapper_run",
             "resume_names_a_module_not_recorded": "run"}


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_file_or_folder_is_refused_in_one_line_and_runs_no_code(name, trained, tmp_path,
                                                                    monkeypatch, capfd):
    make_files(trained, tmp_path)
    argv, rc, fragment = CASES[name]
    argv = [a.format(run=tmp_path / "run") for a in argv]
    before = tree(tmp_path)
    result = run_cli(argv, tmp_path, monkeypatch, capfd)
    assert_refused(result, rc, fragment)
    assert not (tmp_path / MARKER).exists(), "code named in a file ran"
    assert EVIL_MODULE not in sys.modules
    if name in UNTOUCHED:
        assert tree(tmp_path / UNTOUCHED[name]) == {p.split("/", 1)[1] for p in before
                                                     if p.startswith(UNTOUCHED[name] + "/")}
    if argv[0] == "eval":
        assert not (tmp_path / "eval").exists() and not (tmp_path / "run" / "eval").exists()


def test_eval_runs_a_checkpoints_user_env_once_the_user_names_its_module(tmp_path, monkeypatch,
                                                                         capfd):
    from rltrain.api import train

    env_id = "tests.envs.my_envs:make_corridor"
    train([*TINY, f"env.id={env_id}"], run_dir=tmp_path / "run")
    refused = run_cli(["eval", "ckpt=run", "episodes=2"], tmp_path, monkeypatch, capfd)
    assert_refused(refused, EXIT_USAGE, "add env.import=tests.envs.my_envs")
    for named in (["env.import=tests.envs.my_envs"], [f"env.id={env_id}"]):
        result = run_cli(["eval", "ckpt=run", "episodes=2", *named], tmp_path, monkeypatch, capfd)
        assert result.rc == 0, result.describe()
        assert "mean return" in result.out


def test_resume_of_a_run_folder_with_spaces_in_its_name_works(trained, tmp_path, monkeypatch,
                                                               capfd):
    folder = tmp_path / "my runs" / "run one"
    shutil.copytree(trained, folder)
    (folder / "checkpoints" / "final.pt").unlink()  # as if stopped before the end
    result = run_cli([f"resume={folder}", "total_timesteps=640"], tmp_path, monkeypatch, capfd)
    assert result.rc == 0, result.describe()
    assert checkpoint.load(folder / "checkpoints" / "final.pt")["counters"]["global_step"] == 640


# ---- env faults: one line naming the env, exit 1, the last good checkpoint kept -----------------
FAULTY = "tests.envs.faulty_envs:make_faulty"
ENV_FAULTS = {  # fault -> fragment of the error line
    "raise_step": "raised RuntimeError in step(): the simulator exploded",
    "raise_reset": "raised RuntimeError",
    "wrong_shape": "observation_space",
    "nan_reward": "non-finite reward",
    "inf_reward": "non-finite reward (inf, row 0); the env is at fault",
    "none_reward": "non-finite reward (nan, row 0: a reward of None reads as nan)",
    "nan_obs": "non-finite observation",
    "inf_obs": "non-finite observation",
}


@pytest.mark.parametrize("fault", sorted(ENV_FAULTS))
def test_env_fault_mid_run_is_one_line_naming_the_env_and_keeps_the_checkpoint(
        fault, tmp_path, monkeypatch, capfd):
    argv = [*TINY, f"env.id={FAULTY}", f"+env.kwargs.fault={fault}", "+env.kwargs.at=150",
            "checkpoint.freq=64", "eval.freq=0", "total_timesteps=2048", "hydra.run.dir=run"]
    result = run_cli(argv, tmp_path, monkeypatch, capfd)
    assert_refused(result, EXIT_TRAINING, ENV_FAULTS[fault])
    # the hint is a command that works: the env's module is named again (checkpoints never
    # import code on their own)
    hint = f"resume with rltrain resume={tmp_path / 'run'} env.import=tests.envs.faulty_envs"
    assert FAULTY in result.err and f"the last good checkpoint is kept: {hint}" in result.err
    payload = checkpoint.load(tmp_path / "run" / "checkpoints" / "latest.pt")
    assert 0 < payload["counters"]["global_step"] < 2048
    if fault == "raise_step":  # it resumes, and the env raises again
        again = run_cli(hint.split()[3:], tmp_path, monkeypatch, capfd)
        assert_refused(again, EXIT_TRAINING, ENV_FAULTS[fault])


@pytest.mark.parametrize("algo", ["ppo", "dqn"])
def test_env_fault_in_a_seed_batch_names_the_seed_the_step_and_the_batch_resume(
        algo, tmp_path, monkeypatch, capfd):
    """With num_seeds=2 the line lost "(at env step N)" and the resume hint; it now has both,
    the hint resumes the whole batch, and the resumed batch meets the fault again."""
    tiny = [a for a in TINY if not a.startswith(("algo.n_steps", "algo.batch_size"))]
    extra = (["algo.learning_starts=32", "algo.train_freq=4", "algo.batch_size=32"]
             if algo == "dqn" else ["algo.n_steps=32", "algo.batch_size=64"])
    argv = [*tiny, f"algo={algo}", *extra, f"env.id={FAULTY}", "+env.kwargs.fault=raise_step",
            "+env.kwargs.at=150", "checkpoint.freq=64", "eval.freq=0", "total_timesteps=2048",
            "num_seeds=2", "hydra.run.dir=run"]
    result = run_cli(argv, tmp_path, monkeypatch, capfd)
    assert_refused(result, EXIT_TRAINING, "[seed 0] env tests.envs.faulty_envs:make_faulty "
                                          "raised RuntimeError in step()")
    hint = f"resume with rltrain resume={tmp_path / 'run'} env.import=tests.envs.faulty_envs"
    assert "(at env step 2" in result.err or "(at env step 3" in result.err, result.err
    assert f"the seeds' last good checkpoints are kept: {hint}" in result.err
    again = run_cli(hint.split()[3:], tmp_path, monkeypatch, capfd)
    assert_refused(again, EXIT_TRAINING, "[seed 0] env tests.envs.faulty_envs:make_faulty")


def test_env_fault_at_the_first_reset_is_one_line(tmp_path, monkeypatch, capfd):
    argv = [*TINY, f"env.id={FAULTY}", "+env.kwargs.fault=nan_obs", "+env.kwargs.at=-1",
            "hydra.run.dir=run"]
    result = run_cli(argv, tmp_path, monkeypatch, capfd)
    assert_refused(result, EXIT_TRAINING, "non-finite observation")


BAD_STATE = ["env.id=tests.envs.state_envs:DequeStateEnv", "env.import=tests.envs.state_envs"]


@pytest.mark.parametrize("where", ["default", "named", "named_inside_existing"])
def test_a_run_that_fails_before_its_first_step_leaves_no_folder(where, tmp_path, monkeypatch,
                                                                  capfd):
    """Hydra creates the run folder before the job builds the env; a start that fails there
    (here: a sim_state() no checkpoint can hold) left outputs/<date>/<time>/ holding only
    .hydra/ and train.log. The folders the command created are gone again; others stay."""
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    folder = {"default": [], "named": ["hydra.run.dir=a/b/run"],
              "named_inside_existing": ["hydra.run.dir=mine/run"]}[where]
    result = run_cli([*TINY, *BAD_STATE, *folder], tmp_path, monkeypatch, capfd)
    assert_refused(result, EXIT_USAGE, "checkpoints cannot hold its state")
    assert tree(tmp_path) == {"mine", "mine/notes.txt"}


def test_a_folder_that_existed_is_never_removed_by_a_failed_start(tmp_path, monkeypatch, capfd):
    (tmp_path / "run").mkdir()
    result = run_cli([*TINY, *BAD_STATE, "hydra.run.dir=run"], tmp_path, monkeypatch, capfd)
    assert_refused(result, EXIT_USAGE, "checkpoints cannot hold its state")
    assert (tmp_path / "run" / "train.log").is_file()  # not this command's folder: left as is


def test_a_lock_taken_as_a_failed_start_removes_the_folder_is_still_taken(tmp_path, monkeypatch):
    """Two commands into one folder: the first fails before its first step and removes the
    folder it created (after releasing its lock) just as the second's `run_lock` made it and
    opens the lock file there. The second makes the folder again, instead of a traceback."""
    from rltrain.run_folder import lock

    run = tmp_path / "a" / "run"
    made = Path.mkdir

    def mkdir_then_removed(self, *args, **kwargs):
        made(self, *args, **kwargs)
        if self == run and not hasattr(mkdir_then_removed, "done"):
            mkdir_then_removed.done = True
            lock.remove_empty([run, run.parent])  # the other command's cleanup, in between

    monkeypatch.setattr(Path, "mkdir", mkdir_then_removed)
    with lock.run_lock(run):
        assert (run / ".lock").is_file()
    assert mkdir_then_removed.done


NO_CUDA = pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA GPU")


@NO_CUDA
def test_resuming_a_gpu_run_on_a_machine_without_one_is_one_line_then_works_on_the_cpu(
        trained, tmp_path, monkeypatch, capfd):
    """The saved config's device was never checked on resume: a run trained with device=cuda,
    resumed where there is no GPU, died in the Runner with "Torch not compiled with CUDA
    enabled" and a Hydra traceback. It is refused before anything runs, naming the fix."""
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    (run / "checkpoints" / "final.pt").unlink()
    latest = run / "checkpoints" / "latest.pt"
    payload = checkpoint.load(latest)
    checkpoint.save({**payload, "config": {**payload["config"], "device": "cuda"}}, latest)
    before = tree(run)
    refused = run_cli([f"resume={run}", "total_timesteps=640"], tmp_path, monkeypatch, capfd)
    assert_refused(refused, EXIT_USAGE, "device=cuda: no CUDA GPU is available")
    assert "use device=cpu" in refused.err and tree(run) == before
    done = run_cli([f"resume={run}", "total_timesteps=640", "device=cpu"], tmp_path,
                   monkeypatch, capfd)
    assert done.rc == 0, done.describe()
    assert checkpoint.load(run / "checkpoints" / "final.pt")["counters"]["global_step"] >= 640


def test_a_dangling_lock_link_is_one_line_not_a_hang(tmp_path):
    """`.lock` a link to a path that cannot exist: the retry for a vanished folder must not
    spin (the folder is there), and the refusal names the file."""
    from rltrain.errors import UserError
    from rltrain.run_folder import lock

    run = tmp_path / "run"
    run.mkdir()
    (run / ".lock").symlink_to(tmp_path / "no_such_dir" / "lockfile")
    with pytest.raises(UserError, match=r"cannot open the lock file .*run/\.lock"):
        with lock.run_lock(run):
            pass


def test_a_run_that_started_keeps_its_folder_and_log_however_it_ends(tmp_path, monkeypatch,
                                                                      capfd):
    """No checkpoint, no metrics (no logger, no CSV) and an env fault at step 20: the folder
    holds only .hydra/ and train.log, as after a failed start, but the log is the run's: kept."""
    argv = [*TINY, "logger.csv=false", f"env.id={FAULTY}", "+env.kwargs.fault=raise_step",
            "+env.kwargs.at=10", "checkpoint.freq=0", "eval.freq=0", "hydra.run.dir=run"]
    result = run_cli(argv, tmp_path, monkeypatch, capfd)
    assert_refused(result, EXIT_TRAINING, "no checkpoint was written yet")
    assert tree(tmp_path / "run") >= {".hydra", "train.log"} and "metrics.csv" not in tree(
        tmp_path / "run")
    assert "training ppo on" in (tmp_path / "run" / "train.log").read_text()


def test_eval_of_an_env_that_returns_inf_rewards_is_one_line(trained, tmp_path, monkeypatch,
                                                             capfd):
    from rltrain.api import train

    train([*TINY, f"env.id={FAULTY}", "+env.kwargs.fault=inf_reward", "+env.kwargs.at=100000"],
          run_dir=tmp_path / "run")
    payload = checkpoint.load(tmp_path / "run" / "checkpoints" / "latest.pt")
    payload["config"]["env"]["kwargs"]["at"] = 0  # the same env, now faulty from the start
    torch.save(payload, tmp_path / "faulty.pt")
    result = run_cli(["eval", "ckpt=faulty.pt", "env.import=tests.envs.faulty_envs"], tmp_path,
                     monkeypatch, capfd)
    assert_refused(result, EXIT_TRAINING, "non-finite reward")


def test_a_live_run_in_another_process_locks_its_folder(tmp_path, monkeypatch, capfd):
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from pathlib import Path; from rltrain.run_folder.lock import run_lock\n"
        "with run_lock(Path(sys.argv[1])):\n    print('locked', flush=True); time.sleep(60)"),
        str(tmp_path / "live")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        result = run_cli([*TINY, "hydra.run.dir=live"], tmp_path, monkeypatch, capfd)
        assert_refused(result, EXIT_USAGE, "is in use by a live run (pid")
        assert tree(tmp_path / "live") == {".lock"}
    finally:
        holder.kill()
        holder.wait()
    # the holder died without releasing: the next run takes the lock over
    result = run_cli([*TINY, "hydra.run.dir=live"], tmp_path, monkeypatch, capfd)
    assert result.rc == 0, result.describe()
    assert not (tmp_path / "live" / ".lock").exists()  # released at the end
