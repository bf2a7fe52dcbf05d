"""Dev and test splits of TAT-QA and SVAMP (``minicache bench --split dev|test``).

Rules, thresholds and prompts are changed on dev only; test figures are quoted beside dev figures,
so that a gain fitted to dev's wording shows as a gap. The splits are fixed here, in the code:

* TAT-QA: dev is ``tatqa_dataset_dev.json``, test is ``tatqa_dataset_test_gold.json``, TAT-QA's own
  split (other companies' reports: no table or question is in both).
* SVAMP has no split of its own, and one computation told in many stories is what a cache meets,
  so test is a fixed third of its equation skeletons (:func:`svamp_test_rule`) that dev never
  contains. The skeletons are listed in :data:`SVAMP_TEST_SKELETONS`, so that a change to the data
  or to the skeleton's masking cannot move a request from one split to the other unnoticed (a test
  checks that the list still follows the rule).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

SPLITS = ("dev", "test")

# Which TAT-QA file each split reads (tatqa_dataset_<name>.json).
TATQA_FILES = {"dev": "dev", "test": "test_gold"}

# SVAMP's test skeletons: ranks 1, 4, 7, ... of the skeletons ordered by how many of SVAMP's 1,000
# requests use them (ties by the skeleton's text), so that test holds a third of the skeletons,
# common and rare alike (244 requests), and dev keeps the commonest (N-N) and 756 requests.
SVAMP_TEST_SKELETONS = (
    "N/N",
    "(N+N)-N",
    "N-(N+N)",
    "N-(N-N)",
    "(N-N)*N",
    "(N*N)+N",
    "N/(N+N)",
    "(N/N)-N",
    "N*(N-N)",
)

# Datasets with a split; their NAME-distinct streams keep it (one request per group of the split).
SPLIT_DATASETS = ("tatqa", "svamp")
_DISTINCT = "-distinct"


def svamp_test_rule(skeletons: Iterable[str]) -> tuple[str, ...]:
    """The rule :data:`SVAMP_TEST_SKELETONS` was made by: order the skeletons by frequency (most
    first, ties by their text) and keep every third, starting at the second."""
    counts = Counter(skeletons)
    ranked = sorted(counts, key=lambda s: (-counts[s], s))
    return tuple(ranked[1::3])


def has_split(dataset: str) -> bool:
    """Whether ``--split`` applies to ``dataset`` (``tatqa``, ``svamp`` and their -distinct streams)."""
    return dataset.removesuffix(_DISTINCT) in SPLIT_DATASETS


def split_error(dataset: str) -> str | None:
    """Why ``--split`` cannot apply to ``dataset`` (None when it can): said before any model loads."""
    if has_split(dataset):
        return None
    names = ", ".join(SPLIT_DATASETS + tuple(d + _DISTINCT for d in SPLIT_DATASETS))
    return f"dataset {dataset!r} has no dev/test split; only {names} have one"


def in_svamp_split(skeleton: str | None, split: str) -> bool:
    """Whether a SVAMP request with this equation skeleton belongs to ``split``."""
    return (skeleton in SVAMP_TEST_SKELETONS) == (split == "test")
