"""PixelCartPole: CartPole-v1 seen through a small uint8 image drawn with numpy (no pygame).

A built-in image env for the CNN encoder: `env=pixel_cartpole`, or
`env.id=rltrain.envs.pixels:PixelCartPole` (a factory, so nothing is registered on import), with
`+env.kwargs.size=48` / `+env.kwargs.frames=2` to change the image.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

X_LIMIT = 2.4
"""CartPole's track half-width: the image spans [-X_LIMIT, X_LIMIT]."""
CART, POLE = 128, 255
"""Gray levels of the cart and the pole on a black background."""
RENDER_SCALE = 8
"""`render()` enlarges each pixel to RENDER_SCALE x RENDER_SCALE."""


def draw_cartpole(state: np.ndarray, size: int) -> np.ndarray:
    """A `[size, size]` uint8 drawing of CartPole state `(x, ẋ, θ, θ̇)`: cart and pole only."""
    img = np.zeros((size, size), dtype=np.uint8)
    x, theta = float(state[0]), float(state[2])
    cx = (np.clip(x, -X_LIMIT, X_LIMIT) + X_LIMIT) / (2 * X_LIMIT) * (size - 1)
    ground, half_w, height = int(size * 0.8), max(1, size // 10), max(1, size // 16)
    c0, c1 = max(0, round(cx) - half_w), min(size, round(cx) + half_w + 1)
    img[ground - height:ground + 1, c0:c1] = CART
    length = 0.45 * size
    t = np.linspace(0.0, 1.0, int(2 * length) + 1)
    cols = np.rint(cx + t * length * np.sin(theta)).astype(int)
    rows = np.rint(ground - height - t * length * np.cos(theta)).astype(int)
    inside = (rows >= 0) & (rows < size) & (cols >= 0) & (cols < size)
    img[rows[inside], cols[inside]] = POLE
    return img


class PixelCartPole(gym.Wrapper):
    """CartPole-v1 whose observations are `[size, size, frames]` uint8 images: the latest
    `frames` drawings, newest last (one frame alone would not show the velocities).

    Rewards, terminations and the 500-step time limit are CartPole-v1's. `render()` (with
    `render_mode="rgb_array"`, as `rltrain eval video=true` asks) returns the newest frame as an
    enlarged RGB image. Other keyword arguments go to `gymnasium.make("CartPole-v1")`.
    Its state is CartPole's plus the uint8 frame stack, plain data both: `resume=` continues its
    episodes exactly (`rltrain/envs/snapshot.py` saves wrappers attribute by attribute).
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 50}

    def __init__(self, size: int = 40, frames: int = 3, render_mode: str | None = None,
                 **kwargs: Any):
        if size < 8 or frames < 1:
            raise ValueError(f"PixelCartPole needs size >= 8 and frames >= 1, got size={size}, "
                             f"frames={frames}")
        super().__init__(gym.make("CartPole-v1", **kwargs))
        self.size, self.frames = int(size), int(frames)
        self.observation_space = gym.spaces.Box(0, 255, (self.size, self.size, self.frames),
                                                np.uint8)
        self._render_mode = render_mode
        self.stack = np.zeros((self.size, self.size, self.frames), dtype=np.uint8)

    @property
    def render_mode(self) -> str | None:
        """`rgb_array` or None (CartPole's own pygame renderer is never used)."""
        return self._render_mode

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Reset CartPole; every frame of the stack shows its first state."""
        state, info = self.env.reset(seed=seed, options=options)
        self.stack[:] = draw_cartpole(state, self.size)[:, :, None]
        return self.stack.copy(), info

    def step(self, action: Any):
        """Step CartPole and push the new drawing onto the stack."""
        state, reward, terminated, truncated, info = self.env.step(action)
        self.stack[:, :, :-1] = self.stack[:, :, 1:]
        self.stack[:, :, -1] = draw_cartpole(state, self.size)
        return self.stack.copy(), reward, terminated, truncated, info

    def render(self) -> np.ndarray | None:
        """The newest frame as `[size*8, size*8, 3]` uint8 RGB, or None without `rgb_array`."""
        if self._render_mode != "rgb_array":
            return None
        big = self.stack[:, :, -1].repeat(RENDER_SCALE, 0).repeat(RENDER_SCALE, 1)
        return np.repeat(big[:, :, None], 3, axis=2)
