"""Word slots: requests of one template that differ in names, items or units as well as numbers.

Routing compares skeletons (values masked). A template such as "Tom has 5 apples and buys 3 more.
How many apples does Tom have?" is also sent as "Maria has 12 pears and buys 7 more. How many
pears does Maria have?": the same computation, but the words that name the person and the item
differ, so the two skeletons embed far apart (0.63 with the lexical embedder, against its 0.82) and
every new name or item starts a group of its own that may never reach a build.

:func:`slot_aligned` says whether two skeletons are one template up to such words. It aligns them
word by word and accepts a differing word only as a *slot*:

* one word for one word, in the same place, with every other word the same (a sentence that words
  the computation differently - "gives away 3" for "buys 3 more" - has other words or another
  length, and is not aligned);
* consistently: every occurrence of the word in one request faces the same word in the other, and
  neither word also occurs unchanged ("Tom ... Tom" against "Maria ... Maria", not "Maria ... Tom");
* and it looks like an entity, not an operation: it recurs in both requests (a person or item a
  template names again in its question), or it is a single Title-case word inside a sentence, not
  beside another Title-case word (a person's name; "the Future Value" is a title, and a
  sentence's first word may be any verb). A changed verb or operator word ("buys" for "sells")
  occurs once, in lower case, and is a difference.

At most a third of the words may be slots, so that two short requests that share only their
punctuation are not one template. No word list: what decides is where a word occurs and how often.
:func:`substitution` names the pairs of words that face each other and :func:`slot_role` what each
names (an item or unit after a number, a person's name, or neither); a hit reads a request through
the pairs, in its entry's exemplar's words, only where each is a name or an item, and refuses the
hit otherwise (:mod:`minicache.hit.word_slots`).

:class:`GroupWords` keeps, per group, the word sequences :func:`slot_aligned` compares a request
with: a few recent skeletons per group, read from the store once and extended by this process's
routing decisions.
"""

from __future__ import annotations

import re
import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import Literal

_WORD = re.compile(r"[^\W\d_]+|\d+|[^\w\s]")
# the tokens skeleton() puts in place of values: equal in every request of a template, never a slot
MASKS = frozenset({"NUM", "MONEY", "PCT", "DATE", "QUOTE"})
NUMBERS = frozenset({"NUM", "MONEY", "PCT"})  # the masks of a number's value
_SENTENCE_END = frozenset({".", "?", "!", ":", ";"})
MIN_WORDS = 6  # shorter skeletons are too little context to call a differing word a slot
MAX_SLOT_SHARE = 1 / 3  # at most this share of a skeleton's words may be slots
KEEP = 8  # word sequences kept per group
CANDIDATES = 8  # nearest groups (by embedding) whose examples a request is aligned with


def words(skeleton_text: str) -> tuple[str, ...]:
    """The words, digit runs and punctuation marks of a skeleton, case kept (case marks names)."""
    return tuple(_WORD.findall(skeleton_text))


def _title(word: str) -> bool:
    return word[:1].isupper() and not word[1:2].isupper() and word.isalpha()


def _name_at(seq: Sequence[str], i: int) -> bool:
    """Whether ``seq[i]`` reads as a person's name: Title-case, inside a sentence, alone."""
    if not _title(seq[i]) or i == 0 or seq[i - 1] in _SENTENCE_END:
        return False
    beside = [seq[j] for j in (i - 1, i + 1) if 0 <= j < len(seq)]
    return not any(_title(w) for w in beside)


