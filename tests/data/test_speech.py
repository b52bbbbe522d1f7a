"""`speech:` Speech Commands folders of 16 kHz WAV files (written with `wave`), their lists, refusals."""

from __future__ import annotations

import wave
from pathlib import Path

import numpy as np
import pytest

from mcutrain.data import DatasetError, load_dataset
from mcutrain.data.audio_features import FrontEnd


def write_wav(path: Path, samples: np.ndarray, rate: int = 16000, channels: int = 1) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with wave.open(str(path), "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(np.asarray(samples, "<i2").tobytes())


def tone(freq: float, n: int = 16000) -> np.ndarray:
    return (8000 * np.sin(2 * np.pi * freq * np.arange(n) / 16000)).astype(np.int16)


def write_speech(root: Path, words=("no", "yes"), per_word=5) -> None:
    """Word w's clips are tones at 500 * (w + 1) Hz (one 0.8 s, the rest 1 s), speakers s0.."""
    for k, word in enumerate(words):
        for i in range(per_word):
            write_wav(root / word / f"s{i}_nohash_0.wav", tone(500 * (k + 1), 12800 if i == 0 else 16000))
    write_wav(root / "_background_noise_" / "noise.wav", np.zeros(16000))


def test_words_become_classes_and_clips_logmel_features(tmp_path):
    write_speech(tmp_path / "sc")
    ds = load_dataset(f"speech:{tmp_path / 'sc'}")
    assert ds.class_names == ("no", "yes") and ds.shape == (49, 40, 1)
    assert (ds.n_train, ds.n_test) == (8, 2)
    fe = ds.preprocessing["front_end"]
    assert fe["features"] == "logmel" and (fe["window"], fe["stride"], fe["n_fft"]) == (480, 320, 512)
    # the louder mel band of a 500 Hz tone lies below that of a 1000 Hz tone
    peaks = ds.x_train[:, 10].argmax(axis=1)[:, 0]
    assert np.all(peaks[ds.y_train == 0] < peaks[ds.y_train == 1].min())


def test_features_equal_the_front_end_on_the_padded_clip(tmp_path):
    write_speech(tmp_path / "sc", per_word=2)
    (tmp_path / "sc" / "testing_list.txt").write_text("no/s1_nohash_0.wav\nyes/s1_nohash_0.wav\n")
    ds = load_dataset(f"speech:{tmp_path / 'sc'}?features=mfcc&mfcc=10")
    padded = np.zeros((2, 16000), np.int16)           # the training clips: s0, 0.8 s, zero-padded
    padded[0, :12800], padded[1, :12800] = tone(500, 12800), tone(1000, 12800)
    want = FrontEnd(mfcc=10).features(padded)
    got = ds.x_train[np.argsort(ds.y_train)]
    assert ds.shape == (49, 10, 1) and np.allclose(got, want, atol=1e-4)


def test_testing_list_is_the_test_split_and_validation_is_left_out(tmp_path):
    write_speech(tmp_path / "sc")
    (tmp_path / "sc" / "testing_list.txt").write_text("yes/s3_nohash_0.wav\nno/s4_nohash_0.wav\n")
    (tmp_path / "sc" / "validation_list.txt").write_text("yes/s2_nohash_0.wav\n")
    ds = load_dataset(f"speech:{tmp_path / 'sc'}")
    assert (ds.n_train, ds.n_test) == (7, 2) and sorted(ds.y_test.tolist()) == [0, 1]
    assert "testing_list.txt" in ds.source


def test_words_option_picks_words(tmp_path):
    write_speech(tmp_path / "sc", words=("go", "no", "yes"))
    ds = load_dataset(f"speech:{tmp_path / 'sc'}?words=yes,go")
    assert ds.class_names == ("go", "yes")
    with pytest.raises(DatasetError, match=r"no word folder \['up'\]"):
        load_dataset(f"speech:{tmp_path / 'sc'}?words=up,go")


@pytest.mark.parametrize("case, message", [
    ("stereo", r"'.*yes/bad\.wav' is 2 channel\(s\), 16-bit, 16000 Hz"),
    ("8 kHz", r"'.*yes/bad\.wav' is 1 channel\(s\), 16-bit, 8000 Hz"),
    ("not a wav", r"cannot read '.*yes/bad\.wav' as WAV"),
    ("empty word", r"word folder '.*up' holds no \.wav files"),
    ("one word", "holds only the class 'yes'"),
])
def test_bad_folders_are_refused_naming_the_file(tmp_path, case, message):
    root = tmp_path / "sc"
    write_speech(root, words=("yes",) if case == "one word" else ("no", "yes"))
    bad = root / "yes" / "bad.wav"
    if case == "stereo":
        write_wav(bad, np.zeros(32000), channels=2)
    elif case == "8 kHz":
        write_wav(bad, np.zeros(8000), rate=8000)
    elif case == "not a wav":
        bad.write_bytes(b"RIFF....WAVEjunk")
    elif case == "empty word":
        (root / "up").mkdir()
    with pytest.raises(DatasetError, match=message):
        load_dataset(f"speech:{root}")


def test_bad_front_end_options_are_refused(tmp_path):
    write_speech(tmp_path / "sc")
    with pytest.raises(DatasetError, match="features=stft"):
        load_dataset(f"speech:{tmp_path / 'sc'}?features=stft")
    with pytest.raises(DatasetError, match="mfcc= goes with features=mfcc"):
        load_dataset(f"speech:{tmp_path / 'sc'}?mfcc=5")
    with pytest.raises(DatasetError, match="mfcc at most mels"):
        load_dataset(f"speech:{tmp_path / 'sc'}?features=mfcc&mfcc=50")


def test_features_are_cached_per_front_end(tmp_path, monkeypatch):
    from mcutrain.data import speech

    write_speech(tmp_path / "sc")
    logmel = load_dataset(f"speech:{tmp_path / 'sc'}")
    monkeypatch.setattr(speech, "read_wav", lambda *a: (_ for _ in ()).throw(AssertionError("read again")))
    assert np.array_equal(load_dataset(f"speech:{tmp_path / 'sc'}").x_test, logmel.x_test)
    with pytest.raises(AssertionError, match="read again"):
        load_dataset(f"speech:{tmp_path / 'sc'}?features=mfcc")
