"""`num_seeds=S`: S complete runs in `<run>/seed_<s>/`, trained together by one batched loop.

Each member is a `Runner` built exactly as the run `seed=<s>` alone would be (its folder, env,
networks, optimizer, loggers, checkpoints), so `rltrain eval`, `export`, `report` and
`resume=<run>/seed_<s>` treat it as the single run it is. The batch adds the shared arithmetic
(the algorithm's `stack`: `PPO.stack`, ...), one random stream per seed (`SeedStreams`),
"[seed s]" in front of each seed's console lines, and the batch summary: `seeds.json` and the
`rltrain report` table, CSV and curves of the batch folder.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from rltrain.checkpoint.run_dir import RunDir, seed_overrides
from rltrain.config.schema import TrainConfig, config_to_dict
from rltrain.envs.make import shared_rows
from rltrain.envs.trust import resume_command
from rltrain.errors import UserError
from rltrain.report.cli import write_report
from rltrain.report.stats import bootstrap_ci, iqm
from rltrain.run_folder.batch_state import read_batch
from rltrain.run_folder.lock import check_target, run_lock
from rltrain.runner.callbacks import LoopState
from rltrain.runner.interrupt import GracefulStop, disk_full_is_one_line
from rltrain.runner.off_policy import run_off_policy
from rltrain.runner.on_policy import run_on_policy
from rltrain.runner.restore import say_resumed
from rltrain.runner.runner import Runner
from rltrain.runner.setup import resolve_device, set_once
from rltrain.seed_batch.batch import SeedBatch, seed_lines
from rltrain.seed_batch.resume import catch_up
from rltrain.seed_batch.rng import SeedStreams

log = logging.getLogger("rltrain")


class SeedRunner:
    """Trains seeds `cfg.seed`, ..., `cfg.seed + cfg.num_seeds - 1` as one batch under `run_dir`.

    A batch is one run: one stop for all its seeds (a signal, `<batch>/STOP` or a seed's
    `STOP`), at any phase, saves every seed and says one `resume=<batch>` line; a full disk is
    one line; `seeds.json` is written however the batch ends."""

    def __init__(self, cfg: TrainConfig, run_dir: str | Path,
                 resume_from: dict[int, tuple[TrainConfig, dict[str, Any] | None]] | None = None,
                 complete: dict[int, dict[str, Any]] | None = None,
                 failed: dict[int, str] | None = None, *, overrides: list[str] | None = None,
                 stop_line: bool = True):
        """A new batch of `cfg.num_seeds` seeds from `cfg.seed`; or, with `resume_from`
        (seed -> its run's config and checkpoint payload, None to start it), those seeds where
        they stopped: the ones behind the furthest catch up alone first (`catch_up`).
        `complete` (seed -> final result) and `failed` (seed -> why) are the batch's other
        seeds: counted in its summary, not trained."""
        self.cfg, self.run_dir = cfg, Path(run_dir).absolute()  # as the Runner's (a chdir mid-run)
        self.overrides = list(overrides or [])
        """A batch started from Python with an override list: those overrides, which each seed's
        `.hydra/` record repeats (`_record_seeds`), so `rltrain report` tells batches apart."""
        members = resume_from or {
            cfg.seed + k: (dataclasses.replace(cfg, seed=cfg.seed + k, num_seeds=1), None)
            for k in range(cfg.num_seeds)}
        self.complete, self.failed = dict(complete or {}), dict(failed or {})
        self.resumed = resume_from is not None
        self.stop_line = stop_line
        """Whether a stop says how to resume the batch (a search's trial: the search says)."""
        self.stopper = GracefulStop(LoopState(total_timesteps=cfg.total_timesteps), self.run_dir)
        """The batch's own stop: signals from the first catch-up to the last summary line."""
        self.runners: list[Runner] = []
        # signals heard from here on
        with self.stopper, disk_full_is_one_line(self.run_dir, self.cfg.env):
            members = catch_up(members, self.run_dir, self.stopper, self.failed)
            self.seeds = sorted(members)
            self._build(members)
        GracefulStop.join([self.stopper, *(r.stopper for r in self.runners)])
        whole = self.runners and len(self.runners) == len(self.seeds)
        self.batch = SeedBatch(list(self.runners), list(self.seeds), self.streams,
                               RunDir(self.run_dir).stop_file, self.shared) if whole else None

    def _build(self, members: dict[int, tuple[TrainConfig, dict[str, Any] | None]]) -> None:
        """Each seed's Runner, as its single run builds it, and its random stream. A signal
        meanwhile (a batch of many seeds takes a while) ends the command before anything
        trained: exit 128 + signal, nothing to resume."""
        device = resolve_device(self.cfg.device)
        streams = SeedStreams(device)
        self.shared = shared_rows(self.cfg.env, self.seeds, device)  # None: envs of their own
        for k, seed in enumerate(self.seeds):
            if self.stopper.heard is not None:  # a stop while setting up: no more to build
                if any(p is not None for _, p in members.values()):
                    break  # a resume: the batch is where it was, `run()` says how to resume it
                log.warning("%s received while the batch was set up (%d of %d seeds built): "
                            "nothing was trained; run the command again to start it",
                            signal.Signals(self.stopper.heard).name, k, len(self.seeds))
                raise SystemExit(128 + self.stopper.heard)
            member_cfg, payload = members[seed]
            member_cfg = dataclasses.replace(member_cfg,
                                             progress=self.cfg.progress if k == 0 else "off")
            with seed_lines(seed):  # resume and setup lines: said once for the batch (below,
                # in run()); a stop's line too, `resume=<batch>`; no evaluator process per seed
                self.runners.append(Runner(
                    member_cfg, RunDir(self.run_dir).seed(seed).root, resume_from=payload,
                    rows=None if self.shared is None else self.shared.view(k),
                    resume_line=False, setup_lines=False, stop_line=False,
                    resume_target=self.run_dir, background_eval=False))
            streams.capture()  # the random state seed `seed`'s own run is at, here
        self.streams = streams
        restored = {r.cfg.seed: r.restored for r in self.runners if r.restored is not None}
        if restored:
            say_resumed(self.cfg.env.id, restored, batch=True)

    def __setattr__(self, name: str, value: Any) -> None:
        """Any attribute, but the constructor's `overrides` and `stop_line` only once."""
        set_once(self, name, value, ("overrides", "stop_line"))

    @classmethod
    def resumed(cls, folder: Path, run_dir: Path,
                config_of: Callable[[dict[str, Any]], TrainConfig], *,
                stop_line: bool = True) -> SeedRunner:
        """The batch in `folder` continued into `run_dir`, every seed from where it is
        (`run_folder/batch_state.py` reads it, `seed_batch/resume.py` catches up the seeds behind;
        `config_of(saved config dict)`: the config a seed's resume trains with, its overrides
        checked; `stop_line` as `SeedRunner`'s)."""
        state = read_batch(folder, config_of)
        log.info("resuming the batch in %s: seeds %s", folder, ", ".join(map(str, state.members)))
        first = next(iter(state.members.values()))[0]
        count = len(state.members) + len(state.complete) + len(state.failed)
        return cls(dataclasses.replace(first, num_seeds=count), run_dir, state.members,
                   state.complete, state.failed, stop_line=stop_line)

    @property
    def all_seeds(self) -> list[int]:
        """Every seed of the batch: training, complete before this process, failed."""
        return sorted({*self.seeds, *self.complete, *self.failed})

    def run(self) -> dict[str, Any]:
        """Train every seed, finish each (final evaluation and checkpoints), summarize; a stop
        at any point saves every seed where it is and says one resume line."""
        try:
            return self._run()
        finally:
            self.close()

    def _run(self) -> dict[str, Any]:
        results: dict[int, dict[str, Any]] = dict(self.complete)
        started = time.perf_counter()
        with run_lock(self.run_dir), self.stopper:  # one live run in the batch's folder
            if not self.resumed:  # (the command line checked it already; train() did not)
                check_target(self.run_dir, "auto" if self.cfg.resume == "auto" else None,
                             self.cfg.total_timesteps)
            try:
                with disk_full_is_one_line(self.run_dir, self.cfg.env):
                    if self.stopper.heard is None and self.batch:  # (a stop while setting up)
                        self._train(results, started)
            except BaseException:  # a full disk, a second Ctrl-C: the record of every seed,
                if any(r.started for r in self.runners):  # (if it fits; a refused start: none)
                    self._summarize(results, time.perf_counter() - started, quiet=True)
                raise
            with disk_full_is_one_line(self.run_dir, self.cfg.env):
                summary = self._summarize(results, time.perf_counter() - started)
        self.stopper.stop_file.unlink(missing_ok=True)  # consumed, as a single run's is
        self._say_end(summary)
        return summary

    def close(self) -> None:
        """Close the engine the seeds stepped together (each seed closes its own envs)."""
        if getattr(self, "shared", None) is not None:
            self.shared.close()
            self.shared = None

    def _train(self, results: dict[int, dict[str, Any]], started: float) -> None:
        """The batched loop, then each seed's final evaluation and checkpoints."""
        assert self.batch is not None
        with contextlib.ExitStack() as stack:
            for seed, runner in zip(self.seeds, self.runners, strict=True):
                with seed_lines(seed):
                    stack.enter_context(runner.opened())
            self._record_seeds()  # every seed's folder is its own now (a refused one: no record)
            self.runners[0].say_setup()  # preset or defaults, ...: every seed's
            if self.batch.stop_file.exists():  # left from before this batch: not for it
                self.batch.stop_file.unlink(missing_ok=True)
                log.warning("removed %s, left from before this run started", self.batch.stop_file)
            log.info("training %d seeds (%s) as one batch -> %s/seed_<s>/", len(self.seeds),
                     ", ".join(map(str, self.seeds)), self.run_dir)
            on_policy = self.runners[0].family == "on_policy"
            (run_on_policy if on_policy else run_off_policy)(self.batch)
            for k, runner in enumerate(self.batch.runners):
                self.stopper.requested()  # a STOP file since the last look stops the rest too
                with self.batch.member(k):
                    results[self.batch.seeds[k]] = result = runner.finish()
                    runner.log_final(result, started)
        for seed, runner in zip(self.seeds, self.runners, strict=True):
            if seed in results:
                with seed_lines(seed):
                    runner.say_done(results[seed])

    def _say_end(self, summary: dict[str, Any]) -> None:
        """After a stop: one line naming the batch and the command that resumes every seed."""
        if not summary["stopped"]:
            if self.stopper.heard is not None:  # it landed after the last seed's final write
                log.warning("%s received while writing the batch's summary; the batch is "
                            "complete", signal.Signals(self.stopper.heard).name)
                self.stopper.signum = None
                for runner in self.runners:
                    runner.stopper.signum = None
            return
        if not self.stop_line:
            return
        reason = next(iter(summary["stopped"].values()))
        steps = sorted({r.state.global_step for r in self.runners
                        if str(r.cfg.seed) in summary["stopped"]})
        log.warning("stopped (%s) at step %s; every seed's checkpoint saved. Resume with: %s",
                    reason, " / ".join(f"{s:,}" for s in steps) or "0",
                    resume_command(self.run_dir, self.cfg.env))

    @property
    def signum(self) -> int | None:
        """The signal that stopped the batch (the exit code: 128 + it); None otherwise."""
        return self.stopper.heard

    def _record_seeds(self) -> None:
        """A batch started from Python (no `.hydra/` record of its own, which the command line
        copies into each seed's folder) records the batch's config in its folder, so that
        `resume=<batch>` finds its seeds (`run_folder/batch.py`), and each seed's config in the
        seed's, so that `rltrain report` groups the seeds as one experiment."""
        root = RunDir(self.run_dir)
        if root.is_hydra_run():
            return

        root.write_record(config_to_dict(self.cfg), self.overrides)
        for seed, runner in zip(self.seeds, self.runners, strict=True):
            paths = RunDir(runner.run_dir)
            if not paths.is_hydra_run():
                paths.write_record(runner.config_dict, seed_overrides(self.overrides, seed))

    def _summarize(self, results: dict[int, dict[str, Any]], seconds: float,
                   quiet: bool = False) -> dict[str, Any]:
        """`seeds.json` (strict JSON: a missing number is null; `score` what a sweep's trial
        returns, `score_of` "iqm"; `mean_reward` repeats it, as older readers expect), the console line with the IQM
        and its 95% bootstrap CI, and the `rltrain report` outputs of the batch folder (what a
        sweeper's trial returns: the IQM). Every seed of the batch is in it: complete (its
        final eval), stopped (why) or failed (why). `quiet`: the batch is failing already (a
        full disk): `seeds.json` if it can be written, nothing said."""
        failed = {**self.failed, **(self.batch.failed if self.batch else {})}
        finals = {s: float(r["mean_reward"]) for s, r in sorted(results.items())
                  if "stopped" not in r}
        stop = self.stopper.state.stop_reason or "not finished"
        stopped = {str(s): str(results.get(s, {}).get("stopped", stop)) for s in self.all_seeds
                   if s not in finals and s not in failed}
        values = np.array([v for v in finals.values() if math.isfinite(v)])
        center = float(iqm(values)) if len(values) else float("nan")
        low, high = (bootstrap_ci(values) if len(values) else (float("nan"), float("nan")))
        summary = {
            "seeds": self.all_seeds, "final_eval": {str(s): v for s, v in finals.items()},
            "stopped": stopped, "failed": {str(s): why for s, why in sorted(failed.items())},
            "iqm": center, "iqm_ci95": [float(low), float(high)], "wall_clock_s": seconds,
            "mean_reward": center, "score": center, "score_of": "iqm",
        }
        try:
            RunDir(self.run_dir).seeds_summary.write_text(strict_json(summary))
        except OSError:
            if quiet:  # the batch says why it failed, in one line
                return summary
            raise
        if stopped or quiet:
            return summary
        log.info("%d seeds in %.1f s: final eval IQM %.2f [95%% CI %.2f, %.2f] (%s)%s",
                 len(self.all_seeds), seconds, center, low, high,
                 ", ".join(f"seed {s}: {v:.2f}" for s, v in finals.items()),
                 "".join(f"; seed {s} failed: {why}" for s, why in failed.items()))
        if finals:
            try:
                write_report(self.run_dir)
            except UserError as exc:  # e.g. no seed evaluated: the runs themselves are complete
                log.warning("no batch report: %s", exc)
        return summary


def strict_json(data: Any) -> str:
    """`data` as strict JSON text (NaN and infinities, which `json` writes bare, as null)."""
    def clean(x: Any) -> Any:
        if isinstance(x, float) and not math.isfinite(x):
            return None
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [clean(v) for v in x]
        return x

    return json.dumps(clean(data), indent=2, allow_nan=False) + "\n"
