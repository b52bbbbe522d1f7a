"""Speech Commands as it comes on disk: `speech:FOLDER[?words=yes,no&features=mfcc...]`.

FOLDER holds one subfolder of 16 kHz mono 16-bit WAV files per word (`yes/0a7c2a8d_nohash_0.wav`)
and, in the published set, `validation_list.txt` and `testing_list.txt` (paths such as
`yes/0a7c2a8d_nohash_0.wav`, one per line). Folders whose name starts with `_`
(`_background_noise_`) are not words. WAV files are read with the standard library's `wave`.

- **Words**: every word folder, sorted (label i is the i-th word), or `words=yes,no,up`
  (kept in that sorted order too).
- **Split**: with `testing_list.txt`, its files are the test split and the files of
  `validation_list.txt` are left out of both splits (they are for choosing a model, and
  keeping them out keeps the published test protocol); without it, `test=` (default 0.2)
  of every word is held out, stratified, seeded by `split_seed=` (default 0) -- note that
  the published lists keep each speaker on one side, a random split does not.
- **Features** (`mcutrain.data.audio_features`): `features=logmel` (default, `mels=40`) or
  `features=mfcc` (`mfcc=13` coefficients of `mels=40`), over `window_ms=30` windows every
  `stride_ms=20`; a clip is cut or zero-padded to 1 s. The parameters are kept in
  `Dataset.preprocessing["front_end"]` for a device to mirror.
"""

from __future__ import annotations

import wave
from pathlib import Path

import numpy as np

from mcutrain.data.audio_features import FrontEnd
from mcutrain.data.dataset import Dataset, DatasetError
from mcutrain.data.source_dataset import SPLIT_OPTIONS, build, cached, check_classes, held_out
from mcutrain.data.source_spec import SourceSpec

OPTIONS = ("words", "features", "mels", "mfcc", "window_ms", "stride_ms", "classes", *SPLIT_OPTIONS)
RATE = 16000
LISTS = ("validation_list.txt", "testing_list.txt")


def word_files(spec: SourceSpec) -> list[tuple[str, list[Path]]]:
    """(word, its WAV files) for the chosen words, sorted by word."""
    root = Path(spec.path)
    if not root.is_dir():
        what = "is not a folder" if root.exists() else "does not exist"
        raise DatasetError(f"dataset '{spec}': '{root}' {what}; speech:FOLDER takes a folder with one "
                           "subfolder of WAV files per word")
    words = sorted(p.name for p in root.iterdir() if p.is_dir() and p.name[:1] not in "_.")
    chosen = spec.list_of("words")
    if chosen is not None:
        missing = [w for w in chosen if w not in words]
        if missing:
            raise DatasetError(f"dataset '{spec}': no word folder {missing} (words: "
                               f"{', '.join(words)[:300]})")
        words = sorted(set(chosen))
    out = []
    for w in words:
        files = sorted(p for p in (root / w).glob("*.wav") if p.is_file())
        if not files:
            raise DatasetError(f"dataset '{spec}': word folder '{root / w}' holds no .wav files")
        out.append((w, files))
    check_classes(spec, tuple(words), f"'{root}'")
    return out


def files_of(spec: SourceSpec) -> list[Path]:
    """Every WAV file and list the dataset reads (its identity for `--resume`)."""
    root = Path(spec.path)
    return [f for _, fs in word_files(spec) for f in fs] + [root / n for n in LISTS if (root / n).is_file()]


