"""A folder of images, one subfolder per class: `--dataset images:FOLDER[?size=HxW&channels=1|3...]`.

    flowers/daisy/001.png  flowers/daisy/002.jpg  flowers/tulip/a.bmp ...
    flowers/train/daisy/... flowers/test/daisy/...     (a split of its own: both levels)

Class names are the subfolder names, sorted (label i is the i-th name; `Dataset.class_names`
keeps the mapping). Files ending in .png, .jpg, .jpeg or .bmp (any case) are images, decoded
with Pillow; other files and hidden entries are ignored. Every image becomes one float32
HxWxC sample in [0, 1] (pixel / 255):

- **Size**: the model's input size when a model meets the data (`sample_shape`), else
  `size=HxW`, else the images' own size when they all share one; otherwise refused, naming
  files of each size. Images of another size are resized (bilinear, Pillow).
- **Channels**: the model's input channels, else `channels=1|3`, else 3 when any image has
  colour and 1 when all are grey. Grey is Pillow's ITU-R 601-2 luma (L = R*299/1000 +
  G*587/1000 + B*114/1000).
- **Split**: a folder with both `train/` and `test/` uses them (class names from `train/`;
  `test/` may lack a class but not add one); otherwise `test=` (default 0.2) of every class
  is held out, stratified and seeded by `split_seed=` (default 0), the same whatever `--seed`.
- `classes=0-4` and `corruption=NAME&severity=S` work as on the registry's images.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mcutrain.data.dataset import Dataset, DatasetError
from mcutrain.data.source_dataset import IMAGE_OPTIONS, SPLIT_OPTIONS, build, cached, check_classes, held_out
from mcutrain.data.source_spec import SourceSpec

SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp")
OPTIONS = ("size", "channels", *SPLIT_OPTIONS, *IMAGE_OPTIONS)
MAX_FILES = 1 << 20
"""Most image files one folder may hold (a guard against naming the wrong folder, e.g. `/`)."""


def _pillow():
    try:
        from PIL import Image
    except ImportError:
        raise DatasetError("image folders need Pillow: pip install Pillow") from None
    return Image


def _visible_dirs(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))


def class_folders(spec: SourceSpec, folder: Path) -> list[tuple[str, list[Path]]]:
    """(class name, its image files) per subfolder, sorted by name; refuses empty ones."""
    dirs = _visible_dirs(folder)
    if not dirs:
        raise DatasetError(f"dataset '{spec}': folder '{folder}' has no class subfolders; put the images "
                           "of each class in a subfolder named after it (FOLDER/cat/1.png, FOLDER/dog/2.png)")
    out = []
    for d in dirs:
        files = sorted(p for p in d.rglob("*") if p.suffix.lower() in SUFFIXES and p.is_file()
                       and not any(part.startswith(".") for part in p.relative_to(d).parts))
        if not files:
            raise DatasetError(f"dataset '{spec}': class folder '{d}' holds no PNG/JPEG/BMP images")
        out.append((d.name, files))
    if sum(len(f) for _, f in out) > MAX_FILES:
        raise DatasetError(f"dataset '{spec}': folder '{folder}' holds more than {MAX_FILES:,} images; "
                           "is it the right folder?")
    return out


def _probe(spec: SourceSpec, files: list[Path]) -> tuple[list[tuple[int, int]], bool]:
    """Each file's (H, W) from its header, and whether any has colour; undecodable files refused."""
    Image = _pillow()
    sizes, colour = [], False
    for f in files:
        try:
            with Image.open(f) as im:
                sizes.append((im.height, im.width))
                colour = colour or im.mode not in ("1", "L", "LA", "I", "I;16", "F")
        except (OSError, ValueError, Image.DecompressionBombError) as e:
            raise DatasetError(f"dataset '{spec}': cannot decode image '{f}' ({str(e)[:120]}); "
                               "replace or remove it") from None
    return sizes, colour


def target_shape(spec: SourceSpec, files: list[Path], sample_shape: tuple[int, ...] | None
                 ) -> tuple[int, int, int]:
    """(H, W, C) every image becomes (see the module docstring), refusing mixed sizes without one."""
    sizes, colour = _probe(spec, files)
    channels = spec.int_of("channels")
    size = spec.size_of("size")
    if sample_shape is not None:
        if len(sample_shape) != 3 or sample_shape[2] not in (1, 3):
            raise DatasetError(f"dataset '{spec}': the model takes samples of shape {tuple(sample_shape)}, "
                               "not H x W x 1 or 3 images")
        size, channels = (int(sample_shape[0]), int(sample_shape[1])), int(sample_shape[2])
    if channels is not None and channels not in (1, 3):
        raise DatasetError(f"dataset '{spec}': channels={channels}; images have 1 (grey) or 3 (RGB) channels")
    if size is None:
        distinct = sorted(set(sizes))
        if len(distinct) > 1:
            examples = "; ".join(f"{h}x{w}: '{files[sizes.index((h, w))]}'" for h, w in distinct[:3])
            raise DatasetError(f"dataset '{spec}': the images differ in size ({len(distinct)} sizes, e.g. "
                               f"{examples}); give size=HxW to resize them all (or use them with a model, "
                               "whose input size they are resized to)")
        size = distinct[0]
    return size[0], size[1], channels if channels is not None else (3 if colour else 1)


