"""A user env whose observations nest a Dict inside a Dict, and whose keys hold dots:
`rltrain env.id=tests.envs.nested_envs:make_nested` (CueTask's entries, rearranged).

Observations: `{"task.cue": cue, "body": {"cue": cue, "pos": pos}}`, so the entries are
"body.cue", "body.pos" (nested) and "task.cue" (a key with a dot); the categorical ones get a
one-hot encoder module each, which is what `nn.ModuleDict` once refused for dotted names.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from tests.envs.dict_envs import CueTask


class NestedCue(gym.ObservationWrapper):
    """CueTask with its `cue` and `pos` inside a nested Dict, and `cue` again under "task.cue"."""

    def __init__(self, env: CueTask):
        super().__init__(env)
        cue, pos = env.observation_space["cue"], env.observation_space["pos"]
        self.observation_space = gym.spaces.Dict(
            {"task.cue": cue, "body": gym.spaces.Dict({"cue": cue, "pos": pos})})

    def observation(self, observation: dict[str, Any]) -> dict[str, Any]:
        return {"task.cue": observation["cue"],
                "body": {"cue": observation["cue"], "pos": observation["pos"]}}

    def sim_state(self) -> dict[str, Any]:
        """CueTask's state protocol (exact resume), passed through."""
        return self.env.unwrapped.sim_state()

    def load_sim_state(self, state: dict[str, Any]) -> None:
        self.env.unwrapped.load_sim_state(state)


def make_nested(**kwargs: Any) -> gym.Env:
    """The factory a user names on the command line; `kwargs` go to CueTask (`box=True`)."""
    return NestedCue(CueTask(**kwargs))
