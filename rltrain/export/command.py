"""`rltrain export ckpt=... format=onnx|torchscript`: write the policy, then check it."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from rltrain.checkpoint.run_dir import RunDir, require_writable
from rltrain.config.schema import ExportConfig
from rltrain.envs.config import atari_preprocess
from rltrain.envs.families import family_of
from rltrain.envs.make import make_env
from rltrain.envs.masks import action_mask
from rltrain.envs.normalize import NormalizeObs
from rltrain.envs.trust import NamedCode
from rltrain.envs.vec_env import GymVecEnv
from rltrain.errors import UserError
from rltrain.evaluation.agent import build_agent, load_checkpoint
from rltrain.export import formats
from rltrain.export.check import Agreement, compare_actions, sample_observations
from rltrain.export.module import ExportedPolicy, find_layer, torch_actions
from rltrain.guest import as_guest
from rltrain.threads import torch_threads
from rltrain.types import CHOICE_KINDS


@as_guest
def export_policy(ckpt: str | Path, fmt: str = "onnx", out: str | Path | None = None,
                  check_samples: int = 1000, seed: int = 0, named: NamedCode | None = None,
                  ) -> dict[str, Any]:
    """Export the checkpoint's deterministic policy and compare it with the torch policy.

    Returns `path`, `format`, `ok` (agreement on `check_samples` random observations),
    `samples`, `mismatches`, `max_abs_diff`, `tolerance`, `checkpoint`, `action_kind`
    (discrete or box), `obs_shape`, `action_shape` (per observation) and `normalized_obs`.
    `named`: the user code named on the command line (see `envs/trust.py`).
    """
    _check_request(ckpt, fmt, out, check_samples, seed)
    path, payload, cfg = load_checkpoint(ckpt, "cpu", named)
    target = Path(out) if out else RunDir.of_checkpoint(path).export / formats.FORMATS[fmt]
    require_writable(target.parent, f"export writes {target} (give out=<a file somewhere "
                                    "writable>)")
    # a native torch twin (env.backend=torch) has gymnasium's dynamics and spaces: export
    # against the gymnasium env, whose spaces give the observation and action bounds
    env = make_env(dataclasses.replace(cfg.env, vectorization="sync", backend="gymnasium"), "cpu",
                   num_envs=1, training=False)
    if find_layer(env, GymVecEnv) is None:
        env.close()
        raise UserError(f"export needs a gymnasium env; {cfg.env.id} builds a batched VecEnv "
                        f"of its own, whose observation and action bounds are unknown to export")
    with torch_threads():  # build_agent sets the run's threads: given back after
        try:
            algo = build_agent(cfg, env, payload, path, "cpu")
            policy = algo.policy.eval()
            env.reset(seed)
            masked = action_mask(env) is not None  # the env says which actions are valid
            module = ExportedPolicy(policy, env, masked)
            gym_env, norm = find_layer(env, GymVecEnv), find_layer(env, NormalizeObs)
            assert isinstance(gym_env, GymVecEnv)
            space = observation_space(env, gym_env)
            stats = norm if isinstance(norm, NormalizeObs) else None
            obs = sample_observations(space, stats, check_samples, seed)
            # A batch of 2 as the example: torch.export would specialize the batch dim to a 1.
            example, names, _, _ = export_inputs(module, env, space, stats, 2, seed + 1)
            _, _, states, masks = export_inputs(module, env, space, stats, check_samples, seed)
            metadata = {**export_metadata(cfg, env, space, policy), "inputs": names}
            formats.write(fmt, module, example, target, metadata, names)
            reference = torch_actions(policy, env, obs, states, masks)
        finally:
            env.close()
    agreement, reference = check_export(formats.load(fmt, target), module, obs, states, masks,
                                        reference)
    return {"path": str(target), "format": fmt, "ok": agreement.ok, "samples": agreement.samples,
            "mismatches": agreement.mismatches, "max_abs_diff": agreement.max_abs_diff,
            "tolerance": agreement.tolerance, "checkpoint": str(path),
            "action_kind": env.spec.action_kind,
            **obs_description(space), "action_shape": list(reference.shape[1:]),
            "normalized_obs": module.normalize,
            "metadata": metadata}


def _check_request(ckpt: str | Path, fmt: str, out: str | Path | None, check_samples: int,
                   seed: int) -> None:
    """Refuse (one line), before anything is loaded, what `export_policy` cannot do: its
    arguments as `rltrain export` checks them (an `ExportConfig`), a format whose extra is
    missing, a folder given as the output file."""
    ExportConfig(str(ckpt), fmt, None if out is None else str(out), check_samples,
                 seed).validate()
    formats.check_format(fmt)
    if out is not None and Path(out).is_dir():
        raise UserError(f"out={out} is a folder: give the file to write, e.g. "
                        f"out={Path(out) / formats.FORMATS[fmt]}")


def check_export(run: formats.Runner, module: ExportedPolicy, obs: np.ndarray,
                 states: torch.Tensor | None, masks: np.ndarray | None, reference: Any,
                 ) -> tuple[Agreement, np.ndarray]:
    """(agreement of the loaded export with the torch reference, the reference actions); with
    a recurrent policy the next states must agree as well as the actions."""
    scale = float(module.action_half_range.max()) if module.action_half_range.numel() else 1.0
    extra = [] if masks is None else [masks]
    if states is None:
        return compare_actions(run(obs, *extra), reference, module.discrete, scale), reference
    exported, exported_state = run(obs, states.numpy(), *extra)
    reference, reference_state = reference
    agreement = compare_actions(exported, reference, module.discrete, scale)
    rows_first = (0, 1, 2) if exported_state.ndim != 3 else (1, 0, 2)  # [B, L, D] per row
    state_agreement = compare_actions(exported_state.transpose(rows_first),
                                      reference_state.transpose(rows_first), False)
    return merge_agreement(agreement, state_agreement), reference


def export_inputs(module: ExportedPolicy, env: Any, space: gym.spaces.Box,
                  stats: NormalizeObs | None, n: int, seed: int,
                  ) -> tuple[Any, list[str], torch.Tensor | None, np.ndarray | None]:
    """`n` random inputs of the export: (the example (obs, or a tuple with the recurrent state
    and the action mask when it takes them), their names, the states, the masks)."""
    sampled = sample_observations(space, stats, n, seed)
    obs = ([torch.as_tensor(v) for v in sampled.values()] if isinstance(sampled, dict)
           else [torch.as_tensor(sampled)])
    states = random_states(module.policy, n, seed) if module.recurrent else None
    segments = tuple(env.spec.action_nvec) or (env.spec.action_dim,)  # MultiDiscrete: per dim
    masks = random_masks(segments, n, seed) if module.masked else None
    extra = [*([states] if states is not None else []),
             *([torch.as_tensor(masks)] if masks is not None else [])]
    names = [*(obs_input_names(sampled) if isinstance(sampled, dict) else ["obs"]),
             *(["state"] if states is not None else []),
             *(["action_mask"] if masks is not None else [])]
    inputs = (*obs, *extra)
    return (inputs if len(inputs) > 1 else inputs[0]), names, states, masks


def obs_input_names(entries: dict[str, Any]) -> list[str]:
    """The export's input name of each Dict / Tuple observation entry: `obs.<key>`."""
    return [f"obs.{key}" for key in entries]


