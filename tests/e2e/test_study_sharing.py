"""An Optuna study shared by `rltrain` processes, and stopped by signals, end to end.

One chain of commands on one study, in a module-scoped fixture (each command pays Python +
torch start-up); each test checks one step:
1. a search trains trial 0 for a long time (live);
2. the same search started again meanwhile is refused in one line, and trial 0 stays running;
3. Ctrl-C stops the first: exit 130, its one resume line, no traceback;
4. the search continued: trial 0 (cut short) is marked failed, trial 1 trains; Ctrl-C once
   trial 1's final.pt exists (the stop lands in its wrap-up or the study's bookkeeping);
5. the search continued once more records trial 1 as complete, with its value.
"""

from __future__ import annotations

import signal

import pytest

from tests.e2e.test_interrupt import Command

optuna = pytest.importorskip("hydra_plugins.hydra_optuna_sweeper") and pytest.importorskip("optuna")

NET = ["env=CartPole-v1", "progress=off", "env.num_envs=2", "algo.n_steps=64",
       "algo.batch_size=64", "algo.hidden_sizes=[16,16]"]
LONG = [*NET, "total_timesteps=1e6", "checkpoint.freq=128", "eval.freq=0"]  # never finishes
SHORT = [*NET, "debug=smoke"]  # 512 env steps


def search(folder, n_trials: int, budget: list[str]) -> list[str]:
    return ["+hpo=ppo", *budget, f"hydra.sweeper.n_trials={n_trials}", f"hydra.sweep.dir={folder}"]


def trials(folder) -> list[tuple[str, float | None]]:
    study = optuna.load_study(study_name="ppo_CartPole-v1", storage=f"sqlite:///{folder}/optuna.db")
    return [(t.state.name, t.value) for t in study.get_trials()]


@pytest.fixture(scope="module")
def chain(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("study")
    folder, out = tmp / "hpo", {"folder": tmp / "hpo"}
    first = Command(search(folder, 2, LONG), tmp / "first", tmp)
    try:
        first.wait_for(lambda: (folder / "0" / "checkpoints" / "latest.pt").exists())
        out["second"] = Command(search(folder, 2, SHORT), tmp / "second", tmp).finish()
        out["while_live"] = trials(folder)
        first.proc.send_signal(signal.SIGINT)
        out["first"] = first.finish()
    finally:
        first.kill()
    out["after_first"] = trials(folder)
    third = Command(search(folder, 2, SHORT), tmp / "third", tmp)
    try:
        third.wait_for(lambda: (folder / "1" / "checkpoints" / "final.pt").exists(), timeout=300)
        third.proc.send_signal(signal.SIGINT)
        out["third"] = third.finish()
    finally:
        third.kill()
    out["fourth"] = Command(search(folder, 1, SHORT), tmp / "fourth", tmp).finish()
    out["after_fourth"] = trials(folder)
    return out


def describe(res: dict) -> str:
    return f"rc={res['rc']}\n--- stdout\n{res['out'][-2000:]}\n--- stderr\n{res['err'][-2000:]}"


def test_a_second_search_of_a_live_study_is_refused_in_one_line(chain):
    res, folder = chain["second"], chain["folder"]
    assert res["rc"] == 2, describe(res)
    lines = res["err"].strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"rltrain: error: study ppo_CartPole-v1 in {folder} is in use by a live search (pid "), lines
    assert chain["while_live"] == [("RUNNING", None)]  # the live trial was not failed


def test_ctrl_c_stops_the_live_search_with_one_resume_line(chain):
    res = chain["first"]
    assert res["rc"] == 130, describe(res)
    text = res["out"] + res["err"]
    assert "Traceback" not in text
    # the trial's run does not say how to resume it alone: that would not continue the search
    assert "Resume with: " not in text, describe(res)
    assert text.count("Continue it with: rltrain +hpo=ppo ") == 1, describe(res)
    assert chain["after_first"] == [("RUNNING", None)]  # settled by the next search


def test_ctrl_c_after_a_trials_final_checkpoint_keeps_the_trial_complete(chain):
    res, folder = chain["third"], chain["folder"]
    assert res["rc"] == 130, describe(res)
    text = res["out"] + res["err"]
    assert "Traceback" not in text and "trial 0 was cut short: marked failed" in text
    assert text.count("Continue it with: rltrain +hpo=ppo ") == 1, describe(res)
    res = chain["fourth"]
    assert res["rc"] == 0, describe(res)
    assert "1 of 1 trials completed, 0 to go" in res["out"] + res["err"], describe(res)
    from rltrain.checkpoint import format as checkpoint

    value = checkpoint.load(folder / "1" / "checkpoints" / "final.pt")["metrics"]["mean_reward"]
    states = chain["after_fourth"]
    assert states[:2] == [("FAIL", None), ("COMPLETE", value)]
    # a trial asked when the stop came (never started: no folder of a run) is the only other
    assert all(s == ("FAIL", None) and not (folder / str(n) / "checkpoints").exists()
               for n, s in enumerate(states[2:], start=2))
