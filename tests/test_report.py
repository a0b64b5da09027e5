"""`rltrain report`: finding runs, grouping by overrides minus the seed, statistics, CSV, PNGs.

Run folders are written by hand here (a `.hydra/` record and a long-format `metrics.csv`), so
every number in the report is known in advance; the sweep tests run the real thing.
"""

from __future__ import annotations

import csv
import os
import struct
from pathlib import Path

import numpy as np
import pytest
import yaml

from rltrain.errors import UserError
from rltrain.report.cli import report_main, write_report
from rltrain.report.plot import distinct_labels, write_run_curve
from rltrain.report.runs import find_runs, load_run, read_tensorboard
from rltrain.report.stats import bootstrap_ci, common_grid, iqm, mean_curve


def make_run(folder: Path, overrides: list[str], finals: list[float], steps=(100, 200, 300),
             seed: int | None = None, t0: float = 1000.0) -> Path:
    """A run folder whose evals at `steps` return `finals` (one per step)."""
    (folder / ".hydra").mkdir(parents=True)
    (folder / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
    (folder / ".hydra" / "config.yaml").write_text(yaml.safe_dump({"seed": seed}))
    os.utime(folder / ".hydra" / "config.yaml", (t0 - 5, t0 - 5))  # the run started 5 s earlier
    rows = [["step", "time", "name", "value"]]
    for i, (step, value) in enumerate(zip(steps, finals, strict=True)):
        rows.append([step, t0 + 10 * i, "train/policy_loss", 0.1])
        rows.append([step, t0 + 10 * i + 1, "eval/mean_reward", value])
        rows.append([step, t0 + 10 * i + 1, "eval/std_reward", 1.0])
    with open(folder / "metrics.csv", "w", newline="") as f:
        csv.writer(f).writerows(rows)
    return folder


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) from a PNG header; fails unless the file is a PNG."""
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", head[16:24])


@pytest.fixture
def sweep(tmp_path: Path) -> Path:
    """Two groups (lr=1e-3: three seeds, lr=3e-4: two seeds) plus one run with no eval yet."""
    root = tmp_path / "sweep"
    for i, (seed, final) in enumerate([(0, 100.0), (1, 200.0), (2, 600.0)]):
        make_run(root / str(i), ["algo=ppo", "algo.lr=1e-3", f"seed={seed}"],
                 [10.0, 50.0, final], seed=seed)
    for i, seed in enumerate([0, 1], start=3):
        make_run(root / str(i), ["algo=ppo", f"seed={seed}", "algo.lr=3e-4"], [5.0, 7.0, 9.0 + seed],
                 seed=seed)
    (root / "5").mkdir()
    (root / "5" / "metrics.csv").write_text("step,time,name,value\n64,1.0,train/policy_loss,0.1\n")
    return root


def test_iqm_is_the_mean_of_the_middle_half():
    assert iqm(np.array([0.0, 1.0, 2.0, 100.0])) == pytest.approx(1.5)  # drops 0 and 100
    assert iqm(np.array([1.0, 2.0, 3.0])) == pytest.approx(2.0)  # too few to trim: the mean
    assert iqm(np.arange(8.0)) == pytest.approx(3.5)


def test_bootstrap_ci_brackets_the_statistic_and_is_reproducible():
    x = np.array([1.0, 2.0, 3.0, 4.0, 50.0])
    lo, hi = bootstrap_ci(x)
    assert lo <= iqm(x) <= hi and lo < hi
    assert (lo, hi) == bootstrap_ci(x)  # fixed seed
    assert bootstrap_ci(np.array([7.0])) == (7.0, 7.0)


def test_mean_curve_interpolates_onto_the_common_steps():
    a = (np.array([0, 100, 200]), np.array([0.0, 10.0, 20.0]))
    b = (np.array([50, 150, 250]), np.array([5.0, 15.0, 25.0]))
    assert list(common_grid([a, b])) == [50, 100, 150, 200]
    steps, mean, lo, hi = mean_curve([a, b])
    assert np.allclose(mean, [5.0, 10.0, 15.0, 20.0])  # both lines are y = x / 10
    assert np.all(lo <= mean) and np.all(mean <= hi)


def test_runs_are_found_and_grouped_by_overrides_minus_the_seed(sweep):
    runs = [load_run(p) for p in find_runs(sweep)]
    assert len(runs) == 6
    groups = {r.group for r in runs if len(r.eval_curve[0])}
    assert groups == {"algo.lr=1e-3 algo=ppo", "algo.lr=3e-4 algo=ppo"}
    run0 = load_run(sweep / "0")
    assert run0.final == 100.0 and run0.env_steps == 300 and run0.seed == 0
    assert run0.wall_clock == pytest.approx(26.0)  # from the .hydra record to the last log


def test_report_writes_a_csv_row_per_group_and_a_real_png(sweep, capsys):
    groups = write_report(sweep)
    out = capsys.readouterr().out
    assert "IQM [95% CI]" in out and "algo.lr=1e-3 algo=ppo" in out
    assert "skipped 1 run(s) without an evaluation yet" in out
    with open(sweep / "report.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["group"] for r in rows] == ["algo.lr=1e-3 algo=ppo", "algo.lr=3e-4 algo=ppo"]
    first = rows[0]
    assert int(first["runs"]) == 3 and first["seeds"] == "0;1;2"
    assert float(first["final_mean"]) == pytest.approx(300.0)
    assert float(first["final_std"]) == pytest.approx(np.std([100, 200, 600], ddof=1))
    assert float(first["iqm"]) == pytest.approx(300.0)  # 3 runs: nothing to trim
    assert float(first["iqm_ci_low"]) <= 300.0 <= float(first["iqm_ci_high"])
    assert float(first["best"]) == 600.0 and int(first["env_steps"]) == 300
    assert first["run_dirs"] == "0;1;2"
    assert float(rows[1]["final_mean"]) == pytest.approx(9.5)
    assert len(groups) == 2
    png = sweep / "learning_curves.png"
    width, height = png_size(png)
    assert width >= 400 and height >= 300 and png.stat().st_size > 10_000


def test_report_cli_takes_an_output_folder(sweep, tmp_path, capsys):
    report_main([str(sweep), "--out", str(tmp_path / "out")])
    assert (tmp_path / "out" / "report.csv").is_file()
    assert (tmp_path / "out" / "learning_curves.png").is_file()
    assert not (sweep / "report.csv").exists()


def test_report_of_a_missing_or_empty_folder_is_one_user_error(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        write_report(tmp_path / "nope")
    with pytest.raises(UserError, match="no runs below"):
        write_report(tmp_path)


def test_a_resumed_run_is_grouped_by_what_it_trained_with(tmp_path):
    """Resumed with `total_timesteps=6000`, a run of `total_timesteps=4096` was labelled 4096
    beside its 6,000 env steps: the latest resume's overrides replace the same keys."""
    run = make_run(tmp_path / "run", ["algo=ppo", "total_timesteps=4096", "seed=1"], [1.0, 2.0, 3.0])
    (run / ".hydra" / "resume").mkdir()
    (run / ".hydra" / "resume" / "overrides.yaml").write_text(
        yaml.safe_dump([f"resume={run}", "total_timesteps=6000"]))
    assert load_run(run).group == "algo=ppo total_timesteps=6000"