def decode(spec: SourceSpec, files: list[Path], shape: tuple[int, int, int]) -> np.ndarray:
    """uint8 (N, H, W, C) of `files`, each converted and resized to `shape` by Pillow."""
    Image = _pillow()
    h, w, c = shape
    out = np.empty((len(files), h, w, c), np.uint8)
    for i, f in enumerate(files):   # NOTE: one file per turn: decoding is Pillow's, per file
        try:
            with Image.open(f) as im:
                im = im.convert("L" if c == 1 else "RGB")
                if im.size != (w, h):
                    im = im.resize((w, h), Image.Resampling.BILINEAR)
                out[i] = np.asarray(im, np.uint8).reshape(h, w, c)
        except (OSError, ValueError, Image.DecompressionBombError) as e:
            raise DatasetError(f"dataset '{spec}': cannot decode image '{f}' ({str(e)[:120]}); "
                               "replace or remove it") from None
    return out


def _labelled(folders: list[tuple[str, list[Path]]], names: tuple[str, ...]) -> tuple[list[Path], np.ndarray]:
    files = [f for _, fs in folders for f in fs]
    labels = np.repeat([names.index(n) for n, _ in folders], [len(fs) for _, fs in folders])
    return files, labels.astype(np.int64)


def files_of(spec: SourceSpec) -> list[Path]:
    """Every image file the dataset reads (its identity for `--resume`)."""
    return _classes_and_files(spec, Path(spec.path))[1]


def _has_split(root: Path) -> bool:
    return (root / "train").is_dir() and (root / "test").is_dir()


def load_images(spec: SourceSpec, seed: int = 0, sample_shape: tuple[int, ...] | None = None) -> Dataset:
    """The Dataset of the image folder `spec.path` (see the module docstring)."""
    spec.refuse_unknown(OPTIONS)
    root = Path(spec.path)
    if not root.is_dir():
        what = "is not a folder" if root.exists() else "does not exist"
        raise DatasetError(f"dataset '{spec}': '{root}' {what}; images:FOLDER takes a folder with one "
                           "subfolder of images per class")
    names, files = _classes_and_files(spec, root)
    options = {k: v for k, v in spec.options.items() if k in ("size", "channels", *SPLIT_OPTIONS)}
    pix = cached(spec, files, [options, sample_shape], lambda: _decoded(spec, root, names, sample_shape))
    scale = np.float32(1.0 / 255.0)
    arrays = (pix["x_train"].astype(np.float32) * scale, pix["y_train"],
              pix["x_test"].astype(np.float32) * scale, pix["y_test"])
    return build(spec, arrays, names, f"image folder '{root}'", seed=seed)


def _classes_and_files(spec: SourceSpec, root: Path) -> tuple[tuple[str, ...], list[Path]]:
    """The class names and every image file, the folder's layout checked."""
    if _has_split(root):
        train, test = class_folders(spec, root / "train"), class_folders(spec, root / "test")
        names = tuple(n for n, _ in train)
        extra = [n for n, _ in test if n not in names]
        if extra:
            raise DatasetError(f"dataset '{spec}': test/ has classes {extra} that train/ lacks; give "
                               "train/ a folder for every test class")
        check_classes(spec, names, f"'{root / 'train'}'")
        return names, [f for _, fs in train + test for f in fs]
    folders = class_folders(spec, root)
    names = tuple(n for n, _ in folders)
    check_classes(spec, names, f"'{root}'")
    return names, [f for _, fs in folders for f in fs]


def _decoded(spec: SourceSpec, root: Path, names: tuple[str, ...],
             sample_shape: tuple[int, ...] | None) -> dict[str, np.ndarray]:
    """uint8 pixels and labels of both splits (see the module docstring)."""
    if _has_split(root):
        train, test = class_folders(spec, root / "train"), class_folders(spec, root / "test")
        (f_tr, y_tr), (f_te, y_te) = _labelled(train, names), _labelled(test, names)
        shape = target_shape(spec, f_tr + f_te, sample_shape)
        pix_tr, pix_te = decode(spec, f_tr, shape), decode(spec, f_te, shape)
    else:
        files, y = _labelled(class_folders(spec, root), names)
        shape = target_shape(spec, files, sample_shape)
        pix_tr, y_tr, pix_te, y_te = held_out(spec, decode(spec, files, shape), y)
    return {"x_train": pix_tr, "y_train": y_tr, "x_test": pix_te, "y_test": y_te}
