"""PixelCartPole: CartPole-v1 as a uint8 image; its VecEnv spec, and image rules of make_env."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rltrain.config.schema import EnvConfig
from rltrain.envs.make import make_env
from rltrain.envs.pixels import CART, POLE, PixelCartPole, draw_cartpole
from rltrain.errors import UserError

PIXEL_ID = "rltrain.envs.pixels:PixelCartPole"


def test_upright_centred_cartpole_is_drawn_in_the_middle_column():
    img = draw_cartpole(np.zeros(4), 41)
    assert img.dtype == np.uint8 and img.shape == (41, 41)
    pole_rows, pole_cols = np.nonzero(img == POLE)
    assert set(pole_cols.tolist()) == {20} and pole_rows.min() < 20  # straight up from the cart
    assert (img == CART).any() and set(np.unique(img).tolist()) == {0, CART, POLE}


def test_cart_moves_right_and_pole_leans_with_the_state():
    left, right = draw_cartpole(np.array([-1.0, 0, 0, 0]), 40), draw_cartpole(np.array([1.0, 0, 0, 0]), 40)
    assert np.nonzero(left == CART)[1].mean() < 20 < np.nonzero(right == CART)[1].mean()
    leaning = draw_cartpole(np.array([0.0, 0, 0.2, 0]), 40)
    rows, cols = np.nonzero(leaning == POLE)
    assert cols[rows.argmin()] > cols[rows.argmax()]  # θ > 0: the top of the pole is to the right


def test_observation_stacks_the_latest_frames_newest_last():
    env = PixelCartPole(size=40, frames=3)
    obs, _ = env.reset(seed=0)
    assert env.observation_space.shape == obs.shape == (40, 40, 3) and obs.dtype == np.uint8
    assert env.observation_space.contains(obs)
    assert (obs[:, :, 0] == obs[:, :, 2]).all()  # after reset every frame shows the first state
    frames = [obs[:, :, -1]]
    for _ in range(3):
        obs, reward, terminated, truncated, _ = env.step(1)
        frames.append(obs[:, :, -1])
        assert reward == 1.0
    assert all((obs[:, :, i] == frames[i + 1]).all() for i in range(3))
    assert not (frames[0] == frames[-1]).all()  # pushing right moved the cart
    state = env.unwrapped.state
    assert (obs[:, :, -1] == draw_cartpole(np.asarray(state), 40)).all()


def test_rgb_array_render_enlarges_the_newest_frame():
    env = PixelCartPole(size=40, render_mode="rgb_array")
    obs, _ = env.reset(seed=1)
    frame = env.render()
    assert env.render_mode == "rgb_array" and frame.shape == (320, 320, 3)
    assert (frame[::8, ::8, 1] == obs[:, :, -1]).all()
    assert PixelCartPole().render() is None


def test_vec_env_of_the_pixel_env_reports_uint8_pixels_and_keeps_them_uint8():
    env = make_env(EnvConfig(id=PIXEL_ID, num_envs=2), "cpu")
    try:
        assert env.spec.obs_shape == (40, 40, 3) and env.spec.pixels
        obs = env.reset(seed=0)
        assert obs.dtype == torch.uint8 and obs.shape == (2, 40, 40, 3) and obs.max() == 255
        res = env.step(torch.tensor([0, 1]))
        assert res.final_obs.shape == (2, 40, 40, 3)
        assert res.obs.dtype == res.final_obs.dtype == torch.uint8
    finally:
        env.close()
    vector = make_env(EnvConfig(id="CartPole-v1", num_envs=1), "cpu")
    assert not vector.spec.pixels and vector.reset(seed=0).dtype == torch.float32
    vector.close()


def test_normalize_obs_is_refused_for_image_observations():
    with pytest.raises(UserError, match=r"env.normalize_obs=true would normalize each pixel .*"
                                        r"\[40, 40, 3\].*set env.normalize_obs=false") as err:
        make_env(EnvConfig(id=PIXEL_ID, num_envs=1, normalize_obs=True), "cpu")
    assert "\n" not in str(err.value)


def test_env_kwargs_change_the_image_size_and_frame_count():
    env = make_env(EnvConfig(id=PIXEL_ID, num_envs=1, kwargs={"size": 48, "frames": 2}), "cpu")
    assert env.spec.obs_shape == (48, 48, 2)
    env.close()