def random_masks(segments: tuple[int, ...], n: int, seed: int) -> np.ndarray:
    """`n` random action masks `[n, sum(segments)]`, each allowing at least one choice in each
    action dimension (`segments`: `(n_actions,)`, or a MultiDiscrete's nvec)."""
    rng = np.random.default_rng(seed)
    masks = rng.random((n, int(sum(segments)))) < 0.5
    offset = 0
    for width in segments:
        masks[np.arange(n), offset + rng.integers(width, size=n)] = True
        offset += width
    return masks


def random_states(policy: Any, n: int, seed: int) -> torch.Tensor:
    """`n` recurrent states `[L, n, D]` to check a recurrent export on (standard normal)."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(policy.initial_state(n, torch.device("cpu")).shape, generator=g)


def merge_agreement(actions: Agreement, states: Agreement) -> Agreement:
    """Both must agree; a row counts once however many of its parts disagree."""
    return Agreement(actions.ok and states.ok, actions.samples,
                     max(actions.mismatches, states.mismatches),
                     max(actions.max_abs_diff, states.max_abs_diff), states.tolerance)


def observation_space(env: Any, gym_env: GymVecEnv) -> gym.Space:
    """The space of what the policy sees: the gymnasium env's single observation space, or,
    where a VecEnv wrapper changes the shape (`FrameStack`: `[84, 84]` frames, `[4, 84, 84]`
    stacks), a Box of `env.spec.obs_shape` with the frame's dtype (uint8: 0..255); for
    categorical observations a MultiDiscrete of their entries (int64, counted from 0); for
    Dict / Tuple observations a flat Dict of those, one per entry (`rltrain/obs.py` keys)."""
    if env.spec.obs_entries:
        return gym.spaces.Dict({
            leaf.key: (gym.spaces.MultiDiscrete(np.array(leaf.entry.obs_nvec))
                       if leaf.entry.obs_nvec else leaf.space)
            for leaf in gym_env.leaves})
    if env.spec.obs_nvec:  # categorical: int64 entries counted from 0, one-hot in the network
        return gym.spaces.MultiDiscrete(np.array(env.spec.obs_nvec))
    space = gym_env.venv.single_observation_space
    shape = tuple(env.spec.obs_shape)
    if tuple(space.shape) == shape:
        return space
    if space.dtype == np.uint8:
        return gym.spaces.Box(0, 255, shape, np.uint8)
    return gym.spaces.Box(-np.inf, np.inf, shape, np.float32)


def export_metadata(cfg: Any, env: Any, space: gym.spaces.Box,
                    policy: Any = None) -> dict[str, Any]:
    """What a user of the exported file must reproduce (`formats.METADATA_KEY`): the env id,
    the observation shape and dtype, for Atari runs the preprocessing (`env.atari`), and for a
    recurrent policy its state's shape per row and how to start it."""
    meta: dict[str, Any] = {"env_id": cfg.env.id, **obs_description(space),
                            "action_kind": env.spec.action_kind,
                            "action_dim": env.spec.action_dim}
    if env.spec.obs_entries:  # entry i in [0, nvec[i]) for categorical ones (start removed)
        meta["obs_nvec"] = {e.key: list(e.obs_nvec) for e in env.spec.obs_entries if e.obs_nvec}
    elif env.spec.obs_nvec:
        meta["obs_nvec"] = list(env.spec.obs_nvec)  # entry i in [0, obs_nvec[i]) (start removed)
    family = family_of(cfg.env.id)
    if atari_preprocess(cfg.env, family):  # what was applied: `preprocess: auto` resolved
        meta["atari"] = {**dataclasses.asdict(cfg.env.atari), "preprocess": True}
    elif family == "atari":  # an ALE game fed its raw frames: say so
        meta["atari"] = {"preprocess": False}
    if getattr(policy, "recurrent", False):
        layers, _, width = policy.initial_state(1, torch.device("cpu")).shape
        meta["recurrent"] = {"state_shape": [layers, "batch", width], "core": cfg.algo.recurrent,
                             "reset": "pass zeros as the state at each episode's first step"}
    return meta


