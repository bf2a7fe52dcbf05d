"""Groups that turn out to be one computation become one group.

Routing splits one computation into several groups wherever its requests are worded differently
(different stories around one equation, docs/routing.md): each group then pays its own cold start,
its own build and its own probation. Once two groups of a tenant each have a validated entry, their
programs say whether they compute the same thing (:mod:`minicache.programs.computation`, ``BY_USE``):
a program is read as its shape with every parameter and local name replaced by its order of first
use, since two stories give their numbers in different orders and only their use pairs the
parameters; two programs are one computation when they are the same up to the names they chose.
Then the newer group is merged into the older one (:meth:`GroupMerger.merge`):

1. its examples are copied into the surviving group (routing finds its wording there: this process's
   index at once, other replicas' at their next refresh, as any new example);
2. the survivor's entry gets its next version, which also reads the merged group's wording: the
   merged entry's alignment exemplars, renamed to the survivor's parameters (each kept only if it
   reads the survivor's own examples right, and the survivor's only if they read the merged group's
   right), the union of both groups' observed values, kinds, answers and cue words, and only those
   learned rules that read no merged example wrong;
3. the merged group is dropped from routing and deleted (entries and examples with it). A request
   routed to it before and recorded after creates it again: its examples then move to the survivor
   (:meth:`GroupMerger.move_late`, after that miss).

Copies come first, so a merge that stops part-way leaves examples in both groups, never in neither.
Only groups without a client label merge (a labelled request goes to its label's group whatever
its computation), and only when both entries read requests after the same shared prefix (an
exemplar learned after one boilerplate does not read a request that keeps another).

Merging is ``EngineConfig.merge_groups``; the engine runs it on the build worker after each
successful build (it listens for the build's event), and records a ``merge`` event. A group without
an entry joins an entry's group by the same steps (:meth:`GroupMerger.fold`), on its examples' lifted
programs (:mod:`minicache.build.join`).
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any

from minicache.build.builder import Builder
from minicache.build.computations import ComputationIndex, parameter_map, role_map, types_of
from minicache.events import Event
from minicache.hit.align import same_value
from minicache.hit.profile import check_exemplar, exemplar_reading
from minicache.hit.rules import apply_rule
from minicache.hit.wording import merged_wording
from minicache.hit.words_after import merged_written
from minicache.request import request_text, strip_prefix
from minicache.route.router import Router
from minicache.store.base import Entry, Example, new_id

log = logging.getLogger(__name__)

KEPT_VALUES = 40  # observed values (and answers) per variable a merged profile keeps
LEASE_TRIES = 20  # a build of this process may still hold a group's lease for a moment
LEASE_WAIT_S = 0.05
MOVED_KEPT = 10_000  # merged groups remembered, for requests routed to one before its merge

Pair = tuple[str, dict[str, Any]]  # (request text after the shared prefix, values by parameter)


def _pairs(examples: Iterable[Example], entry: Entry, names: dict[str, str]) -> list[Pair]:
    """A group's examples as (text, values) under the survivor's names, where the example's own
    program read the request under the entry's parameter names."""
    prefix = entry.validation.get("shared_prefix") or ""
    wanted = {v.name for v in entry.template}
    return [
        (
            strip_prefix(request_text(ex.question, ex.context), prefix),
            {names[k]: v for k, v in ex.variables.items()},
        )
        for ex in examples
        if set(ex.variables) == wanted
    ]