def read_wav(spec: SourceSpec, path: Path, samples: int) -> np.ndarray:
    """int16 samples of a 16 kHz mono 16-bit WAV, cut or zero-padded to `samples`."""
    try:
        with wave.open(str(path), "rb") as w:
            fmt = (w.getnchannels(), w.getsampwidth(), w.getframerate())
            if fmt != (1, 2, RATE):
                raise DatasetError(f"dataset '{spec}': '{path}' is {fmt[0]} channel(s), {8 * fmt[1]}-bit, "
                                   f"{fmt[2]} Hz; Speech Commands clips are mono 16-bit 16 kHz (convert it, "
                                   "e.g. sox IN -r 16000 -c 1 -b 16 OUT)")
            raw = w.readframes(samples)
    except (wave.Error, EOFError, OSError) as e:
        raise DatasetError(f"dataset '{spec}': cannot read '{path}' as WAV ({str(e)[:120]})") from None
    clip = np.zeros(samples, np.int16)
    data = np.frombuffer(raw[:len(raw) // 2 * 2], "<i2")
    clip[:len(data)] = data
    return clip


def front_end(spec: SourceSpec) -> FrontEnd:
    """The FrontEnd the options ask for, checked."""
    kind = spec.text_of("features", "logmel")
    if kind not in ("logmel", "mfcc"):
        raise DatasetError(f"dataset '{spec}': features={kind}; write features=logmel or features=mfcc")
    if kind == "logmel" and "mfcc" in spec.options:
        raise DatasetError(f"dataset '{spec}': mfcc= goes with features=mfcc")
    window, stride = spec.int_of("window_ms", 30), spec.int_of("stride_ms", 20)
    fe = FrontEnd(window=window * RATE // 1000, stride=stride * RATE // 1000,
                  n_fft=1 << max(0, int(window * RATE // 1000 - 1).bit_length()),
                  mels=spec.int_of("mels", 40), mfcc=spec.int_of("mfcc", 13) if kind == "mfcc" else 0)
    try:
        fe.check()
    except ValueError as e:
        raise DatasetError(f"dataset '{spec}': {e}") from None
    return fe


def _list(root: Path, name: str) -> set[str]:
    path = root / name
    if not path.is_file():
        return set()
    lines = path.read_text(errors="replace").splitlines()
    return {line.strip().replace("\\", "/") for line in lines if line.strip()}


def load_speech(spec: SourceSpec, seed: int = 0, sample_shape: tuple[int, ...] | None = None) -> Dataset:
    """The Dataset of features of the Speech Commands folder `spec.path` (see the module docstring)."""
    spec.refuse_unknown(OPTIONS)
    fe = front_end(spec)
    root = Path(spec.path)
    folders = word_files(spec)
    names = tuple(w for w, _ in folders)
    lists = [root / n for n in LISTS if (root / n).is_file()]
    options = {k: v for k, v in spec.options.items() if k in ("words", *SPLIT_OPTIONS)}
    arrays = cached(spec, [f for _, fs in folders for f in fs] + lists, [options, fe.to_dict()],
                    lambda: _features(spec, fe, folders))
    testing = bool(_list(root, LISTS[1]))
    split = "testing_list.txt" if testing else "a held-out stratified split"
    return build(spec, (arrays["x_train"], arrays["y_train"], arrays["x_test"], arrays["y_test"]), names,
                 f"Speech Commands WAV files in '{root}' ({split})", seed=seed, images=False,
                 preprocessing={"front_end": fe.to_dict()})


def _features(spec: SourceSpec, fe: FrontEnd, folders: list[tuple[str, list[Path]]]) -> dict[str, np.ndarray]:
    """Features and labels of both splits (see the module docstring)."""
    root = Path(spec.path)
    files = [f for _, fs in folders for f in fs]
    y = np.repeat(np.arange(len(folders)), [len(fs) for _, fs in folders]).astype(np.int64)
    clips = np.stack([read_wav(spec, f, fe.clip_samples) for f in files]) if files else np.empty((0, 0))
    x = fe.features(clips)
    testing = _list(root, LISTS[1])
    if testing:
        rel = np.array([f"{f.parent.name}/{f.name}" for f in files])
        test = np.isin(rel, sorted(testing))
        train = ~test & ~np.isin(rel, sorted(_list(root, LISTS[0])))
        if not test.any() or not train.any():
            side = "test" if not test.any() else "training"
            raise DatasetError(f"dataset '{spec}': with '{root / LISTS[1]}' the {side} split of these words "
                               "is empty; list some of their files in it (or remove it)")
        parts = (x[train], y[train], x[test], y[test])
    else:
        parts = held_out(spec, x, y)
    return dict(zip(("x_train", "y_train", "x_test", "y_test"), parts))
