"""Route a request to its group without a client label.

A group is a set of requests that need the same computation. We compare a request's *skeleton*
(the text with numbers, amounts, percentages, dates and quoted entities masked, and with
``route_table_rows`` the words that name a row of the request's table, so that only the wording of
the computation remains), embedded, against the skeletons of the examples the tenant has
served (kept in memory, a capped set per group: :mod:`minicache.route.index`), and join the group of
the nearest one if its cosine similarity reaches the threshold; otherwise the request starts a new
group.

The embedder is ``EngineConfig.route_embedder``: ``lexical`` (hashed word and word-pair counts, no
model: :mod:`minicache.route.lexical`) by default, or ``minilm`` (the sentence embedding). Each carries
the threshold it was calibrated at (``route_threshold``: 0.82 and 0.80; docs/routing.md has the
replays), used unless ``EngineConfig.route_threshold`` sets one. SVAMP's near-duplicates that ask a
different question are *not* separated reliably by any threshold: there, verification of hits and
probation are what keep wrong programs out.

With ``word_slots`` (``EngineConfig.route_word_slots``), a request that reaches no group by its
embedding is compared word by word with the examples of its nearest groups (and of pending ones):
a group whose example differs from it only in consistently substituted names, items or units
(:mod:`minicache.route.slots`) takes it instead of a new group. This only ever joins a request that
would otherwise start a group; a decision the embedding makes is never changed.

A group another replica merged into another is deleted from the store but keeps its rows in this
process's index, which reads only what is added. So before a request joins a group of the index,
the store is asked whether it still has it, at most once a refresh interval per group; a group it no
longer has is forgotten here and the search goes on without it. Why not route there and let the
miss recreate it: a merged group would come back under its old id, and the wording it took to the
surviving group would keep coming back to it. A group another replica invalidated keeps its row, so
a request routed to it here records a new example under the old id and starts it afresh, as a new
group would.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from minicache.config.engine import ROUTE_EMBEDDERS
from minicache.errors import ConfigError
from minicache.programs.tables import without_row
from minicache.route.index import EXACT_ROWS, RouteIndex
from minicache.route.slots import CANDIDATES, GroupWords, slot_aligned, words
from minicache.store.base import Store, new_id

_PATTERNS = [
    (re.compile(r"\b\d{4}-\d{2}-\d{2}\b"), " DATE "),
    (
        re.compile(
            r"\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.? \d{1,2},? \d{4}\b",
            re.I,
        ),
        " DATE ",
    ),
    (
        re.compile(
            r"[$€£¥]\s?-?\d[\d,]*(?:\.\d+)?(?:\s?(?:million|billion|thousand|[mbk])\b)?", re.I
        ),
        " MONEY ",
    ),
    (re.compile(r"-?\d[\d,]*(?:\.\d+)?\s?%"), " PCT "),
    (re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:e-?\d+)?"), " NUM "),
    (re.compile(r"\"[^\"]{1,60}\"|'[^']{1,60}'"), " QUOTE "),
]
_SPACE = re.compile(r"\s+")
# A run of digits and commas longer than any real value. Why: the patterns above restart at every
# digit of a run they cannot match (a long number with no % after it), so masking took time that grew
# with the square of the run's length, holding the interpreter lock (0.5 s for 5,000 digits). Every
# pattern masks such a run to the same token whatever its length, so cutting it first changes no
# skeleton and keeps masking linear.
_LONG_RUN = re.compile(r"[\d,]{31,}")


def skeleton(text: str) -> str:
    """``text`` with values masked: what remains says *what* is computed, not with which numbers."""
    text = _LONG_RUN.sub(lambda m: m.group()[:30], text)
    for pattern, token in _PATTERNS:
        text = pattern.sub(token, text)
    return _SPACE.sub(" ", text).strip()


class Embedder(Protocol):
    def embed(self, texts: list[str]) -> np.ndarray: ...


DEFAULT_THRESHOLD = 0.80  # for an embedder that names no route_threshold of its own (a test's fake)


def threshold_for(embedder: Embedder, configured: float | None = None) -> float:
    """``configured`` if set, else the threshold the embedder was calibrated at."""
    if configured is not None:
        return configured
    return float(getattr(embedder, "route_threshold", DEFAULT_THRESHOLD))


def route_embedder(name: str) -> Embedder:
    """The embedder ``EngineConfig.route_embedder`` names: ``lexical`` (no model, minicache.route.lexical)
    or ``minilm`` (the process's shared MiniLM, loaded - and fetched once - on first use)."""
    if name == "lexical":
        from minicache.route.lexical import LexicalEmbedder

        return LexicalEmbedder()
    if name == "minilm":
        from minicache.route.embedding import shared_embedder

        return shared_embedder()
    raise ConfigError(f"route_embedder must be one of {', '.join(ROUTE_EMBEDDERS)}, not {name!r}")


class LazyMiniLM:
    """MiniLM loaded on its first ``embed``: for StepCache, whose threshold was calibrated on it,
    so that an engine that never sees a structured-output request never loads its 90 MB."""

    def embed(self, texts: list[str]) -> np.ndarray:
        from minicache.route.embedding import shared_embedder

        return shared_embedder().embed(texts)


def routed_skeleton(question: str, context: str | None = None, table_rows: bool = True) -> str:
    """What a request is routed by: the skeleton of its question, with the words that name its
    table's row masked too where ``table_rows`` (``EngineConfig.route_table_rows``;
    :func:`minicache.programs.tables.without_row`: a row is a value of the request, like its numbers)."""
    return skeleton(without_row(question, context) if table_rows else question)


def embed_request(
    embedder: Embedder, question: str, context: str | None = None, table_rows: bool = True
) -> np.ndarray:
    """The vector a request is compared by: its routed skeleton (:func:`routed_skeleton`),
    embedded, as float32."""
    routed = routed_skeleton(question, context, table_rows)
    return np.asarray(embedder.embed([routed])[0], dtype=np.float32)


@dataclass
class RouteDecision:
    group_id: str
    new_group: bool
    similarity: float
    embedding: np.ndarray
    explicit: bool = False
    by_word_slots: bool = False  # joined by word alignment (names, items, units as slots)


class Router:
    """Nearest-example routing over skeleton embeddings."""

    def __init__(
        self,
        store: Store,
        embedder: Embedder,
        threshold: float | None = None,
        *,
        refresh_s: float = 1.0,
        per_group: int = 32,
        exact_rows: int = EXACT_ROWS,
        word_slots: bool = False,
        table_rows: bool = True,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.threshold = threshold_for(embedder, threshold)
        # The tenant's examples in memory (minicache.route.index): no request reads history.
        self.index = RouteIndex(
            store,
            refresh_s=refresh_s,
            per_group=per_group,
            exact_rows=exact_rows,
            width=getattr(embedder, "dim", None),
            reembed=self._reembed,
        )
        # New groups whose first request is still being served (not yet in the store), so that
        # concurrent first requests of one template join one group instead of starting several.
        self._pending: dict[str, list[tuple[str, str, np.ndarray, tuple[str, ...]]]] = {}
        self._lock = threading.Lock()
        self.word_slots = word_slots
        self.table_rows = table_rows
        self.group_words = GroupWords(self._stored_skeletons)
        # (tenant, group) -> when the store last said it has the group (index clock)
        self._listed_at: dict[tuple[str, str], float] = {}

    def _stored_skeletons(self, tenant: str, group_id: str) -> list[str]:
        return [self._routed(x.question, x.context) for x in self.store.examples(tenant, group_id)]

    def _reembed(self, tenant: str, group_id: str) -> np.ndarray:
        """A group's newest stored examples (as many as the index keeps), embedded by this router's
        embedder: for rows another embedder wrote. In memory only; the store keeps what it has."""
        examples = self.store.examples(tenant, group_id)[-self.index.per_group :]
        if not examples:
            return np.zeros((0, 0), dtype=np.float32)
        texts = [self._routed(x.question, x.context) for x in examples]
        return self.embedder.embed(texts).astype(np.float32)

    def recorded(self, tenant: str, group_id: str, vector: np.ndarray) -> None:
        """An example this process stored: later requests route to it without waiting for a refresh."""
        self.index.add(tenant, group_id, vector)

    def warm(self, tenants: Iterable[str]) -> dict[str, float]:
        """Load these tenants' indexes now (seconds each), so that no request waits for one."""
        return self.index.warm(tenants)

    def forget_group(self, tenant: str, group_id: str) -> None:
        """The group's examples were cleared: stop routing to it from this process."""
        self.index.drop_group(tenant, group_id)
        self.group_words.drop(tenant, group_id)
        with self._lock:
            self._listed_at.pop((tenant, group_id), None)

    def _listed(self, tenant: str, group_id: str) -> bool:
        """Whether the store still has the group, asked at most once a refresh interval per group;
        a group it no longer has (another replica deleted it) is forgotten here."""
        now, key = self.index.clock(), (tenant, group_id)
        with self._lock:
            at = self._listed_at.get(key)
        if at is not None and now - at < self.index.refresh_s:
            return True
        if self.store.get_group(tenant, group_id) is None:
            self.forget_group(tenant, group_id)
            return False
        with self._lock:
            self._listed_at[key] = now
        return True

    def _nearest_listed(self, tenant: str, vector: np.ndarray) -> tuple[str | None, float]:
        """The index's nearest group and its similarity, passing over (and forgetting) groups
        within the threshold that the store no longer has."""
        while True:
            best_id, nearest = self.index.nearest(tenant, vector)
            if best_id is None or nearest < self.threshold or self._listed(tenant, best_id):
                return best_id, nearest

    def forget_pending(self, tenant: str, question: str) -> None:
        with self._lock:
            items = self._pending.get(tenant, [])
            self._pending[tenant] = [p for p in items if p[1] != question]
            gone = [p[0] for p in items if p[1] == question]
        for gid in gone if self.word_slots else []:
            if self.store.get_group(tenant, gid) is None:  # its first request recorded nothing
                self.group_words.drop(tenant, gid)

    def _routed(self, question: str, context: str | None) -> str:
        return routed_skeleton(question, context, self.table_rows)

    def embed_request(self, question: str, context: str | None = None) -> np.ndarray:
        return embed_request(self.embedder, question, context, self.table_rows)

    def route(
        self, tenant: str, question: str, group: str | None = None, context: str | None = None
    ) -> RouteDecision:
        vector = self.embed_request(question, context)
        if group is not None:
            gid = f"label:{group}"
            return RouteDecision(
                gid, self.store.get_group(tenant, gid) is None, 1.0, vector, explicit=True
            )
        best_id, nearest = self._nearest_listed(tenant, vector)
        seq = words(self._routed(question, context)) if self.word_slots else ()
        slotted = None
        if seq and nearest < self.threshold:  # outside the lock: it may read the store
            slotted = self._slot_group(
                tenant, seq, self.index.nearest_groups(tenant, vector, CANDIDATES)
            )
        with self._lock:
            pending = list(self._pending.get(tenant, []))
            for gid, _q, vec, _seq in pending:
                sim = float(vec @ vector)
                if sim > nearest:
                    nearest, best_id = sim, gid
            if best_id is not None and nearest >= self.threshold:
                return self._joined(tenant, seq, RouteDecision(best_id, False, nearest, vector))
            if slotted is None and seq:
                slotted = next((g for g, _q, _v, kept in pending if slot_aligned(seq, kept)), None)
            if slotted is not None:
                decision = RouteDecision(slotted, False, nearest, vector, by_word_slots=True)
                return self._joined(tenant, seq, decision)
            # A new group is only written to the store when its first example is recorded.
            gid = new_id("grp")
            self._pending.setdefault(tenant, []).append((gid, question, vector, seq))
            if seq:
                self.group_words.add(tenant, gid, seq, new=True)
            return RouteDecision(gid, True, nearest, vector)

    def _slot_group(self, tenant: str, seq: tuple[str, ...], candidates: list[str]) -> str | None:
        """The first of ``candidates`` with an example that ``seq`` aligns with, slots aside."""
        for gid in candidates:
            kept = self.group_words.get(tenant, gid)
            if any(slot_aligned(seq, k) for k in kept) and self._listed(tenant, gid):
                return gid
        return None

    def _joined(self, tenant: str, seq: tuple[str, ...], decision: RouteDecision) -> RouteDecision:
        """``decision`` (an existing group), with its words kept for later slot alignment."""
        if seq:
            self.group_words.add(tenant, decision.group_id, seq)
        return decision