def obs_description(space: gym.Space) -> dict[str, Any]:
    """`obs_shape` and `obs_dtype` of the export's observation; for a Dict one, both per entry
    (`{key: shape}`, `{key: dtype}`) and the input names (`obs_inputs`)."""
    if isinstance(space, gym.spaces.Dict):
        return {"obs_shape": {k: list(sub.shape) for k, sub in space.spaces.items()},
                "obs_dtype": {k: input_dtype(sub) for k, sub in space.spaces.items()},
                "obs_inputs": obs_input_names(space.spaces)}
    return {"obs_shape": list(space.shape), "obs_dtype": input_dtype(space)}


def input_dtype(space: gym.Space) -> str:
    """The dtype the export takes for observations of `space` (what `sample_observations`
    draws): uint8 pixels and int64 categorical entries as they are, anything else float32,
    whatever the env's own dtype (a float64 Box is fed as float32, as the networks see it)."""
    if isinstance(space, gym.spaces.MultiDiscrete):
        return "int64"
    return "uint8" if space.dtype == np.uint8 else "float32"


def agreement_line(result: dict[str, Any]) -> str:
    """The one-line verdict the command prints (also the error message when it fails)."""
    name, n = Path(result["path"]).name, result["samples"]
    observations = f"{n} random observation{'' if n == 1 else 's'}"
    if result["action_kind"] in CHOICE_KINDS:
        if result["ok"]:
            return f"{name} matches the torch policy on {observations} (identical actions)"
        return (f"{name} does NOT match the torch policy: {result['mismatches']} of "
                f"{observations} get a different action")
    if result["ok"]:
        return (f"{name} matches the torch policy on {observations} "
                f"(max |Δ| = {result['max_abs_diff']:.1g})")
    return (f"{name} does NOT match the torch policy: max |Δ| = {result['max_abs_diff']:.3g} > "
            f"{result['tolerance']:.1g} on {result['mismatches']} of {observations}")
