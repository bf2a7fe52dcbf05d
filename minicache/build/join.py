"""A group without an entry joins the group whose active entry is its computation.

Merging groups after their builds (:mod:`minicache.build.merge`) does little where one equation is
told in many stories: most of those groups hold one or two misses and never reach a build. So after
each recorded miss in a group without an active entry, the build worker reads the group's examples
as computations: each example's plain program lifted against its own request
(:func:`~minicache.programs.lifting.lift`), then :func:`~minicache.programs.computation.computation_of`
with parameters named by their use. Where they are all the computation of a tenant's active entry
(the same shape, each parameter of the same type), the group is merged into that entry's group by
the merge's own steps (:meth:`GroupMerger.fold <minicache.build.merge.GroupMerger.fold>`): its
examples are copied, the entry gets its next version, which also reads this group's wording
(exemplars and values learned from its examples, renamed to the entry's parameters, and the words
its examples write after a number beside those the entry accepts there, where the entry's answer
shows them right, learned as a review learns them: :func:`~minicache.hit.words_after.with_pairs`),
and the group is forgotten and deleted. The next request phrased like it routes to the entry's group
and is served as any hit there, with every check a hit gets.

An example joins only on what the sandbox ran here: under both groups' build leases each example's
lifted program is run on its own values and the entry's program on those values renamed, and both
must give the example's recorded answer (a recorded miss's program already ran once; an imported
example's never did). One that fails, or that does not lift, keeps the group where it is.

The entries' computations are the merge's index
(:class:`~minicache.build.computations.ComputationIndex`): the tenant's active entries are read at
most once per refresh and each entry's program is parsed once, and a miss whose computation is no
entry's shape goes no further than its own example's lift.

A request routed to a group before this process merged it away records its miss after the merge,
and so creates the group again: after such a miss its examples move to the survivor
(:meth:`GroupMerger.move_late <minicache.build.merge.GroupMerger.move_late>`) instead of a join.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from minicache.build.computations import parameter_map
from minicache.build.merge import Fold, GroupMerger, MergeBasis
from minicache.errors import ProgramError, ProgramShapeError
from minicache.events import Event
from minicache.hit.profile import learn_profile
from minicache.hit.words_after import with_pairs
from minicache.programs.computation import Computation, ParameterNaming, computation_of
from minicache.programs.lifting import Lifted, lift
from minicache.programs.signature import answers_match, parse_signature
from minicache.request import request_text, strip_prefix
from minicache.sandbox import SandboxPool
from minicache.store.base import Entry, Example


@dataclass(frozen=True)
class LiftedExample:
    """An example's plain program as a computation: lifted against its own request."""

    example: Example
    lifted: Lifted
    computation: Computation
    types: dict[str, str]  # the lifted program's parameters and their types


def lifted_example(example: Example) -> LiftedExample | None:
    """``example`` read as a computation, or None where its program does not lift to one."""
    lifted = lift(example.program, request_text(example.question, example.context))
    if lifted is None or example.answer is None:
        return None
    computation = computation_of(lifted.program, ParameterNaming.BY_USE)
    try:
        template = parse_signature(lifted.program).template
    except ProgramShapeError:
        return None
    if computation is None:
        return None
    return LiftedExample(example, lifted, computation, {v.name: v.type for v in template})


def _words(text: str) -> str:
    return " ".join(text.split())


