"""What a run says on the console: its start, end, stops, evaluations and what was kept."""

from __future__ import annotations

import dataclasses
import logging
import math
from importlib import resources
from pathlib import Path
from typing import Any

import torch

from rltrain.algos.configs.base import OffPolicyConfig
from rltrain.checkpoint.run_dir import RunDir
from rltrain.config.schema import TrainConfig
from rltrain.config.store import preset_env_name
from rltrain.envs.config import AtariConfig
from rltrain.envs.families import family_of
from rltrain.envs.trust import resume_command
from rltrain.nets.encoder import describe
from rltrain.nets.spec import resolve_nets
from rltrain.text import plural
from rltrain.types import EnvSpec

log = logging.getLogger("rltrain")


def say_start(cfg: TrainConfig, total: int, num_envs: int, device: torch.device,
              run_dir: Path, ranks: int = 1) -> None:
    """One line: what trains on what, for how long, where (`num_envs`: over all `ranks`)."""
    envs = plural(num_envs, "env") + (f": {ranks} ranks x {num_envs // ranks}" if ranks > 1 else "")
    log.info("training %s on %s for %s (%s, device %s) -> %s", cfg.algo.name, cfg.env.id,
             plural(total, "env step"), envs, device, run_dir)


def say_setup(cfg: TrainConfig, num_envs: int, resumed: bool = False) -> None:
    """The lines on how the run is set up: its recurrent core, and the tuned preset applied (a
    fresh run's) or the defaults that matter where none was (`num_envs`: over all ranks)."""
    if getattr(cfg.algo, "recurrent", "none") != "none":
        seq = cfg.algo.sequence_len()
        log.info("recurrent %s core (%d units): trains on sequences of %s (algo.bptt_len%s)",
                 cfg.algo.recurrent, cfg.algo.recurrent_hidden_size, plural(seq, "step"),
                 "" if cfg.algo.bptt_len else "=0: gcd of algo.n_steps and algo.batch_size")
    if cfg.preset is not None and not resumed:  # logged by the run: in its train.log too
        log.info("applied tuned preset conf/tuned/%s.yaml (your overrides win)", cfg.preset)
    if cfg.preset is None:
        log.info("no tuned preset for (%s, %s)%s; using defaults (yours where you set them): %s",
                 algo_option(cfg.algo), cfg.env.id, _unused_preset(cfg),
                 defaults_that_matter(cfg, num_envs))
    if not resumed:  # a resume refuses this case (run_folder/resume_rules.py)
        warn_idle_steps(cfg)
    warn_unused_atari(cfg)


def warn_unused_atari(cfg: TrainConfig) -> None:
    """A warning when `env.atari.*` is set for an env the Atari preprocessing does not apply to
    (a sweep over envs may set it for all of them, so not an error)."""
    if family_of(cfg.env.id) == "atari":
        return
    default = AtariConfig()
    changed = [f"env.atari.{f.name}={getattr(cfg.env.atari, f.name)}"
               for f in dataclasses.fields(AtariConfig) if f.name != "preprocess"
               and getattr(cfg.env.atari, f.name) != getattr(default, f.name)]
    if changed:
        log.warning("%s: %s is not an Atari (ALE/<Game>-v5) id, so the Atari preprocessing and "
                    "its settings do not apply", ", ".join(changed), cfg.env.id)


def algo_option(algo: Any) -> str:
    """The `algo=` option a config reads as: `ppo_lstm` for PPO with an LSTM core, `ppo (gru
    core)` for another core, else the algorithm's name."""
    core = getattr(algo, "recurrent", "none")
    if core == "none":
        return algo.name
    return f"{algo.name}_lstm" if core == "lstm" else f"{algo.name} ({core} core)"


def _unused_preset(cfg: TrainConfig) -> str:
    """` (conf/tuned/ppo_halfcheetah.yaml exists: env=halfcheetah applies it, ...)` when a
    preset exists for the run's algorithm and env that its options did not choose (`env.id=`,
    `~tuned`); else ""."""
    env_name = preset_env_name(cfg.env.id)
    if env_name is None:
        return ""
    preset = f"{algo_option(cfg.algo)}_{env_name}"
    if not resources.files("rltrain.conf").joinpath("tuned", f"{preset}.yaml").is_file():
        return ""
    option = env_name if env_name != "atari" else cfg.env.id
    return (f" (conf/tuned/{preset}.yaml exists: env={option} applies it, unless env.id= or "
            f"~tuned is given)")


