"""The Nature-DQN image encoder: channel order, pixel scaling, size limits; flat observations."""

from __future__ import annotations

import pytest
import torch

from rltrain.errors import UserError
from rltrain.nets.encoder import NatureCNN, encode, is_channels_last, make_encoder
from rltrain.nets.spec import NetSpec


def image_spec(shape: tuple[int, ...], pixels: bool = False) -> NetSpec:
    return NetSpec(shape, (16,), image=True, pixels=pixels, cnn_channels=(4, 8, 8), cnn_features=16)


@pytest.mark.parametrize("shape, last", [((40, 40, 3), True), ((3, 40, 40), False),
                                         ((84, 84, 12), True), ((4, 84, 84), False)])
def test_channel_axis_is_the_smaller_end(shape, last):
    assert is_channels_last(shape) is last


def test_channels_last_images_give_what_channels_first_gives_for_the_same_pixels():
    torch.manual_seed(0)
    first = NatureCNN(image_spec((3, 40, 40)))
    last = NatureCNN(image_spec((40, 40, 3)))
    last.load_state_dict(first.state_dict())
    chw = torch.rand(5, 3, 40, 40)
    out = first(chw)
    assert out.shape == (5, 16)
    torch.testing.assert_close(last(chw.permute(0, 2, 3, 1)), out)


def test_uint8_pixels_are_divided_by_255():
    torch.manual_seed(0)
    raw = NatureCNN(image_spec((3, 40, 40), pixels=False))
    scaled = NatureCNN(image_spec((3, 40, 40), pixels=True))
    scaled.load_state_dict(raw.state_dict())
    pixels = torch.randint(0, 256, (4, 3, 40, 40)).float()
    torch.testing.assert_close(scaled(pixels), raw(pixels / 255.0))


def test_nature_cnn_output_size_follows_the_image():
    cnn = NatureCNN(image_spec((3, 48, 40)))  # conv maps 11x9 -> 4x3 -> 2x1, 8 channels
    assert cnn.linear.in_features == 8 * 2 * 1


def test_image_smaller_than_the_convolutions_is_a_one_line_error():
    with pytest.raises(UserError, match=r"\[20, 20, 3\] are too small .* net.encoder=flatten") as err:
        NatureCNN(image_spec((20, 20, 3)))
    assert "\n" not in str(err.value)


def test_vector_observations_are_flattened_without_a_module():
    encoder, features = make_encoder(NetSpec((2, 3), (16,)))
    assert encoder is None and features == 6
    obs = torch.arange(12.0).reshape(2, 2, 3)
    assert torch.equal(encode(encoder, obs), obs.reshape(2, 6))


def test_cpu_channels_last_layout_computes_the_plain_nchw_network():
    """The NHWC layout used on CPU is an implementation detail: features and gradients equal the
    plain NCHW convolutions, flattened in (C, H, W) order, as checkpoints and exports assume."""
    torch.manual_seed(0)
    cnn = NatureCNN(image_spec((4, 48, 44), pixels=True))
    pixels = torch.randint(0, 256, (6, 4, 48, 44), dtype=torch.uint8)
    x = pixels.float().contiguous() / 255.0
    convs = [layer for layer in cnn.convs if isinstance(layer, torch.nn.Conv2d)]
    for conv in convs:
        x = torch.relu(torch.nn.functional.conv2d(x.contiguous(), conv.weight, conv.bias,
                                                  stride=conv.stride))
    expected = torch.relu(cnn.linear(x.contiguous().view(6, -1)))
    got = cnn(pixels)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)
    grad_got = torch.autograd.grad(got.square().sum(), convs[0].weight)[0]
    grad_expected = torch.autograd.grad(expected.square().sum(), convs[0].weight)[0]
    torch.testing.assert_close(grad_got, grad_expected, rtol=1e-4, atol=1e-6)
