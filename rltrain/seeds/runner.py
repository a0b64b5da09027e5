"""`num_seeds=S`: S complete runs in `<run>/seed_<s>/`, trained together by one batched loop.

Each member is a `Runner` built exactly as the run `seed=<s>` alone would be (its folder, env,
networks, optimizer, loggers, checkpoints), so `rltrain eval`, `export`, `report` and
`resume=<run>/seed_<s>` treat it as the single run it is. The batch adds the shared arithmetic
(`SeedPPO`), one random stream per seed (`SeedStreams`), "[seed s]" in front of each seed's
console lines, and the batch summary: `seeds.json` and the `rltrain report` table, CSV and
curves of the batch folder.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from rltrain.config import TrainConfig
from rltrain.errors import UserError
from rltrain.report.stats import bootstrap_ci, iqm
from rltrain.run_dir import RunDir, seed_overrides
from rltrain.runner.runner import Runner
from rltrain.runner.setup import resolve_device
from rltrain.seeds.batch import SeedBatch, seed_lines
from rltrain.seeds.off_policy import run_off_policy_batch
from rltrain.seeds.on_policy import run_seed_batch
from rltrain.seeds.rng import SeedStreams

log = logging.getLogger("rltrain")


class SeedRunner:
    """Trains seeds `cfg.seed`, ..., `cfg.seed + cfg.num_seeds - 1` as one batch under `run_dir`."""

    def __init__(self, cfg: TrainConfig, run_dir: str | Path,
                 resume_from: dict[int, tuple[TrainConfig, dict[str, Any]]] | None = None):
        """A new batch of `cfg.num_seeds` seeds from `cfg.seed`; or, with `resume_from`
        (seed -> its run's config and checkpoint payload), those seeds where they stopped."""
        self.cfg, self.run_dir = cfg, Path(run_dir).absolute()  # as the Runner's (a chdir mid-run)
        self.overrides: list[str] = []
        """A batch started from Python with an override list: those overrides, which each seed's
        `.hydra/` record repeats (`_record_seeds`), so `rltrain report` tells batches apart."""
        members = resume_from or {
            cfg.seed + k: (dataclasses.replace(cfg, seed=cfg.seed + k, num_seeds=1), None)
            for k in range(cfg.num_seeds)}
        self.seeds = sorted(members)
        streams = SeedStreams(resolve_device(cfg.device))
        self.runners: list[Runner] = []
        for k, seed in enumerate(self.seeds):
            member_cfg, payload = members[seed]
            member_cfg = dataclasses.replace(member_cfg, progress=cfg.progress if k == 0 else "off")
            with seed_lines(seed):
                self.runners.append(Runner(member_cfg, RunDir(self.run_dir).seed(seed).root,
                                           resume_from=payload))
            self.runners[-1].setup_lines = False  # the same for every seed: said once, in run()
            streams.capture()  # the random state seed `seed`'s own run is at, here
        self.batch = SeedBatch(list(self.runners), list(self.seeds), streams,
                               RunDir(self.run_dir).stop_file)

    @classmethod
    def resumed(cls, members: dict[int, tuple[TrainConfig, dict[str, Any]]],
                run_dir: str | Path) -> SeedRunner:
        """The batch in `run_dir` continued: seed -> (its config, its latest checkpoint)."""
        first = members[min(members)][0]
        return cls(dataclasses.replace(first, num_seeds=len(members)), run_dir, members)

    def run(self) -> dict[str, Any]:
        """Train every seed, finish each (final evaluation and checkpoints), summarize."""
        results: dict[int, dict[str, Any]] = {}
        with contextlib.ExitStack() as stack:
            for seed, runner in zip(self.seeds, self.runners, strict=True):
                with seed_lines(seed):
                    stack.enter_context(runner.opened())
            self._record_seeds()  # every seed's folder is its own now (a refused one: no record)
            self.runners[0].say_setup()  # preset or defaults, ...: every seed's
            if self.batch.stop_file.exists():  # left from before this batch: not for it
                self.batch.stop_file.unlink(missing_ok=True)
                log.warning("removed %s, left from before this run started", self.batch.stop_file)
            started = time.perf_counter()
            log.info("training %d seeds (%s) as one batch -> %s/seed_<s>/", len(self.seeds),
                     ", ".join(map(str, self.seeds)), self.run_dir)
            on_policy = self.runners[0].family == "on_policy"
            (run_seed_batch if on_policy else run_off_policy_batch)(self.batch)
            if self.batch.runners:
                self.batch.algo.sync()  # the final evaluation and checkpoints read them
            for k, runner in enumerate(self.batch.runners):
                with self.batch.member(k):
                    results[self.batch.seeds[k]] = result = runner.finish()
                    runner.log_final(result, started)
        for seed, runner in zip(self.seeds, self.runners, strict=True):
            if seed in results:
                with seed_lines(seed):
                    runner.say_done(results[seed])
        return self._summarize(results, time.perf_counter() - started)

    def _record_seeds(self) -> None:
        """A batch started from Python (no `.hydra/` record of its own, which the command line
        copies into each seed's folder) records the batch's config in its folder, so that
        `resume=<batch>` finds its seeds (`seeds/folder.py`), and each seed's config in the
        seed's, so that `rltrain report` groups the seeds as one experiment."""
        root = RunDir(self.run_dir)
        if root.is_hydra_run():
            return
        from rltrain.config import config_to_dict

        root.write_record(config_to_dict(self.cfg), self.overrides)
        for seed, runner in zip(self.seeds, self.runners, strict=True):
            paths = RunDir(runner.run_dir)
            if not paths.is_hydra_run():
                paths.write_record(runner.config_dict, seed_overrides(self.overrides, seed))

    def _summarize(self, results: dict[int, dict[str, Any]], seconds: float) -> dict[str, Any]:
        """`seeds.json`, the console line with the IQM and its 95% bootstrap CI, and the
        `rltrain report` outputs of the batch folder (what a sweeper's trial returns: the IQM)."""
        finals = {s: float(r["mean_reward"]) for s, r in results.items() if "stopped" not in r}
        values = np.array([v for v in finals.values() if math.isfinite(v)])
        center = float(iqm(values)) if len(values) else float("nan")
        low, high = (bootstrap_ci(values) if len(values) else (float("nan"), float("nan")))
        summary = {
            "seeds": self.seeds, "final_eval": {str(s): v for s, v in finals.items()},
            "stopped": {str(s): r["stopped"] for s, r in results.items() if "stopped" in r},
            "failed": {str(s): why for s, why in self.batch.failed.items()},
            "iqm": center, "iqm_ci95": [float(low), float(high)], "wall_clock_s": seconds,
            "mean_reward": center,
        }
        RunDir(self.run_dir).seeds_summary.write_text(json.dumps(summary, indent=2) + "\n")
        log.info("%d seeds in %.1f s: final eval IQM %.2f [95%% CI %.2f, %.2f] (%s)%s",
                 len(self.seeds), seconds, center, low, high,
                 ", ".join(f"seed {s}: {v:.2f}" for s, v in finals.items()),
                 "".join(f"; seed {s} failed: {why}" for s, why in self.batch.failed.items()))
        if finals:
            from rltrain.report.cli import write_report

            try:
                write_report(self.run_dir)
            except UserError as exc:  # e.g. no seed evaluated: the runs themselves are complete
                log.warning("no batch report: %s", exc)
        return summary
