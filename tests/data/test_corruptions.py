"""Every corruption: shape, dtype, range, monotone severity, determinism; exact checks for simple ones."""

import numpy as np
import pytest

from mcutrain.data import CORRUPTIONS, CorruptionError, corrupt
from mcutrain.data import corruptions as C
from mcutrain.data.corrupt_pixel import BRIGHTNESS_SHIFT, CONTRAST_FACTOR

# Corruptions whose output does not depend on the seed (no random draws).
DETERMINISTIC = {"gaussian_blur", "defocus_blur", "zoom_blur", "contrast", "brightness", "pixelate",
                 "jpeg_compression", "scale"}


def rms(a, b):
    return float(np.sqrt(((a - b) ** 2).mean()))


def test_at_least_the_listed_corruptions():
    wanted = {"gaussian_noise", "shot_noise", "impulse_noise", "speckle_noise", "gaussian_blur",
              "defocus_blur", "motion_blur", "zoom_blur", "contrast", "brightness", "pixelate",
              "jpeg_compression", "rotate", "shear", "scale", "translate", "fog", "stripe", "zigzag",
              "dotted_line", "elastic_transform", "spatter"}
    assert wanted <= set(CORRUPTIONS)
    assert len(CORRUPTIONS) == len(set(CORRUPTIONS)) >= 22


@pytest.mark.parametrize("name", CORRUPTIONS)
@pytest.mark.parametrize("images", ["digits28", "rgb28"])
def test_severity_5_moves_further_than_1(name, images, request):
    x = request.getfixturevalue(images)
    out = {s: corrupt(x, name, s, seed=3) for s in (1, 5)}
    for y in out.values():
        assert y.shape == x.shape and y.dtype == np.float32
        assert y.min() >= 0.0 and y.max() <= 1.0
    assert rms(out[5], x) > rms(out[1], x) > 0.0


@pytest.mark.parametrize("name", CORRUPTIONS)
def test_small_images_and_determinism(name, digits28):
    small = digits28[:, ::4, ::4]             # 7x7 images still work
    y = corrupt(small, name, 3, seed=1)
    assert y.shape == small.shape and y.dtype == np.float32
    a = corrupt(digits28, name, 4, seed=11)
    b = corrupt(digits28, name, 4, seed=11)
    assert np.array_equal(a, b)
    if name not in DETERMINISTIC:
        assert not np.array_equal(a, corrupt(digits28, name, 4, seed=12))


def test_chunks_are_deterministic_and_independent_of_batch_boundaries(digits28, monkeypatch):
    monkeypatch.setattr(C, "CHUNK", 7)
    a = corrupt(digits28, "gaussian_noise", 2, seed=5)
    assert np.array_equal(a, corrupt(digits28, "gaussian_noise", 2, seed=5))
    # the first chunk only depends on its own images
    assert np.array_equal(a[:7], corrupt(digits28[:7], "gaussian_noise", 2, seed=5))


def test_streams_differ(digits28):
    a = corrupt(digits28, "shot_noise", 3, seed=0, stream=0)
    b = corrupt(digits28, "shot_noise", 3, seed=0, stream=1)
    assert not np.array_equal(a, b)


def test_severity_zero_is_a_clean_copy(digits28):
    y = corrupt(digits28, "fog", 0, seed=0)
    assert np.array_equal(y, digits28) and y is not digits28


def test_contrast_and_brightness_exact():
    x = np.array([0.0, 0.2, 0.4, 1.0], np.float32).reshape(1, 2, 2, 1)
    x = np.tile(x, (1, 2, 2, 1))
    mean = x.mean()
    want_contrast = (x - mean) * CONTRAST_FACTOR[1] + mean
    np.testing.assert_allclose(corrupt(x, "contrast", 2, 0), want_contrast, atol=1e-6)
    want_bright = np.minimum(x + BRIGHTNESS_SHIFT[2], 1)
    np.testing.assert_allclose(corrupt(x, "brightness", 3, 0), want_bright, atol=1e-6)
    rgb = np.zeros((1, 4, 4, 3), np.float32)
    rgb[..., 0] = 0.5                          # pure dark red stays red, only brighter
    y = corrupt(rgb, "brightness", 1, 0)
    np.testing.assert_allclose(y[..., 0], 0.6, atol=1e-6)
    np.testing.assert_allclose(y[..., 1:], 0.0, atol=1e-6)


def test_translate_is_an_exact_integer_shift_with_zero_fill(digits28):
    y = corrupt(digits28, "translate", 2, seed=9)          # 2 pixels along both axes at 28x28
    _, h, w, _ = digits28.shape
    pad = np.pad(digits28, ((0, 0), (2, 2), (2, 2), (0, 0)))
    shifts = [pad[:, 2 + dy:2 + dy + h, 2 + dx:2 + dx + w] for dy in (-2, 2) for dx in (-2, 2)]
    match = np.stack([np.abs(y - s).max(axis=(1, 2, 3)) < 1e-5 for s in shifts])
    assert match.any(axis=0).all()


def test_stripe_inverts_border_bands_exactly(digits28):
    y = corrupt(digits28, "stripe", 5, seed=0)             # bands of 7 pixels, MNIST-C's setting
    cols = np.zeros((28, 28), bool)
    cols[:, :7] = cols[:, 21:] = True
    for img, out in zip(digits28[..., 0], y[..., 0]):
        assert any(np.allclose(out, np.where(m, 1 - img, img)) for m in (cols, cols.T))


def test_impulse_noise_sets_pixels_to_0_or_1(digits28):
    y = corrupt(digits28, "impulse_noise", 5, seed=0)
    changed = y != digits28
    assert np.isin(y[changed], [0.0, 1.0]).all()
    assert 0.15 < changed.mean() < 0.3                     # 27 % drawn, some already 0


@pytest.mark.parametrize("bad, match", [
    (np.zeros((28, 28, 1), np.float32), "NHWC"),
    (np.zeros((1, 28, 28, 2), np.float32), "channels"),
    (np.full((1, 28, 28, 1), 255, np.float32), r"\[0, 1\]"),
    (np.zeros((1, 1, 40, 1), np.float32), "too small"),
])
def test_bad_images_are_refused(bad, match):
    with pytest.raises(CorruptionError, match=match):
        corrupt(bad, "fog", 1, 0)


def test_bad_names_and_severities_are_refused(digits28):
    with pytest.raises(CorruptionError, match="known: gaussian_noise"):
        corrupt(digits28, "snowstorm", 1, 0)
    with pytest.raises(CorruptionError, match=r"0\.\.5"):
        corrupt(digits28, "fog", 6, 0)
    with pytest.raises(CorruptionError, match="non-negative"):
        corrupt(digits28, "fog", 1, -1)
