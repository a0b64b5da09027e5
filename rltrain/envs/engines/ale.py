"""ale-py's C++ Atari engine (`env.backend=ale`, installed with the `atari` extra): the per-env
half of rltrain's Atari preprocessing (`envs/atari.py`'s `AtariFrames`) done in C++ threads, as
a gymnasium `VectorEnv` in SAME_STEP autoreset mode that `GymVecEnv` adapts; the vector half
(frame stack, life loss, reward sign) stays `envs/atari_vec.py`'s, whichever engine steps.

Each row is an `AtariVectorEnv` of one env (one C++ thread): all rows are sent their actions,
then received, so they step side by side. FIRE is rltrain's, as `AtariFrames` presses it: a
row that lost a life (its game going on) is stepped once more with FIRE within the same agent
step, and a row that starts an episode is stepped with FIRE after its no-ops, its reset
observation that step's. The engine's own FIRE at reset is one frame, which sticky actions
(v5: 0.25) drop one time in four, and one vector env of N rows cannot step some rows alone.
Measured no slower than one engine of N rows (benchmarks/results/env_engines.md).

What differs from gymnasium's envs, and why it does not change what is learned
(`tests/envs/test_ale_engine.py` steps both on a recorded trajectory):
- a game that ends inside a frame skip: ALE's final observation is the previous step's frame
  (its pooled frames are not re-read), `AtariFrames`' is the frame the game ended on. A game's
  end is terminal, so no value is bootstrapped from it;
- seeds: the same seed gives other no-op counts and sticky actions (ALE's C++ generator, not
  numpy's), from the same distributions;
- the 108k-frame limit (`max_num_frames_per_episode`; 0 or null: none) is counted here and
  truncates at the end of the agent step that reaches it, with that step's observation as the
  final one; ALE's own limit would stop inside the frame skip and pool a stale frame into it
  (a truncation is bootstrapped from its final observation). gymnasium's ALE ends at the same
  step but does not play the limit's own frame, so the final observations differ by it;
- seeds from 2**31 on are taken modulo 2**31 (ALE's C++ seeds are int32, negative: unseeded).
"""

from __future__ import annotations

import importlib.metadata
import re
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from rltrain.envs.atari import preprocessing
from rltrain.envs.config import EnvConfig
from rltrain.envs.custom import resolve_env_id
from rltrain.envs.engines.same_step import row_seeds
from rltrain.envs.families import family_of
from rltrain.errors import UserError

KWARGS = ("repeat_action_probability", "full_action_space", "max_num_frames_per_episode")
"""The `gymnasium.make` keyword arguments of ALE ids the engine takes (besides `game`, and
`frameskip`/`obs_type`, which the preprocessing sets itself)."""

_IGNORED = ("game", "frameskip", "obs_type")
UNLIMITED = 2**31 - 1
"""The engine's own frame limit, out of reach: `AleRows` truncates at `max_frames` itself."""


MIN_VERSION = (0, 12)
"""ale-py's first release whose vector env resets in the same step (`autoreset_mode`), tested
with 0.12.1; the gymnasium path takes ale-py 0.9 on."""


def ale_vector_installed() -> bool:
    """Whether ale-py's vector env is installed, at `MIN_VERSION` or later (nothing imported)."""
    try:
        version = importlib.metadata.version("ale-py")
    except importlib.metadata.PackageNotFoundError:
        return False
    parts = tuple(int(p) for p in re.findall(r"\d+", version)[:2])
    return parts >= MIN_VERSION


def engine_kwargs(cfg: EnvConfig) -> dict[str, Any]:
    """The id's registered ALE keyword arguments with `env.kwargs` over them (gymnasium's
    `ALE/<Game>-v5` defaults: sticky actions 0.25, minimal action set, 108k frames)."""
    registered = dict(gym.spec(cfg.id).kwargs)
    return {**registered, **dict(cfg.kwargs)}


