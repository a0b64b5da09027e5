"""The seeds of a batch still training: their Runners, random streams and batched algorithm,
and what each seed does on its own between updates (log, evaluate, checkpoint, fail alone)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from rltrain.config.catalog import ALGORITHMS
from rltrain.envs.rows import SharedRows
from rltrain.envs.trust import resume_command
from rltrain.errors import EnvError, TrainingError
from rltrain.nets.seeded import NotStackable
from rltrain.runner.context import LoopContext
from rltrain.runner.members import OffPolicyMembers, OnPolicyMembers
from rltrain.runner.runner import Runner
from rltrain.runner.setup import compile_update
from rltrain.seed_batch.rng import SeedStreams
from rltrain.seed_batch.stacked_calls import stacked_calls
from rltrain.seed_batch.view import SeedView
from rltrain.types import StepResult

log = logging.getLogger("rltrain")


class _SeedPrefix(logging.Filter):
    """Puts "[seed s] " in front of every rltrain console line logged meanwhile."""

    def __init__(self, seed: int):
        super().__init__()
        self.prefix = f"[seed {seed}] "

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = self.prefix + str(record.msg)
        return True


@contextlib.contextmanager
def seed_lines(seed: int) -> Iterator[None]:
    """Console lines logged meanwhile say which seed they are about."""
    prefix = _SeedPrefix(seed)
    log.addFilter(prefix)
    try:
        yield
    finally:
        log.removeFilter(prefix)


def batched(runners: list[Runner], streams: SeedStreams, quiet: bool = False) -> Any:
    """The algorithm for the batch, over the runners' own algorithm objects: its module's
    `stack` (`catalog.AlgoEntry.stack`), or, for an algorithm without one or networks that
    cannot be stacked, each seed's own member in turn (`runner/members.py`, said on the console
    unless `quiet`): every algorithm runs as a batch."""
    name, members = runners[0].cfg.algo.name, [r.algo for r in runners]
    entry = ALGORITHMS[name]
    spec, device = runners[0].env.spec, runners[0].device

    def members_in_turn(members: list[Any], streams: SeedStreams, spec: Any) -> Any:
        if entry.family == "on_policy":
            return OnPolicyMembers(members, spec, streams)
        return OffPolicyMembers(members, spec, device, streams)

    stack = entry.stack()
    if stack is None:
        if not quiet:
            log.info("num_seeds=%d: %s has no stacked form; each seed's own %s acts and updates "
                     "in turn in this process", len(members), name.upper(), name.upper())
        return members_in_turn(members, streams, spec)
    try:
        stacked = stack(members, streams)
        compile_update(runners[0].cfg, stacked, device, quiet=quiet)
        return stacked_calls(stacked, entry.family)
    except NotStackable as exc:
        if not quiet:
            log.info("num_seeds=%d: %s cannot run stacked (%s); each seed's own %s acts and "
                     "updates in turn in this process: its single run's results, without the "
                     "batched speed-up", len(members), name.upper(), exc.what, name.upper())
        return members_in_turn(members, streams, spec)


def attach(algo: Any, runners: list[Runner]) -> None:
    """Each runner's algorithm becomes its seed's view of a stacked `algo` (`seed_batch/view.py`):
    what its evaluation and checkpoints read is the batch's, with nothing to copy back. Members
    trained in turn keep their own."""
    if isinstance(algo, OnPolicyMembers | OffPolicyMembers):
        return
    for k, runner in enumerate(runners):
        runner.algo = runner.ctx.algo = SeedView(algo.algo, k, runner.algo)


def detach(runners: list[Runner]) -> None:
    """Each runner's own algorithm back, holding its seed's state (`attach` undone)."""
    for runner in runners:
        if isinstance(runner.algo, SeedView):
            view = runner.algo
            view.member.load_state_dict(view.state_dict())
            runner.algo = runner.ctx.algo = view.member


class SeedBatch:
    """The seeds still training: their Runners (in seed order), random streams and batched
    algorithm. A seed whose run fails (a non-finite loss or weight) leaves the batch; the rest
    go on."""

    def __init__(self, runners: list[Runner], seeds: list[int], streams: SeedStreams,
                 stop_file: Path, shared: SharedRows | None = None):
        self.runners, self.seeds, self.streams = runners, seeds, streams
        self.shared = shared  # one engine stepping every seed's rows (`envs/rows.py`), or None
        self.stop_file = stop_file  # `<batch folder>/STOP` stops every seed
        self.algo = batched(runners, streams)
        attach(self.algo, runners)
        self.failed: dict[int, str] = {}  # seed -> why it stopped

    @property
    def ctxs(self) -> list[LoopContext]:
        return [r.ctx for r in self.runners]

    @property
    def generators(self) -> list[torch.Generator | None]:
        """Each seed's own stream: its replay samples with it."""
        return list(self.streams.generators)

    @contextlib.contextmanager
    def member(self, k: int, alone: bool = True) -> Iterator[None]:
        """Seed k's console prefix and, when its run does something `alone` that may draw or
        save random numbers (evaluate, checkpoint), its random state in the global generators."""
        with seed_lines(self.seeds[k]), (self.streams.as_global(k) if alone
                                         else contextlib.nullcontext()):
            yield

    def step_envs(self, actions: Any) -> list[StepResult]:
        """One step of every seed's env (`actions[k]`: seed k's). An env fault stops the whole
        batch (the seeds share their env code) in one line naming the seed, the env step and
        the command that resumes every seed from its last good checkpoint."""
        if self.shared is not None:  # one engine call for every seed; each view takes its rows
            try:
                self.shared.step({s: actions[k] for k, s in enumerate(self.seeds)})
            except EnvError as exc:
                step, seed = self.runners[0].state.global_step, self.shared.seed_of_fault(exc)
                if seed is not None:  # the engine says whose row it was
                    raise EnvError(f"[seed {seed}] {exc} (at env step {step:,}); "
                                   f"{self._kept()}") from exc
                raise EnvError(f"{exc} (at env step {step:,}, one engine for seeds "
                               f"{', '.join(map(str, self.seeds))}); {self._kept()}") from exc
        results = []
        for k, ctx in enumerate(self.ctxs):
            try:
                results.append(ctx.env.step(actions[k]))
            except EnvError as exc:
                raise EnvError(f"[seed {self.seeds[k]}] {exc} (at env step "
                               f"{ctx.state.global_step:,}); {self._kept()}") from exc
        return results

    def _kept(self) -> str:
        """What the batch leaves to continue from (`runner.messages.kept` for a batch)."""
        if not any(r.paths.latest.is_file() for r in self.runners):
            return "no checkpoint was written yet"
        command = resume_command(self.stop_file.parent, self.runners[0].cfg.env)
        return f"the seeds' last good checkpoints are kept: resume with {command}"

    def fire(self, event: str) -> None:
        """Every seed's callbacks of `event`."""
        for runner in self.runners:
            runner.fire(event)

    def finished(self) -> bool:
        """The budget is spent (every seed is at the same step), or a stop was asked for."""
        state = self.runners[0].state
        return state.global_step >= state.total_timesteps or state.stop

    def end_iteration(self) -> list[int]:
        """Each seed logs, evaluates and checkpoints as its single run would; a failed seed
        leaves the batch, and one seed's stop (a signal, its STOP file) stops them all.
        Returns the indices (into the batch before) of the seeds that go on."""
        kept = []
        step = self.runners[0].state.global_step
        saves = any(r.schedule.saves_at(step) for r in self.runners)
        for k, runner in enumerate(self.runners):
            try:
                with self.member(k, alone=saves):
                    runner.end_iteration()
                kept.append(k)
            except TrainingError as exc:
                seed = self.seeds[k]
                self.failed[seed] = str(exc)
                log.error("[seed %d] stopped: %s; its last good checkpoint stays in %s; the "
                          "other seeds go on", seed, exc, runner.paths.checkpoints)
        if self.stop_file.exists():
            self.stop_file.unlink(missing_ok=True)
            log.warning("found %s: stopping every seed after this iteration", self.stop_file)
            for runner in self.runners:
                runner.state.stop, runner.state.stop_reason = True, "STOP file"
        stopping = [r.state for r in self.runners if r.state.stop]
        if stopping:
            for runner in self.runners:
                runner.state.stop = True
                runner.state.stop_reason = runner.state.stop_reason or stopping[0].stop_reason
        if len(kept) < len(self.runners):
            self._keep(kept)
        return kept

    def _keep(self, kept: list[int]) -> None:
        detach(self.runners)  # the survivors' own algorithms, from which the smaller batch is built
        for k in reversed(range(len(self.runners))):
            if k not in kept:
                self.streams.drop(k)
        self.runners = [self.runners[k] for k in kept]
        self.seeds = [self.seeds[k] for k in kept]
        if self.runners:
            self.algo = batched(self.runners, self.streams, quiet=True)
            attach(self.algo, self.runners)