def _renamed_exemplar(exemplar: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
    out = copy.deepcopy(exemplar)
    for holder in (out, out.get("table") or {}):
        if isinstance(holder.get("slots"), dict):
            holder["slots"] = {names.get(k, k): v for k, v in holder["slots"].items()}
    return out


def merged_profile(
    ours: dict[str, Any],
    theirs: dict[str, Any],
    names: dict[str, str],
    our_pairs: list[Pair],
    their_pairs: list[Pair],
) -> dict[str, Any]:
    """The survivor's profile extended by the merged entry's (renamed by ``names``): exemplars that
    read the other group's examples right, values, kinds, answers and cue words of both, the
    variables always equal in both, for each variable both groups record words after its number,
    every word either accepts, and the word sets either group's reviews learned together
    (:func:`minicache.hit.words_after.merged_written`), and the words both groups' examples all
    wrote, with the operation words either wrote and the asked quantity's words both record
    (:func:`minicache.hit.wording.merged_wording`)."""
    out = copy.deepcopy(ours)
    kept = [ex for ex in out.get("exemplars", []) if check_exemplar(ex, their_pairs)]
    for exemplar in theirs.get("exemplars", []):
        renamed = _renamed_exemplar(exemplar, names)
        if exemplar_reading(renamed) not in map(exemplar_reading, kept) and check_exemplar(
            renamed, our_pairs
        ):
            kept.append(renamed)
    out["exemplars"] = kept
    for key in ("values", "kinds", "cues"):
        joined: dict[str, list[Any]] = {k: list(v) for k, v in (out.get(key) or {}).items()}
        for name, items in (theirs.get(key) or {}).items():
            joined.setdefault(names.get(name, name), []).extend(items)
        if joined:
            out[key] = {
                k: v[:KEPT_VALUES] if key == "values" else sorted(set(v)) for k, v in joined.items()
            }
    their_equal = {frozenset(names.get(n, n) for n in pair) for pair in theirs.get("equal", [])}
    out["equal"] = [p for p in out.get("equal", []) if frozenset(p) in their_equal]
    out["answers"] = [*out.get("answers", []), *theirs.get("answers", [])][:KEPT_VALUES]
    out.update(merged_written(out, theirs, names))
    for key in ("wording", "operations", "asked", "asked_also", "wording_evidence"):
        out.pop(key, None)
    out.update(merged_wording(ours, theirs, [t for t, _ in our_pairs], [t for t, _ in their_pairs]))
    return out


def rules_reading_right(rules: dict[str, Any], pairs: list[Pair]) -> dict[str, Any]:
    """The learned rules that read no example of ``pairs`` wrong (finding nothing is not wrong: a
    rule serves a hit only where every variable's rule reads a value)."""
    kept = {}
    for name, rule in rules.items():
        readings = [(apply_rule(rule, text), values.get(name)) for text, values in pairs]
        if all(read is None or same_value(read, want) for read, want in readings):
            kept[name] = rule
    return kept


class MergeBasis(Enum):
    """What showed the merged group to be the survivor's computation."""

    ENTRIES = "entries"  # its own active entry's program (after its build)
    PROGRAMS = "programs"  # its examples' lifted programs (a group without an entry joins)


@dataclass(frozen=True)
class Fold:
    """What a merged group brings to the survivor's entry, read under both groups' leases."""

    names: dict[str, str]  # the merged group's parameter names -> the survivor's
    # its profile: under its own names (ENTRIES), or already the survivor's (PROGRAMS: its examples
    # may each have named their parameters otherwise)
    profile: dict[str, Any]
    pairs: list[Pair]  # its examples under the survivor's names
    basis: MergeBasis
    entry_id: str | None = None  # its active entry, if it had one


class GroupMerger:
    """Merges groups whose entries are one computation, after each successful build."""

    def __init__(
        self, builder: Builder, router: Router, submit: Callable[..., Future[Any]]
    ) -> None:
        """Merges follow ``builder``'s successful builds (its event log), in its store, and are run
        by ``submit`` (the build worker's: a merge waits for the build that prompted it)."""
        self.store, self.events, self.config = builder.store, builder.events, builder.config
        self.router, self.submit = router, submit
        self.owner = f"{builder.owner}/merge"  # its own lease name: builds here wait for a merge
        # the tenant's active entries to look among, read at most once per refresh
        self.index = ComputationIndex(self.store, self.config.route_refresh_s)
        # (tenant, merged group) -> its survivor, for the merges of this process
        self._moved: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._futures: list[Future[Any]] = []
        self._lock = threading.Lock()
        if self.config.merge_groups:
            self.events.listen(self._on_event)

    def _on_event(self, event: Event) -> None:
        """A successful build's event (it names its tenant and group): merge its group on the
        build worker."""
        if event.get("event") != "build" or not event.get("ok"):
            return
        self.index.stale(str(event["tenant"]))  # the new entry is looked among at once
        self.schedule(self.after_build, str(event["tenant"]), str(event["group"]))

    def schedule(self, merge: Callable[..., Any], *args: Any) -> None:
        """Run ``merge(*args)`` on the build worker, behind the builds queued before it; ``wait``
        waits for it."""
        future = self.submit(merge, *args)
        with self._lock:
            self._futures = [f for f in self._futures if not f.done()] + [future]

    def wait(self, timeout: float | None = None) -> None:
        """Until the merges scheduled so far are done (they raise what they raised)."""
        with self._lock:
            futures = list(self._futures)
        for f in futures:
            f.result(timeout=timeout)

    def after_build(self, tenant: str, group_id: str) -> list[Event]:
        """Merge every group of the tenant that is ``group_id``'s computation into the oldest of
        them; returns the merge events."""
        entry = self.store.active_entry(tenant, group_id)
        ours = self.index.computation(entry) if entry is not None else None
        if entry is None or ours is None or not self._mergeable(tenant, entry):
            return []
        prefix = entry.validation.get("shared_prefix") or ""
        same = [
            other
            for other, theirs in self.index.entries_of(tenant, ours.shape)
            if other.group_id != group_id
            and (other.validation.get("shared_prefix") or "") == prefix
            and parameter_map(theirs, types_of(other), ours, types_of(entry)) is not None
            and self._mergeable(tenant, other)
        ]
        if not same:
            return []
        groups = {e.group_id: self.store.get_group(tenant, e.group_id) for e in [entry, *same]}
        ranked = sorted(
            [entry, *same],
            key=lambda e: (getattr(groups[e.group_id], "created_at", 0.0), e.group_id),
        )
        survivor, merged = ranked[0], ranked[1:]
        done = []
        for other in merged:
            event = self.merge(tenant, survivor.group_id, other.group_id)
            if event is not None:
                done.append(event)
        return done

    def _mergeable(self, tenant: str, entry: Entry) -> bool:
        group = self.store.get_group(tenant, entry.group_id)
        return group is not None and group.label is None

    def merge(self, tenant: str, survivor_id: str, merged_id: str) -> Event | None:
        """Merge group ``merged_id`` into ``survivor_id`` (both with active entries of one
        computation), under both groups' build leases; returns the ``merge`` event, or None where
        a lease could not be had or an entry changed meanwhile."""

        def plan(survivor: Entry) -> Fold | None:
            merged = self.store.active_entry(tenant, merged_id)
            names = role_map(merged, survivor) if merged else None
            if merged is None or names is None:
                return None
            return Fold(
                names,
                merged.validation.get("profile") or {},
                _pairs(self.store.examples(tenant, merged_id), merged, names),
                MergeBasis.ENTRIES,
                merged.id,
            )

        return self.fold(tenant, survivor_id, merged_id, plan)

    def fold(
        self, tenant: str, survivor_id: str, merged_id: str, plan: Callable[[Entry], Fold | None]
    ) -> Event | None:
        """The merge's steps, under both groups' build leases: ``plan`` reads what the merged group
        brings once the leases are held (None: nothing is merged), then its examples are copied,
        the survivor's entry gets its next version, and the merged group is forgotten and deleted.
        Returns the ``merge`` event, or None where a lease could not be had or nothing was planned."""
        held = [g for g in (survivor_id, merged_id) if self._lease(tenant, g)]
        try:
            if len(held) < 2:
                return None
            survivor = self.store.active_entry(tenant, survivor_id)
            fold = plan(survivor) if survivor is not None else None
            if survivor is None or fold is None:
                return None
            same = {v.name: v.name for v in survivor.template}
            ours = _pairs(self.store.examples(tenant, survivor_id), survivor, same)
            copied = self._copy_examples(tenant, merged_id, survivor_id)
            validation = dict(survivor.validation)
            validation["profile"] = merged_profile(
                survivor.validation.get("profile") or {},
                fold.profile,
                {} if fold.basis is MergeBasis.PROGRAMS else fold.names,
                ours,
                fold.pairs,
            )
            note = {
                "group": merged_id,
                "entry": fold.entry_id,
                "names": fold.names,
                "basis": fold.basis.value,
                "at": time.time(),
            }
            validation["merged"] = [*validation.get("merged", []), note]
            entry = replace(
                survivor,
                id=new_id("ent"),
                rules=rules_reading_right(survivor.rules, fold.pairs),
                validation={**validation, "revised_from": survivor.id},
            )
            self.store.put_entry(entry)
            self.index.stale(tenant)
            # Routing here stops offering the merged group; examples it recorded meanwhile move too,
            # and those of requests routed to it before and recorded after (move_late).
            with self._lock:
                self._moved[(tenant, merged_id)] = survivor_id
                if len(self._moved) > MOVED_KEPT:
                    self._moved.popitem(last=False)
            self.router.forget_group(tenant, merged_id)
            copied += self._copy_examples(tenant, merged_id, survivor_id)
            self.store.delete_group(tenant, merged_id)
        finally:
            for g in held:
                self.store.release_build_lease(tenant, g, self.owner)
        self.store.bump(tenant, "groups_merged")
        event: Event = {
            "event": "merge",
            "tenant": tenant,
            "group": survivor_id,
            "merged": merged_id,
            "entry": entry.id,
            "examples": copied,
            "names": fold.names,
            "basis": fold.basis.value,
        }
        self.events.append(event)
        return event

    def survivor_of(self, tenant: str, group_id: str) -> str | None:
        """The group this process merged ``group_id`` into (through later merges of that one
        too), or None where it merged it nowhere."""
        seen: set[str] = set()
        with self._lock:
            while (nxt := self._moved.get((tenant, group_id))) is not None and nxt not in seen:
                seen.add(group_id := nxt)
        return group_id if seen else None

    def move_late(self, tenant: str, group_id: str) -> int:
        """A group merged away here, created again by a request routed to it before the merge that
        recorded its miss after it: under both leases its examples move to the survivor and it is
        forgotten and deleted again. Returns how many moved (0 too where it has an entry now: that
        is merged after its build, if at all)."""
        survivor_id = self.survivor_of(tenant, group_id)
        if survivor_id is None or self.store.get_group(tenant, group_id) is None:
            return 0
        held = [g for g in (survivor_id, group_id) if self._lease(tenant, g)]
        try:
            if len(held) < 2 or self.store.get_group(tenant, survivor_id) is None:
                return 0
            if self.store.active_entry(tenant, group_id) is not None:
                return 0
            self.router.forget_group(tenant, group_id)
            moved = self._copy_examples(tenant, group_id, survivor_id)
            self.store.delete_group(tenant, group_id)
        finally:
            for g in held:
                self.store.release_build_lease(tenant, g, self.owner)
        log.info("merge: %d late example(s) of merged group %s moved", moved, group_id)
        return moved

    def _lease(self, tenant: str, group_id: str) -> bool:
        for _ in range(LEASE_TRIES):
            if self.store.acquire_build_lease(
                tenant, group_id, self.owner, self.config.build_lease_s
            ):
                return True
            time.sleep(LEASE_WAIT_S)
        log.info("merge: group %s is being built or revised; not merged now", group_id)
        return False

    def _copy_examples(self, tenant: str, source: str, target: str) -> int:
        """Copy ``source``'s examples into ``target`` (those not already there), each routable to
        ``target`` from this process at once. Returns how many were copied."""
        there = {(x.question, x.context, x.program) for x in self.store.examples(tenant, target)}
        copied = 0
        for ex in self.store.examples(tenant, source):
            if (ex.question, ex.context, ex.program) in there:
                continue
            self.store.add_example(replace(ex, id=new_id("ex"), group_id=target))
            if ex.embedding is not None:
                self.router.recorded(tenant, target, ex.embedding)
            copied += 1
        return copied