def _resume_record(folder: Path, overrides: list[str], when: float) -> None:
    record = folder / ".hydra" / "resume" / "overrides.yaml"
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(yaml.safe_dump(overrides))
    os.utime(record, (when, when))


def test_the_seeds_of_a_resumed_batch_are_grouped_by_the_resumes_budget(tmp_path, capsys):
    """`resume=<batch> total_timesteps=256` records its overrides in the batch's folder, not
    in each `seed_<s>/`: the report kept the batch's old `total_timesteps=128` label."""
    batch = tmp_path / "batch"
    (batch / ".hydra").mkdir(parents=True)
    (batch / ".hydra" / "config.yaml").write_text(yaml.safe_dump({"seed": 0, "num_seeds": 2}))
    for seed in (0, 1):
        make_run(batch / f"seed_{seed}", ["algo=ppo", "total_timesteps=128", f"seed={seed}"],
                 [1.0, 2.0, 3.0], seed=seed)
    _resume_record(batch, [f"resume={batch}", "total_timesteps=256"], when=2000.0)
    _resume_record(batch / "seed_1", ["resume=x", "total_timesteps=200"], when=1500.0)  # older
    assert [load_run(batch / f"seed_{s}").group for s in (0, 1)] == \
        ["algo=ppo total_timesteps=256"] * 2
    write_report(batch)
    with open(batch / "report.csv", newline="") as f:
        assert [row["group"] for row in csv.DictReader(f)] == ["algo=ppo total_timesteps=256"]


