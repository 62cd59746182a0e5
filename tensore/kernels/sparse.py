"""2:4 structured sparsity through MatmulSparse (seed 000 section 9): of every 4 consecutive
contraction indices of a weight column, 2 are kept.  Array row 2g + i holds the i-th kept weight of
group g and a tag (its index in the group); SBUF partitions 2g and 2g + 1 both hold the group's 4
moving rows as 4 fmaps, and PE (r, c) multiplies the fmap its tag selects, so one array row pair
covers 4 contraction indices: a K tile is 2R (docs/kernels.md, D-T50)."""
from __future__ import annotations

import numpy as np

GROUP, KEEP = 4, 2


def prune(values: np.ndarray) -> np.ndarray:
    """Keep mask [K, N] (K a multiple of 4): the 2 largest magnitudes of each group of 4 along K
    (the earlier index on ties)."""
    k, n = values.shape
    g = np.abs(values).reshape(k // GROUP, GROUP, n)
    order = np.argsort(-g, axis=1, kind="stable")[:, :KEEP]          # [groups, 2, N]
    keep = np.zeros(g.shape, bool)
    np.put_along_axis(keep, order, True, axis=1)
    return keep.reshape(k, n)


def compress(codes: np.ndarray, keep: np.ndarray):
    """Dense [K, N] codes and keep mask -> (weights [K / 2, N], tags [K / 2, N]): row 2g + i is the
    i-th kept index of group g (in K order), its tag the index inside the group."""
    k, n = codes.shape
    idx = np.sort(np.argsort(~keep.reshape(k // GROUP, GROUP, n), axis=1, kind="stable")[:, :KEEP], axis=1)
    w = np.take_along_axis(codes.reshape(k // GROUP, GROUP, n), idx, axis=1)
    return w.reshape(k // 2, n), idx.reshape(k // 2, n)


def moving_fmaps(codes_km: np.ndarray) -> np.ndarray:
    """A^T codes [K, M] -> [K / 2, 4, M]: rows 2g and 2g + 1 both carry group g's 4 rows as fmaps."""
    k, m = codes_km.shape
    return np.repeat(codes_km.reshape(k // GROUP, GROUP, m), KEEP, axis=0)


def tag_words(tags: np.ndarray) -> np.ndarray:
    """Tags [rows, cols] of physical columns 0..cols-1 (FIRST_COL_FIRST weights) -> LdTags u16 words
    [rows, ceil(cols / 4)]: logical tag m lands in physical column cols - 1 - m (LdTags loads
    LAST_COL_FIRST), 4 per word with the larger logical column in the low nibble."""
    rows, cols = tags.shape
    logical = tags[:, ::-1]
    words = np.zeros((rows, -(-cols // 4)), np.uint16)
    for m in range(cols):
        words[:, m // 4] |= (logical[:, m].astype(np.uint16) << (4 * (3 - m % 4))).astype(np.uint16)
    return words
