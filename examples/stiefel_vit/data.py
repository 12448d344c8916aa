"""scikit-learn's 8×8 handwritten digits as sequences of image patches.

``sklearn.datasets.load_digits`` ships with scikit-learn (1797 images, 10 classes, grey levels
0–16): nothing is downloaded. Images are scaled to [0, 1], split 75/25 into train and test sets,
stratified by class with a fixed seed, and cut into non-overlapping ``p × p`` patches, each a token
of ``p²`` pixels in row-major order: ``(n, (8/p)², p²)``.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["Digits", "load_digits", "patchify"]

IMAGE_SIZE = 8
N_CLASSES = 10


class Digits(NamedTuple):
    """Train and test patches ``(n, tokens, patch_pixels)`` (float32) and labels ``(n,)`` (int32)."""

    train_x: np.ndarray
    train_y: np.ndarray
    test_x: np.ndarray
    test_y: np.ndarray


def patchify(images: np.ndarray, patch: int) -> np.ndarray:
    """Cut ``(n, s, s)`` images into ``(n, (s/patch)², patch²)`` tokens, row-major over patches."""
    n, s, _ = images.shape
    if s % patch:
        raise ValueError(f"patchify: `patch` must divide the image size {s}; got {patch}.")
    k = s // patch
    return images.reshape(n, k, patch, k, patch).transpose(0, 1, 3, 2, 4).reshape(n, k * k, patch * patch)


def load_digits(patch: int = 2, test_fraction: float = 0.25, split_seed: int = 0) -> Digits:
    """The digits as patch sequences, split into train and test sets (see the module docstring)."""
    from sklearn.datasets import load_digits as sklearn_digits
    from sklearn.model_selection import train_test_split

    bunch = sklearn_digits()
    images = (bunch.images / 16.0).astype(np.float32)
    labels = bunch.target.astype(np.int32)
    train_x, test_x, train_y, test_y = train_test_split(
        images, labels, test_size=test_fraction, stratify=labels, random_state=split_seed)
    return Digits(patchify(train_x, patch), train_y, patchify(test_x, patch), test_y)