def test_a_run_without_hydra_record_is_its_own_group(tmp_path):
    run = make_run(tmp_path / "api_run", [], [1.0, 2.0, 3.0])
    (run / ".hydra" / "overrides.yaml").unlink()
    (run / ".hydra" / "config.yaml").unlink()
    (run / ".hydra").rmdir()
    assert load_run(run).group == "(api_run)"


def test_tensorboard_events_are_read_when_there_is_no_csv(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(tmp_path / "run" / "tb"))
    for step, value in [(100, 1.0), (200, 4.0)]:
        writer.add_scalar("eval/mean_reward", value, step)
    writer.close()
    assert find_runs(tmp_path) == [tmp_path / "run"]
    steps, values = read_tensorboard(tmp_path / "run" / "tb").get("eval/mean_reward")
    assert list(steps) == [100, 200] and list(values) == [1.0, 4.0]
    assert load_run(tmp_path / "run").final == 4.0


def test_each_run_gets_its_own_learning_curve_png(tmp_path):
    run = make_run(tmp_path / "run", ["algo=ppo"], [1.0, 2.0, 3.0])
    path = write_run_curve(run)
    assert path == run / "learning_curve.png"
    assert png_size(path)[0] >= 400 and path.stat().st_size > 10_000


def test_writing_a_run_curve_never_raises(tmp_path, caplog):
    (tmp_path / "garbage").mkdir()
    (tmp_path / "garbage" / "metrics.csv").write_bytes(b"\x00\xff not a csv")
    assert write_run_curve(tmp_path / "garbage") is None
    assert write_run_curve(tmp_path / "missing") is None  # no logs at all: nothing to plot


def test_legend_labels_drop_the_overrides_every_group_shares():
    assert distinct_labels(["a=1 env=X", "a=2 env=X"]) == ["a=1", "a=2"]
    assert distinct_labels(["env=X"]) == ["env=X"]


# ---- unreadable run files: a warning line naming the file, never a traceback ----------------