def unsupported(cfg: EnvConfig) -> str | None:
    """Why the engine cannot step `cfg` as asked, without importing anything (None: it can,
    if installed): the phrase after "env.backend=ale cannot ..."."""
    if family_of(cfg.id) != "atari" or ":" in cfg.id:
        return f"step {cfg.id} (only ALE/<Game>-v5 ids)"
    if not preprocessing(cfg):
        return "step the raw game (env.atari.preprocess=false): it steps the preprocessing"
    for field, value in (("env.wrappers", cfg.wrappers), ("env.imports", cfg.imports)):
        if value:
            return f"take {field} (gymnasium's)"
    if cfg.vectorization == "async":
        return "run env.vectorization=async (it steps its envs in its own threads)"
    other = sorted(set(cfg.kwargs) - set(KWARGS) - set(_IGNORED))
    if other:
        return f"take env.kwargs.{other[0]} (it takes {', '.join(KWARGS)})"
    sticky = cfg.kwargs.get("repeat_action_probability", 0.25)
    if not isinstance(sticky, int | float) or not 0.0 <= sticky <= 1.0:
        return f"take env.kwargs.repeat_action_probability={sticky} (a probability, 0 to 1)"
    frames = cfg.kwargs.get("max_num_frames_per_episode", 108_000)
    if frames is not None and not isinstance(frames, int):
        return f"take env.kwargs.max_num_frames_per_episode={frames} (frames: an integer)"
    return None


def check_ale(cfg: EnvConfig) -> None:
    """Refuse, in one line naming `env.backend=gymnasium`, a run the engine cannot step as asked."""
    why = unsupported(cfg)
    if why is not None:
        raise UserError(f"env.backend=ale cannot {why}; use env.backend=gymnasium")
    resolve_env_id(cfg.id)  # registered (ale-py imported), its extra installed: else one line
    if not ale_vector_installed():
        raise UserError('env.backend=ale needs ale-py >= 0.12: pip install -U ale-py, or use '
                        'env.backend=gymnasium')


def make_ale(cfg: EnvConfig, num_envs: int) -> AleRows:
    """`num_envs` rows of `cfg.id` with the per-env Atari preprocessing of `cfg.atari`."""
    check_ale(cfg)
    kw, a = engine_kwargs(cfg), cfg.atari
    settings = dict(
        img_height=a.screen_size, img_width=a.screen_size, grayscale=a.grayscale, stack_num=1,
        frameskip=a.frame_skip, maxpool=True, noop_max=a.noop_max, episodic_life=False,
        reward_clipping=False, use_fire_reset=False,  # FIRE for a frame skip: AleRows.serve
        repeat_action_probability=float(kw.get("repeat_action_probability", 0.25)),
        full_action_space=bool(kw.get("full_action_space", False)),
        max_num_frames_per_episode=UNLIMITED)  # the limit is counted here: AleRows.max_frames
    frames = kw.get("max_num_frames_per_episode", 108_000)
    return AleRows(str(kw["game"]), num_envs, settings, cfg.max_episode_steps,
                   fire=a.fire_reset, max_frames=int(frames) if frames and frames > 0 else None)


