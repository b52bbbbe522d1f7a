"""The keyword-spotting front end: 16 kHz audio -> log-mel or MFCC frames, numpy, vectorized.

Every figure is a field of `FrontEnd` and written into `Dataset.preprocessing` so a C
runtime can compute the same features on the device (the steps are the plain textbook ones,
in this order, with no hidden normalization):

1. int16 samples / 32768 -> float in [-1, 1); a clip is cut or zero-padded to `clip_samples`.
2. Frames of `window` samples every `stride` samples (no padding): 1 + (clip - window) // stride.
3. Each frame times a periodic Hann window, w[n] = 0.5 - 0.5 cos(2 pi n / window).
4. Power spectrum |rfft(frame, n_fft)|^2 over n_fft / 2 + 1 bins.
5. `mels` triangular filters, equally spaced on the HTK mel scale
   (mel = 2595 log10(1 + f / 700)) from `f_min` to `f_max`, peak 1 (not area-normalized).
6. log(energy + `log_floor`) (natural log) -> log-mel features.
7. MFCC only: the orthonormal DCT-II of the log-mel vector, keeping the first `mfcc` terms.

A sample is (frames, features, 1): time down the rows, like an image for the 2-D conv models.

Example:
    >>> fe = FrontEnd()
    >>> fe.features(np.zeros((2, 16000), np.int16)).shape
    (2, 49, 40, 1)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

CHUNK = 256
"""Clips per chunk: bounds the spectra in memory (chunk x frames x bins complex numbers)."""


@dataclass(frozen=True)
class FrontEnd:
    """The parameters of the front end (see the module docstring); defaults are the Speech
    Commands keyword-spotting setting: 1 s at 16 kHz, 30 ms windows every 20 ms, 40 mels."""

    sample_rate: int = 16000
    clip_samples: int = 16000
    window: int = 480
    stride: int = 320
    n_fft: int = 512
    mels: int = 40
    f_min: float = 20.0
    f_max: float = 8000.0
    log_floor: float = 1e-6
    mfcc: int = 0          # 0: log-mel features; N > 0: the first N MFCCs

    @property
    def frames(self) -> int:
        return 1 + (self.clip_samples - self.window) // self.stride

    @property
    def n_features(self) -> int:
        return self.mfcc or self.mels

    def to_dict(self) -> dict:
        return {"features": "mfcc" if self.mfcc else "logmel", **asdict(self)}

    def check(self) -> None:
        """ValueError naming a parameter that makes no front end."""
        if not 0 < self.window <= self.clip_samples or self.stride < 1:
            raise ValueError(f"window {self.window} and stride {self.stride} must be positive, the window "
                             f"at most the clip's {self.clip_samples} samples")
        if self.n_fft < self.window:
            raise ValueError(f"n_fft {self.n_fft} is shorter than the window {self.window}")
        if not 0 <= self.f_min < self.f_max <= self.sample_rate / 2:
            raise ValueError(f"mel range {self.f_min}..{self.f_max} Hz must lie in 0..{self.sample_rate / 2}")
        if self.mels < 1 or not 0 <= self.mfcc <= self.mels:
            raise ValueError(f"mels={self.mels} and mfcc={self.mfcc}: at least one mel, mfcc at most mels")

    def features(self, clips: np.ndarray) -> np.ndarray:
        """float32 (N, frames, features, 1) of int16 clips (N, clip_samples)."""
        self.check()
        out = np.empty((len(clips), self.frames, self.n_features, 1), np.float32)
        window, bank = hann(self.window), mel_bank(self)
        dct = dct_matrix(self.mels, self.mfcc) if self.mfcc else None
        for start in range(0, len(clips), CHUNK):
            audio = clips[start:start + CHUNK].astype(np.float64) / 32768.0
            frames = np.lib.stride_tricks.sliding_window_view(audio, self.window, axis=1)[:, ::self.stride]
            power = np.abs(np.fft.rfft(frames * window, n=self.n_fft, axis=-1)) ** 2
            logmel = np.log(power @ bank + self.log_floor)
            feats = logmel @ dct if dct is not None else logmel
            out[start:start + CHUNK, :, :, 0] = feats
        return out


def hann(n: int) -> np.ndarray:
    """The periodic Hann window of `n` samples."""
    return 0.5 - 0.5 * np.cos(2.0 * np.pi * np.arange(n) / n)


def hz_to_mel(f):
    return 2595.0 * np.log10(1.0 + np.asarray(f, np.float64) / 700.0)


def mel_to_hz(m):
    return 700.0 * (10.0 ** (np.asarray(m, np.float64) / 2595.0) - 1.0)


def mel_bank(fe: FrontEnd) -> np.ndarray:
    """(n_fft / 2 + 1, mels) triangular filters on the HTK mel scale, peak 1 at each centre."""
    edges = mel_to_hz(np.linspace(hz_to_mel(fe.f_min), hz_to_mel(fe.f_max), fe.mels + 2))
    bins = np.arange(fe.n_fft // 2 + 1) * fe.sample_rate / fe.n_fft
    lo, mid, hi = edges[:-2], edges[1:-1], edges[2:]
    rising = (bins[:, None] - lo) / (mid - lo)
    falling = (hi - bins[:, None]) / (hi - mid)
    return np.clip(np.minimum(rising, falling), 0.0, None)


def dct_matrix(n: int, keep: int) -> np.ndarray:
    """(n, keep) orthonormal DCT-II: log-mel row vector @ matrix = its first `keep` coefficients."""
    k, i = np.arange(keep), np.arange(n)
    m = np.cos(np.pi / n * (i[:, None] + 0.5) * k[None, :]) * np.sqrt(2.0 / n)
    m[:, 0] /= np.sqrt(2.0)
    return m