@pytest.mark.parametrize(("name", "content", "fragment"), [
    ("overrides.yaml", "- algo=ppo\n- [unclosed\n", "not readable YAML"),
    ("config.yaml", "seed: 0\n  bad: indent: here\n", "not readable YAML"),
    ("overrides.yaml", "algo: ppo\n", "expected a YAML list, found a dict"),
    ("config.yaml", "- 1\n", "expected a YAML mapping, found a list"),
])
def test_run_with_malformed_hydra_yaml_is_skipped_with_one_warning(sweep, capsys, name, content,
                                                                   fragment):
    bad = sweep / "1" / ".hydra" / name
    bad.write_text(content)
    groups = write_report(sweep)
    assert sum(len(g.runs) for g in groups) == 4  # the other four evaluated runs
    out = capsys.readouterr().out
    warnings = [line for line in out.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and str(bad) in warnings[0] and fragment in warnings[0], out


def test_metrics_csv_with_unexpected_columns_is_skipped_with_one_warning(sweep, capsys):
    (sweep / "0" / "metrics.csv").write_text("epoch,loss\n1,0.5\n")
    groups = write_report(sweep)
    assert sum(len(g.runs) for g in groups) == 4
    out = capsys.readouterr().out
    assert f"skipped run {sweep / '0'}: {sweep / '0' / 'metrics.csv'}: unexpected columns" in out
    with pytest.raises(UserError, match="unexpected columns 'epoch,loss'"):
        load_run(sweep / "0")


def test_garbage_lines_in_metrics_csv_are_skipped_and_counted(tmp_path, capsys):
    run = make_run(tmp_path / "run", ["algo=ppo"], [1.0, 2.0, 3.0])
    with open(run / "metrics.csv", "ab") as f:  # garbage, a NUL, bad bytes, a torn last line
        f.write(b"not,a,row\n\x00\x00\n\xff\xfe,1,eval/mean_reward,9\n400,1.0,eval/mean_rew")
    loaded = load_run(run)
    assert list(loaded.eval_curve[1]) == [1.0, 2.0, 3.0] and loaded.scalars.dropped == 4
    write_report(tmp_path)
    out = capsys.readouterr().out
    assert f"warning: {run / 'metrics.csv'}: skipped 4 malformed line(s)" in out


def test_report_where_no_run_can_be_read_is_one_user_error(tmp_path):
    run = make_run(tmp_path / "run", ["algo=ppo"], [1.0, 2.0, 3.0])
    (run / ".hydra" / "overrides.yaml").write_bytes(b"\xff\xfe: [")
    with pytest.raises(UserError, match=r"none of the 1 run\(s\) below .* could be read"):
        write_report(tmp_path)


def _append_rows(folder: Path, rows: list[list]) -> None:
    with open(folder / "metrics.csv", "a", newline="") as f:
        csv.writer(f).writerows(rows)


def test_wall_clock_sums_each_completed_process_and_skips_the_idle_time_between(tmp_path):
    """A resumed run counted the hours between its processes; a copied folder (its `.hydra/`
    record newer than its logs) showed 0.0 s."""
    done = make_run(tmp_path / "done", ["algo=ppo"], [1.0, 2.0, 3.0])
    _append_rows(done, [[300, 1021.0, "final/wall_clock_s", 25.0],
                        [600, 9000.0, "final/wall_clock_s", 30.0]])  # resumed hours later
    assert load_run(done).wall_clock == 55.0
    copied = make_run(tmp_path / "copied", ["algo=ppo"], [1.0, 2.0, 3.0])
    os.utime(copied / ".hydra" / "config.yaml", (5000.0, 5000.0))  # `cp -r`: a new mtime
    assert load_run(copied).wall_clock == 21.0  # first log 1000 to last 1021
    assert load_run(make_run(tmp_path / "live", ["algo=ppo"], [1.0, 2.0, 3.0])).wall_clock == 26.0


def test_a_group_of_one_run_shows_no_spread(tmp_path, capsys):
    make_run(tmp_path / "sweep" / "a", ["algo=ppo", "seed=0"], [1.0, 2.0, 3.0], seed=0)
    make_run(tmp_path / "sweep" / "b", ["algo=a2c", "seed=0"], [1.0, 2.0, 5.0], seed=0)
    make_run(tmp_path / "sweep" / "c", ["algo=a2c", "seed=1"], [1.0, 2.0, 7.0], seed=1)
    report_main([str(tmp_path / "sweep")])
    out = capsys.readouterr().out
    assert "6.00 ± 1.41" in out and "3.00 ±" not in out
    with open(tmp_path / "sweep" / "report.csv") as f:
        rows = {r["group"]: r for r in csv.DictReader(f)}
    assert rows["algo=ppo"]["final_std"] == "" and float(rows["algo=a2c"]["final_std"]) > 1.4


def test_wall_clock_counts_a_process_that_stopped_before_completing(tmp_path):
    """A resume stopped by Ctrl-C logs no `final/wall_clock_s`: its time was left out (0.4 s
    for a run that trained 6 s more)."""
    from rltrain.report.runs import training_seconds

    run = make_run(tmp_path / "run", ["algo=ppo"], [1.0, 2.0, 3.0])  # logs at 1000 .. 1021
    _append_rows(run, [[300, 1021.0, "final/wall_clock_s", 26.0],
                       [400, 5000.0, "train/policy_loss", 0.1],   # resumed an hour later,
                       [500, 5006.0, "eval/mean_reward", 4.0]])   # stopped after 6 s
    assert load_run(run).wall_clock == 32.0
    times = np.array([10.0, 20.0, 100.0, 130.0, 131.0])  # stopped at 20; resumed, completed
    assert training_seconds(times, [(131.0, 31.0)], start=5.0) == 15.0 + 31.0
    assert training_seconds(times, [], start=5.0) == 126.0  # no completed process: one span