class AleRows(gym.vector.VectorEnv):
    """`num_envs` one-row `AtariVectorEnv`s of `game` built with `settings`, seen as one
    SAME_STEP vector env: per-row observations `[size, size]` (or `[size, size, 3]`), float
    rewards (the game's score), `info["lives"]`; `max_steps` agent steps or `max_frames`
    emulator frames (the episode's, no-ops included) truncate an episode at the end of the step
    that reaches them (None: no limit); `fire`: FIRE after resets and lost lives where the game
    has it.
    """

    def __init__(self, game: str, num_envs: int, settings: dict[str, Any],
                 max_steps: int | None, fire: bool = True, max_frames: int | None = None):
        from ale_py.vector_env import AtariVectorEnv

        self.num_envs, self.max_steps, self.max_frames = num_envs, max_steps, max_frames
        self.rows = [AtariVectorEnv(game, 1, num_threads=1, autoreset_mode="SameStep",
                                    **settings) for _ in range(num_envs)]
        first = self.rows[0]
        actions = list(first.ale.get_action_set())
        names = [str(getattr(x, "name", x)).split(".")[-1] for x in actions]
        self.fire_action = names.index("FIRE") if fire and "FIRE" in names else None
        shape = first.single_observation_space.shape[1:]  # stack_num 1: [1, H, W(, 3)]
        self.single_observation_space = gym.spaces.Box(0, 255, shape, np.uint8)
        self.single_action_space = first.single_action_space
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space,
                                                              num_envs)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, num_envs)
        self.metadata = {"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP}
        self._lives = np.zeros(num_envs, np.int64)
        self._steps = np.zeros(num_envs, np.int64)
        self._frames = np.zeros(num_envs, np.int64)  # each row's episode frame count

    capture_problem = "ale-py's vector env keeps its games' state in C++, where it is not saved"
    """Why `resume=` cannot continue these episodes (`envs/snapshot.py` asks)."""

    def reset(self, *, seed: int | Sequence[int] | None = None,
              options: dict | None = None) -> tuple[np.ndarray, dict]:
        seeds = None if seed is None else row_seeds(seed, self.num_envs)
        outs = [row.reset(seed=None if seeds is None else int(seeds[i]) % 2**31)
                for i, row in enumerate(self.rows)]
        obs = np.stack([o[0][0, 0] for o in outs])
        self._lives[:] = [int(o[1]["lives"][0]) for o in outs]
        self.serve(np.arange(self.num_envs), obs, self._lives)
        self._steps[:] = 0
        return obs, {"lives": self._lives.copy()}

    def serve(self, ids: np.ndarray, obs: np.ndarray, lives: np.ndarray) -> None:
        """Rows `ids`, just reset: FIRE for a frame skip where the game has it (its reward, 0
        before the serve, is the reset's: not counted); their `obs` and `lives` (in place)."""
        if self.fire_action is None or not len(ids):
            return
        for i, o in zip(ids, self._exchange(ids, np.full(len(ids), self.fire_action)),
                        strict=True):
            obs[i], _, _, _, _, lives[i], self._frames[i] = self._row(o)

    def _exchange(self, ids: np.ndarray, actions: np.ndarray) -> list[tuple]:
        """Step rows `ids` side by side with `actions` (one each): their raw results."""
        for i, a in zip(ids, actions, strict=True):
            self.rows[i].send(np.asarray([a], dtype=np.int64))
        return [self.rows[i].recv() for i in ids]

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                  np.ndarray, dict]:
        n, actions = self.num_envs, np.asarray(actions).reshape(self.num_envs)
        if ((actions < 0) | (actions >= self.single_action_space.n)).any():  # C++ would hang
            raise ValueError(f"actions {actions.tolist()} outside {self.single_action_space}")
        rows = [self._row(o) for o in self._exchange(np.arange(n), actions)]
        lost = [i for i, (r, last) in enumerate(zip(rows, self._lives, strict=True))
                if r[5] < last and not (r[2] or r[3])]
        if self.fire_action is not None and lost:
            # the game waits for FIRE to serve: pressed within this step (the rows side by
            # side), its reward added
            for i, more in zip(lost, self._exchange(lost, [self.fire_action] * len(lost)),
                               strict=True):
                again = self._row(more)
                rows[i] = (again[0], rows[i][1] + again[1], *again[2:])
        obs = np.stack([r[0] for r in rows])
        reward = np.array([r[1] for r in rows])
        terminated, truncated = (np.array([r[k] for r in rows]) for k in (2, 3))
        final = {i: r[4] for i, r in enumerate(rows) if r[4] is not None}
        lives = np.array([r[5] for r in rows])
        self._frames[:] = [r[6] for r in rows]
        self._steps += 1
        self._truncate(obs, terminated, truncated, lives, final)
        done = terminated | truncated
        self.serve(np.flatnonzero(done), obs, lives)  # the new episodes' reset observations
        self._steps[done] = 0
        self._lives[:] = lives
        info: dict[str, Any] = {"lives": lives.copy()}
        if final:
            final_obs = obs.copy()
            for i, frame in final.items():
                final_obs[i] = frame
            info.update(final_obs=final_obs, _final_obs=done)
        return obs, reward, terminated, truncated, info

    @staticmethod
    def _row(out: tuple) -> tuple:
        """One row's engine result as (obs, reward, terminated, truncated, final obs or None,
        lives, episode frame number)."""
        obs, reward, terminated, truncated, info = out
        final = info["final_obs"][0, 0] if "final_obs" in info else None
        return (obs[0, 0], float(reward[0]), bool(terminated[0]), bool(truncated[0]), final,
                int(info["lives"][0]), int(info["episode_frame_number"][0]))

    def _truncate(self, obs: np.ndarray, terminated: np.ndarray, truncated: np.ndarray,
                  lives: np.ndarray, final: dict[int, np.ndarray]) -> None:
        """Rows at `max_steps` agent steps or `max_frames` frames whose game goes on: truncated,
        their observation kept as the final one and the row reset (in place)."""
        over = np.zeros(self.num_envs, bool)
        if self.max_steps is not None:
            over |= self._steps >= self.max_steps
        if self.max_frames is not None:
            over |= self._frames >= self.max_frames
        for i in np.flatnonzero(over & ~(terminated | truncated)):
            final[i] = obs[i].copy()
            o, info = self.rows[i].reset()
            obs[i], lives[i], truncated[i] = o[0, 0], int(info["lives"][0]), True

    def close(self, **kwargs: Any) -> None:
        """Close the engines and drop them: their C++ threads end with the objects."""
        rows, self.rows = self.rows, []
        for row in rows:
            row.close()
