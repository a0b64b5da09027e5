"""The `env` section of the config: its schemas, and the few values the envs read from it.

The envs own these (they import nothing from the config package); `rltrain.config.schema`
re-exports the schemas beside the other sections, and `rltrain.config.validation` checks them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omegaconf import MISSING

OFF_POLICY_NUM_ENVS, ON_POLICY_NUM_ENVS = 1, 8
"""`env.num_envs` when neither the command line nor a preset sets it: one env for an off-policy
algorithm, 8 for an on-policy one (`rltrain.config.validation.default_num_envs`)."""


@dataclass
class WrapperConfig:
    """One gymnasium wrapper of `env.wrappers`."""

    name: str = MISSING
    """A class of `gymnasium.wrappers` (`ClipReward`) or `module:Class`."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments of the wrapper (after the env)."""


@dataclass
class AtariConfig:
    """The standard Atari preprocessing of `ALE/<Game>-v5` ids (`rltrain/envs/atari.py`)."""

    preprocess: str = "auto"
    """`auto` (on for ALE ids, off otherwise), `true` or `false`. On, the ALE env is made with
    `frameskip=1` and the wrappers below are applied; off, the raw env (210x160 RGB)."""
    noop_max: int = 30
    """On reset, take a random number of NOOP frames, uniform in [0, noop_max - 1] (ALE's C++
    engine's count; from the env's seeded RNG); 0 or 1 disables."""
    frame_skip: int = 4
    """Repeat each action this many frames, summing rewards; the observation is the max over
    the last two frames (>= 1)."""
    screen_size: int = 84
    """Observations are resized to screen_size x screen_size (cv2.INTER_AREA; >= 1)."""
    grayscale: bool = True
    """Grayscale observations (false: RGB)."""
    terminal_on_life_loss: bool = True
    """Training only: losing a life ends the training episode (`terminated`) while the game
    goes on; episode statistics and evaluation still count whole games."""
    clip_reward: bool = True
    """Training only: rewards become their sign (-1, 0, 1); statistics report the game score."""
    frame_stack: int = 4
    """Stack the last frame_stack frames, channels first and newest last: `[k, 84, 84]`
    (grayscale; RGB gives `[3k, 84, 84]`); 0 or 1: the frame alone, `[1, 84, 84]` (RGB
    `[3, 84, 84]`)."""
    fire_reset: bool = True
    """In games whose actions include FIRE: press it for a frame skip after the reset's
    no-ops, and after each lost life (within the step that lost it)."""


@dataclass
class EnvConfig:
    """Which environment to train on and how to vectorize and normalize it."""

    id: str = "Pendulum-v1"
    """Gymnasium id (any registered id), `module:EnvId` (imports the module, which registers the
    id), or `module:factory` (a callable building the env; see docs/environments.md, "Use your
    own environment")."""
    backend: str = "auto"
    """What steps the envs: `auto` (EnvPool or ale-py's C++ engine where it measured faster for
    the env's family and `num_envs` and is installed, else gymnasium), `gymnasium`, `envpool`
    (the `envpool` extra; registered classic, Box2D and MuJoCo ids, no wrappers or kwargs),
    `ale` (ale-py's C++ Atari engine: ALE/<Game>-v5 ids with the Atari preprocessing), or
    `torch`: the native batched torch twin of CartPole-v1 / Pendulum-v1, stepped on the
    training device."""
    imports: list[str] = field(default_factory=list)
    """Modules imported before the env is made, so that they can register ids
    (`env.import=my_pkg.envs` is accepted on the command line too)."""
    wrappers: list[WrapperConfig] = field(default_factory=list)
    """Gymnasium wrappers around each env, innermost first:
    `[{name: ClipReward, kwargs: {min_reward: -1, max_reward: 1}}]`."""
    num_envs: int | None = None
    """Number of parallel environments. Unset (null), the algorithm's family chooses: 1 for
    the off-policy ones (DQN, DDPG, TD3, SAC: one gradient step per env step), 8 for PPO and
    A2C; a tuned preset or the command line sets it otherwise."""
    vectorization: str = "sync"
    """`sync` (one process) or `async` (one subprocess per env)."""
    normalize_obs: bool = False
    """Running mean/std observation normalization (statistics are saved in checkpoints)."""
    normalize_reward: bool = False
    """Scale rewards by the running std of the discounted return (training only)."""
    clip_obs: float = 10.0
    """Clip normalized observations to [-clip_obs, clip_obs] (> 0)."""
    max_episode_steps: int | None = None
    """Override the env's time limit (> 0; None keeps the registered one)."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    """Extra keyword arguments passed to `gymnasium.make`, the factory or the native env (add
    one on the command line with `+env.kwargs.name=value`)."""
    frame_stack: int = 0
    """Vector observations: stack the last frame_stack observations, `[frame_stack * D]`,
    oldest first, reset per env at episode starts (0: off). Pixels: `env.atari.frame_stack`."""
    atari: AtariConfig = field(default_factory=AtariConfig)
    """Atari preprocessing (no-op reset, frame skip, 84x84 grayscale, frame stack, ...)."""


BACKENDS = ("auto", "gymnasium", "envpool", "ale", "torch")
"""The values of `env.backend`."""

PREPROCESS_SWITCH = {"true": True, "on": True, "yes": True, "1": True,
                     "false": False, "off": False, "no": False, "0": False}
"""The values `env.atari.preprocess` takes besides `auto`, and what each means."""


def atari_preprocess(env: EnvConfig, family: str | None) -> bool:
    """Whether the Atari preprocessing applies to `env` (`family`: `envs.families.family_of`)."""
    mode = str(env.atari.preprocess).strip().lower()
    return family == "atari" if mode == "auto" else PREPROCESS_SWITCH[mode]