def warn_idle_steps(cfg: TrainConfig) -> None:
    """A warning for env steps that cannot learn: an off-policy run whose budget ends before
    `learning_starts`, or whose learning rate has decayed to 0 before the budget ends."""
    algo, total = cfg.algo, cfg.total_timesteps
    starts = getattr(algo, "learning_starts", 0)
    if starts >= total:
        log.warning("total_timesteps=%s ends before algo.learning_starts=%s: this run takes "
                    "random actions and makes no gradient step; raise total_timesteps or lower "
                    "algo.learning_starts", f"{total:,}", f"{starts:,}")
        return
    decay, final = getattr(algo, "lr_decay_steps", 0), getattr(algo, "lr_final", None)
    if decay and final == 0 and decay < total:
        log.warning("the learning rate reaches algo.lr_final=0 at step %s of %s "
                    "(algo.lr_decay_steps): the last %s learn nothing; "
                    "algo.lr_decay_steps=${total_timesteps} decays over the whole run",
                    f"{decay:,.0f}", f"{total:,}", plural(int(total - decay), "step"))


def say_encoders(algo: Any, spec: EnvSpec) -> None:
    """For Dict / Tuple observations, one line: each entry and the encoder it got (set per
    key with `algo.net.encoders`)."""
    if spec.obs_entries:
        entries = describe(resolve_nets(algo, spec).actor)
        log.info("observation entries (encoder per key: algo.net.encoders): %s",
                 "; ".join(entries))


def defaults_that_matter(cfg: TrainConfig, num_envs: int) -> str:
    """`num_envs=1, lr=0.0001, ...`: the values that decide most how a run without a tuned
    preset learns (env count, learning rate, rollout length or replay and update cadence)."""
    algo = cfg.algo
    names = (("buffer_size", "learning_starts", "batch_size", "train_freq", "gradient_steps")
             if isinstance(algo, OffPolicyConfig) else ("n_steps",))
    values = {"num_envs": num_envs, "lr": algo.lr}
    values.update({name: getattr(algo, name) for name in names if hasattr(algo, name)})
    return ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in values.items())


def say_done(result: dict[str, Any], step: int, checkpoints: Path) -> None:
    """One line at the end of a completed run: steps, final evaluation, checkpoint folder."""
    log.info("done: %s env steps; eval mean reward %.2f ± %.2f%s over %d episodes; "
             "checkpoints in %s", f"{step:,}", result["mean_reward"], result["std_reward"],
             success_text(result), result["episodes"], checkpoints)


def success_text(result: dict[str, Any]) -> str:
    """", success rate 0.90" after an evaluation of a goal env (one reporting `is_success`);
    empty for every other env."""
    rate = result.get("success_rate")
    return "" if rate is None else f", success rate {rate:.2f}"


def say_stopped(reason: str, step: int, run_dir: Path, env: Any = None, ranks: int = 1) -> None:
    """One line after a requested stop: why, where, and the command that continues the run
    (`env`: the run's env config, for the `env.import=` an env of the user's module needs;
    `ranks`: a torchrun job's, which resumes under torchrun again)."""
    log.warning("stopped (%s) at step %s; checkpoint saved. Resume with: %s",
                reason, f"{step:,}", resume_command(run_dir, env, ranks))


def say_eval(result: dict[str, Any], step: int) -> bool:
    """Report an evaluation (a record above the live region, and in train.log); False when its
    mean reward is not finite, which is also said, as it can never be the best."""
    log.info("eval at step %s: mean reward %.2f ± %.2f%s", f"{step:,}",
             result["mean_reward"], result["std_reward"], success_text(result))
    if math.isfinite(result["mean_reward"]):
        return True
    log.warning("eval at step %s: mean reward is %s (the env returned non-finite rewards); "
                "best.pt is not updated", f"{step:,}", result["mean_reward"])
    return False


def kept(run_dir: Path, env: Any = None) -> str:
    """What a failed run leaves to continue from: its last good checkpoint, if any."""
    if RunDir(run_dir).can_resume():  # a run's, or a seed batch's
        return f"the last good checkpoint is kept: resume with {resume_command(run_dir, env)}"
    return "no checkpoint was written yet"
