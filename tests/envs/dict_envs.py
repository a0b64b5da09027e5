"""Envs with Dict and Tuple observations, as a user brings them:
`rltrain env.id=tests.envs.dict_envs:CueTask`.

Each step shows a random `cue` (Discrete(2)) and a random `pos` (Box [-1, 1]^2); the right
answer, in [0, 4), needs both: `2 * cue + (pos[0] > 0)`. No single entry tells more than half
of it, so an agent that reads one entry only earns at most half. Discrete actions: pay 1 for the
answer (a random policy earns 1/4 per step); Box actions (`box=True`): pay
-(a - (answer / 1.5 - 1))^2. Episodes last `length` steps.

Options: `tuple=True` gives the same entries as a Tuple `(cue, pos)`; `nested=True` puts `pos`
inside a Dict `body` (key "body.pos"); `image=True` adds a `camera` entry, a 36x36x3 uint8
image (noise: nothing to learn from it); `scale` multiplies `pos` (a normalizer's work);
`cue_only=True` leaves `pos` out (nothing to normalize; not solvable).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

IMAGE = (36, 36, 3)


class CueTask(gym.Env):
    """See the module docstring."""

    metadata = {"render_modes": ["rgb_array"]}

    def __init__(self, box: bool = False, length: int = 8, tuple: bool = False,  # noqa: A002
                 nested: bool = False, image: bool = False, scale: float = 1.0,
                 cue_only: bool = False, render_mode: str | None = None):
        self.box, self.length, self.tuple, self.nested = box, int(length), tuple, nested
        self.image, self.scale, self.render_mode = image, float(scale), render_mode
        self.cue_only = cue_only
        cue = gym.spaces.Discrete(2)
        pos = gym.spaces.Box(-self.scale, self.scale, (2,), np.float32)
        if self.tuple:
            self.observation_space = gym.spaces.Tuple((cue, pos))
        else:
            entries: dict[str, gym.Space] = {"cue": cue,
                                             "body" if nested else "pos":
                                             gym.spaces.Dict({"pos": pos}) if nested else pos}
            if image:
                entries["camera"] = gym.spaces.Box(0, 255, IMAGE, np.uint8)
            if cue_only:
                entries = {"cue": cue}
            self.observation_space = gym.spaces.Dict(entries)
        self.action_space = (gym.spaces.Box(-1.0, 1.0, (1,), np.float32) if box
                             else gym.spaces.Discrete(4))
        self.cue, self.pos, self.t = 0, np.zeros(2, np.float32), 0

    def _draw(self) -> None:
        self.cue = int(self.np_random.integers(2))
        self.pos = self.np_random.uniform(-1, 1, 2).astype(np.float32)

    def _obs(self) -> Any:
        pos = self.pos * np.float32(self.scale)
        if self.tuple:
            return (self.cue, pos)
        out: dict[str, Any] = {"cue": self.cue}
        out["body" if self.nested else "pos"] = {"pos": pos} if self.nested else pos
        if self.cue_only:
            return {"cue": self.cue}
        if self.image:
            out["camera"] = self.np_random.integers(0, 256, IMAGE, dtype=np.uint8)
        return out

    def answer(self) -> int:
        return 2 * self.cue + int(self.pos[0] > 0)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.t = 0
        self._draw()
        return self._obs(), {}

    def step(self, action):
        target = self.answer()
        if self.box:
            reward = -float((float(np.asarray(action).reshape(-1)[0]) - (target / 1.5 - 1)) ** 2)
        else:
            reward = float(int(action) == target)
        self.t += 1
        self._draw()
        self.last_step_pos = self.pos.copy()  # what this step showed (tests of final_obs)
        return self._obs(), reward, False, self.t >= self.length, {}

    def sim_state(self) -> dict[str, Any]:
        """The state protocol (exact resume); rltrain saves `np_random`, which draws the rest."""
        return {"cue": self.cue, "pos": self.pos.copy(), "t": self.t}

    def load_sim_state(self, state: dict[str, Any]) -> None:
        self.cue, self.t = int(state["cue"]), int(state["t"])
        self.pos = np.asarray(state["pos"], np.float32)

    def render(self):
        return np.full((8, 8, 3), 60 * self.answer(), dtype=np.uint8)
