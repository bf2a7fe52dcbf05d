"""Coarse buckets of groups, so routing in a large tenant reads a few buckets, not every kept row.

Exact search compares a request with every row the routing index keeps: groups x per_group rows.
The cap bounds the rows per group, not the number of groups, and a workload that keeps bringing new
computations grows its groups with its history (10,000 groups of 10 rows: 21 ms per request on this
machine, 150 MB of floats read each time). Past ``exact_rows`` kept rows the index searches like an
inverted file whose lists are groups:

* each group is summarized by the mean of its kept vectors; the means are clustered into about
  sqrt(groups) buckets by a few rounds of spherical k-means (seeded: the same groups give the same
  buckets in every process);
* a request is compared with the bucket centres, then with the means of the groups in its
  ``probes`` nearest buckets (about probes x sqrt(groups) vectors, sub-linear in the groups), then
  exactly with the kept rows of the ``top`` groups whose means are nearest;
* a group created after the buckets were made joins its nearest bucket; the buckets are made again
  once the groups have doubled (an O(groups^1.5 x width) step on the request that finds them
  doubled, so its cost per request stays sub-linear).

It is approximate: a request whose nearest row sits in a group of an unprobed bucket is routed to
the best group of the probed ones, or starts a new group. Groups are tight by construction (a
request joins one only at cosine >= the routing threshold), so a group lies near its mean, and its
mean near its bucket's centre. A group's mean is taken when the buckets are made or when it joins
them, and is not moved as the group's kept rows change until they are made again.
"""

from __future__ import annotations

import math

import numpy as np

PROBES = 8  # buckets searched per request
ROUNDS = 4  # k-means rounds when the buckets are made
TRAIN = 4096  # group means the centres are trained on (all of them are then assigned)
TOP_GROUPS = 16  # groups, by mean, whose kept rows a request is compared with


def _unit(m: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(m, axis=-1, keepdims=True)
    return (m / np.where(norms > 0, norms, 1.0)).astype(np.float32)


class GroupPartition:
    """Buckets of groups around unit centres. Each bucket keeps its groups' unit mean vectors in one
    matrix, so a probed bucket costs one contiguous product, and its groups in insertion order (never
    a set's hash order: two processes probe and break ties the same way)."""

    def __init__(
        self, centres: np.ndarray, groups: list[str], means: np.ndarray, buckets: np.ndarray
    ) -> None:
        self.centres = centres
        self.members: list[list[str]] = [[] for _ in range(len(centres))]
        self._vectors: list[list[np.ndarray]] = [[] for _ in range(len(centres))]
        self._stacked: list[np.ndarray | None] = [None] * len(centres)
        self.bucket_of: dict[str, int] = {}
        for group_id, mean, b in zip(groups, means, buckets.tolist(), strict=True):
            self._join(group_id, mean, b)
        self.built_for = len(groups)  # groups when made: made again when they double

    def _join(self, group_id: str, mean: np.ndarray, b: int) -> None:
        self.members[b].append(group_id)
        self._vectors[b].append(mean)
        self._stacked[b] = None
        self.bucket_of[group_id] = b

    @classmethod
    def build(cls, groups: list[str], means: np.ndarray, seed: int = 0) -> GroupPartition:
        """Spherical k-means on (a seeded sample of) the group means, then every group assigned."""
        means = _unit(means)
        k = max(1, math.isqrt(len(groups)))
        rng = np.random.default_rng(seed)
        train = (
            means
            if len(means) <= TRAIN
            else means[np.sort(rng.choice(len(means), TRAIN, replace=False))]
        )
        centres = train[np.sort(rng.choice(len(train), k, replace=False))].copy()
        for _ in range(ROUNDS):
            nearest = np.argmax(train @ centres.T, axis=1)
            sums = np.zeros_like(centres)
            np.add.at(sums, nearest, train)
            empty = np.logical_not(sums.any(axis=1, keepdims=True))
            centres = np.where(empty, centres, _unit(sums))  # an empty bucket keeps its centre
        return cls(centres, groups, means, np.argmax(means @ centres.T, axis=1))

    def place(self, group_id: str, mean: np.ndarray) -> None:
        """A group made after the buckets: it joins the bucket of the nearest centre."""
        if group_id not in self.bucket_of:
            mean = _unit(mean)
            self._join(group_id, mean, int(np.argmax(self.centres @ mean)))

    def remove(self, group_id: str) -> None:
        b = self.bucket_of.pop(group_id, None)
        if b is not None:
            i = self.members[b].index(group_id)
            del self.members[b][i], self._vectors[b][i]
            self._stacked[b] = None

    def candidates(
        self, vector: np.ndarray, probes: int = PROBES, top: int = TOP_GROUPS
    ) -> list[str]:
        """Of the groups in the ``probes`` buckets whose centres are nearest to ``vector``, the ``top``
        whose means are nearest to it (the index then compares ``vector`` with their kept rows)."""
        near = np.argsort(-(self.centres @ vector), kind="stable")[:probes]
        ids: list[str] = []
        sims: list[np.ndarray] = []
        for b in near.tolist():
            if not self.members[b]:
                continue
            stacked = self._stacked[b]
            if stacked is None:
                stacked = self._stacked[b] = np.stack(self._vectors[b])
            ids += self.members[b]
            sims.append(stacked @ vector)
        if not ids:
            return []
        order = np.argsort(-np.concatenate(sims), kind="stable")[:top]
        return [ids[i] for i in order.tolist()]
