"""The log-mel / MFCC front end: its filters, its DCT, a tone's band, and chunking that changes nothing."""

import numpy as np
import pytest
from scipy.fft import dct

from mcutrain.data import audio_features as af
from mcutrain.data.audio_features import FrontEnd


def test_mel_scale_round_trips_and_filters_peak_at_their_centres():
    f = np.array([0.0, 300.0, 1000.0, 7999.0])
    assert np.allclose(af.mel_to_hz(af.hz_to_mel(f)), f)
    fe = FrontEnd()
    bank = af.mel_bank(fe)
    assert bank.shape == (257, 40) and bank.min() == 0.0 and np.all(bank.max(axis=0) <= 1.0)
    assert np.all(np.diff(bank.argmax(axis=0)) >= 0)      # centres rise with the filter index


def test_dct_matrix_is_scipys_orthonormal_dct_ii():
    x = np.random.default_rng(0).standard_normal((3, 40))
    assert np.allclose(x @ af.dct_matrix(40, 13), dct(x, type=2, norm="ortho", axis=1)[:, :13])


@pytest.mark.parametrize("freq", [300.0, 1000.0, 4000.0])
def test_a_tone_lands_in_the_mel_band_around_its_frequency(freq):
    fe = FrontEnd()
    clip = (10000 * np.sin(2 * np.pi * freq * np.arange(16000) / 16000)).astype(np.int16)
    band = int(fe.features(clip[None])[0, 20, :, 0].argmax())
    edges = af.mel_to_hz(np.linspace(af.hz_to_mel(fe.f_min), af.hz_to_mel(fe.f_max), fe.mels + 2))
    assert edges[band] <= freq <= edges[band + 2]


def test_chunks_give_the_same_features_as_one_clip_at_a_time(monkeypatch):
    clips = np.random.default_rng(1).integers(-3000, 3000, (7, 16000)).astype(np.int16)
    whole = FrontEnd(mfcc=13).features(clips)
    monkeypatch.setattr(af, "CHUNK", 3)
    chunked = FrontEnd(mfcc=13).features(clips)
    assert whole.shape == (7, 49, 13, 1) and np.allclose(whole, chunked, atol=1e-5)


def test_bad_parameters_are_refused():
    with pytest.raises(ValueError, match="n_fft 256 is shorter than the window 480"):
        FrontEnd(n_fft=256).check()
    with pytest.raises(ValueError, match="mel range"):
        FrontEnd(f_max=9000.0).check()