def substitution(a: Sequence[str], b: Sequence[str]) -> dict[str, str] | None:
    """The words of ``a`` that face other words in ``b`` (both :func:`words` of a skeleton), each
    with the word it faces, both in lower case, where the two are one template whose only
    differences are consistent one-word substitutions of names, items or units (module docstring);
    None where they are not. Empty: the same words. Extraction reads a request through these pairs
    (:mod:`minicache.hit.word_slots`)."""
    if len(a) != len(b) or len(a) < MIN_WORDS:
        return None
    low_a, low_b = [w.lower() for w in a], [w.lower() for w in b]
    diff = [i for i in range(len(a)) if low_a[i] != low_b[i]]
    if len(diff) > len(a) * MAX_SLOT_SHARE:
        return None
    pairs: dict[str, str] = {}
    back: dict[str, str] = {}
    for i in diff:
        x, y = low_a[i], low_b[i]
        if not (a[i].isalpha() and b[i].isalpha()) or a[i] in MASKS or b[i] in MASKS:
            return None
        if pairs.setdefault(x, y) != y or back.setdefault(y, x) != x:
            return None  # one word faces two, or two words face one: not a consistent substitution
    for x, y in pairs.items():
        where_a = [i for i, w in enumerate(low_a) if w == x]
        where_b = [i for i, w in enumerate(low_b) if w == y]
        if where_a != where_b:  # the word also occurs unchanged, or its partner does
            return None
        recurs = len(where_a) >= 2
        if not recurs and not (_name_at(a, where_a[0]) and _name_at(b, where_b[0])):
            return None
    return pairs


def slot_role(a: Sequence[str], b: Sequence[str], word: str) -> Literal["item", "name"] | None:
    """What the substituted ``word`` (a key of ``substitution(a, b)``) names where it occurs:
    ``"item"`` where an occurrence directly follows a number in both requests (an item or unit,
    "5 apples", "30 minutes"), else ``"name"`` where an occurrence reads as a person's name in both,
    else None (a recurring verb or operation word: "spends" for "earns"). Substituted words face
    each other at the same places, so both are read at the same index."""
    where = [i for i, w in enumerate(a) if w.lower() == word]
    if any(i > 0 and a[i - 1] in NUMBERS and b[i - 1] in NUMBERS for i in where):
        return "item"
    if any(_name_at(a, i) and _name_at(b, i) for i in where):
        return "name"
    return None


def slot_aligned(a: Sequence[str], b: Sequence[str]) -> bool:
    """Whether ``a`` and ``b`` (:func:`words` of two skeletons) are one template whose only
    differences are consistent one-word substitutions of names, items or units (module docstring)."""
    return substitution(a, b) is not None


class GroupWords:
    """A tenant's groups' recent skeleton word sequences, in memory, for :func:`slot_aligned`.

    ``load(tenant, group_id)`` returns the skeletons of the group's stored examples (the newest
    last); it is called once per group, the first time the group is a candidate. Sequences this
    process routes to a group are added at once. Thread-safe."""

    def __init__(self, load: Callable[[str, str], list[str]], keep: int = KEEP) -> None:
        self._load = load
        self.keep = keep
        self._groups: dict[tuple[str, str], deque[tuple[str, ...]]] = {}
        self._loaded: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def _put(self, key: tuple[str, str], seq: tuple[str, ...]) -> None:
        kept = self._groups.setdefault(key, deque(maxlen=self.keep))
        if seq not in kept:
            kept.append(seq)

    def add(self, tenant: str, group_id: str, seq: tuple[str, ...], *, new: bool = False) -> None:
        """``seq`` was routed to the group; ``new``: the group starts with it (nothing to load)."""
        with self._lock:
            key = (tenant, group_id)
            if new:
                self._loaded.add(key)
            self._put(key, seq)

    def get(self, tenant: str, group_id: str) -> list[tuple[str, ...]]:
        key = (tenant, group_id)
        with self._lock:
            if key in self._loaded:
                return list(self._groups.get(key, ()))
        stored = [words(q) for q in self._load(tenant, group_id)[-self.keep :]]
        with self._lock:
            if key not in self._loaded:
                self._loaded.add(key)
                routed = list(self._groups.pop(key, ()))
                for seq in stored + routed:
                    self._put(key, seq)
            return list(self._groups.get(key, ()))

    def drop(self, tenant: str, group_id: str) -> None:
        with self._lock:
            self._groups.pop((tenant, group_id), None)
            self._loaded.discard((tenant, group_id))