class GroupJoiner:
    """Merges a group without an entry into the group whose entry is its examples' computation."""

    def __init__(self, merger: GroupMerger, sandbox: SandboxPool) -> None:
        """Joins run on ``merger``'s build worker, by its steps; ``sandbox`` runs the checks."""
        self.merger, self.store, self.sandbox = merger, merger.store, sandbox
        self.index = merger.index

    def after_miss(self, tenant: str, group_id: str) -> None:
        """A miss was recorded in ``group_id``: with ``merge_groups``, on the build worker (behind
        any build that miss started, and any merge before it), move it to its survivor where this
        process merged the group away, else try to join it to an entry's group."""
        if self.merger.config.merge_groups:
            self.merger.schedule(self.after_recorded, tenant, group_id)

    def after_recorded(self, tenant: str, group_id: str) -> Event | None:
        """:meth:`GroupMerger.move_late <minicache.build.merge.GroupMerger.move_late>` for a group
        merged away here, else :meth:`join`; returns the ``merge`` event of a join."""
        if self.merger.survivor_of(tenant, group_id) is not None:
            self.merger.move_late(tenant, group_id)
            return None
        return self.join(tenant, group_id)

    def join(self, tenant: str, group_id: str) -> Event | None:
        """Merge ``group_id`` (no label, no active entry) into the oldest group whose active entry
        is its examples' computation; returns the ``merge`` event, or None where none joined."""
        # The newest example (the miss) picks the entries to try; every example is read under the
        # leases (_plan), and only where one was found.
        examples = self.store.examples(tenant, group_id)
        newest = lifted_example(examples[-1]) if examples else None
        candidates = self.index.entries_of(tenant, newest.computation.shape) if newest else []
        if not any(entry.group_id != group_id for entry, _ in candidates):
            return None  # no entry is its computation: nothing more is read
        group = self.store.get_group(tenant, group_id)
        if group is None or group.label is not None:
            return None
        if self.store.active_entry(tenant, group_id) is not None:
            return None  # its own entry: merged after its build, if at all
        found = [
            (entry, survivor)
            for entry, _ in candidates
            if entry.group_id != group_id
            and (survivor := self.store.get_group(tenant, entry.group_id)) is not None
            and survivor.label is None
        ]
        found.sort(key=lambda pair: (pair[1].created_at, pair[1].id))
        for entry, _ in found:
            event = self.merger.fold(
                tenant,
                entry.group_id,
                group_id,
                lambda survivor: self._plan(tenant, group_id, survivor),
            )
            if event is not None:
                return event
        return None

    def _plan(self, tenant: str, group_id: str, survivor: Entry) -> Fold | None:
        """What the group brings to ``survivor``, read under both leases: None unless the group
        still has no entry and every example of it is ``survivor``'s computation, checked in the
        sandbox."""
        if self.store.active_entry(tenant, group_id) is not None:
            return None
        ours = self.index.computation(survivor)
        our_types = {v.name: v.type for v in survivor.template}
        prefix = survivor.validation.get("shared_prefix") or ""
        pairs: list[tuple[str, dict[str, Any]]] = []
        answers: list[Any] = []
        names: dict[str, str] | None = None
        examples = self.store.examples(tenant, group_id)
        for example in examples:
            read = lifted_example(example)
            names = parameter_map(read.computation, read.types, ours, our_types) if read else None
            text = request_text(example.question, example.context)
            if read is None or names is None or not _words(text).startswith(_words(prefix)):
                return None
            values = {names[k]: v for k, v in read.lifted.defaults.items()}
            if not self._reproduces(tenant, read, survivor, values):
                return None
            pairs.append((strip_prefix(text, prefix), values))
            answers.append(example.answer)
        if not examples:
            return None
        profile = learn_profile(
            survivor.template, pairs, answers, word_slots=self.merger.config.route_word_slots
        )
        # The survivor's accepted words after each number, and the words these examples write there
        # where the entry's program, which reproduced each one's answer, shows them right
        # (minicache.hit.words_after.with_pairs).
        run = self._runner(tenant, survivor.program)
        profile.update(with_pairs(survivor.validation.get("profile") or {}, pairs, run))
        return Fold(names or {}, profile, pairs, MergeBasis.PROGRAMS)

    def _runner(self, tenant: str, program: str) -> Callable[[dict[str, Any]], Any]:
        """``program``'s answer on a set of values, run in the sandbox (None where it fails)."""

        def run(values: dict[str, Any]) -> Any:
            try:
                return self.sandbox.run(program, values, tenant=tenant).value
            except ProgramError:
                return None

        return run

    def _reproduces(
        self, tenant: str, read: LiftedExample, survivor: Entry, values: dict[str, Any]
    ) -> bool:
        """Whether the example's lifted program on its own values, and the entry's program on them
        renamed (``values``), both run in the sandbox to the example's recorded answer."""
        want = read.example.answer
        try:
            for program, kwargs in (
                (read.lifted.program, read.lifted.defaults),
                (survivor.program, values),
            ):
                if not answers_match(self.sandbox.run(program, kwargs, tenant=tenant).value, want):
                    return False
        except ProgramError:
            return False
        return True
