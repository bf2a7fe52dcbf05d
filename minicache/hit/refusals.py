"""Learning from refusals that the miss path shows unfounded.

A refused hit is answered by the miss path, so each refusal comes with a reference answer already
paid for. When the would-be hit's values give that answer through the entry's program, and the
check's own reading does not, the check was wrong about this request, and it would refuse every
request written the same way again. One Formula run refused 11 hits because a learned rule read the
price as the earnings per share (Price-to-Earnings, 5 times) or a CPI in the other's place
(Inflation, 3): each time the small model's or alignment's values gave the miss path's answer and
the rule's did not.

What a refusal can teach, and nothing else (each change rests on evidence from two independent
paths, the entry's program on the refused values and the target's own program, and covers only
what that evidence shows; for a word after a number, it shows a variable's unit where the answer
depends on that unit and counts in a unit of its own, and the review checks the first, below):

* ``rule``: when alignment's values gave the reference answer and the rules' did not, the rules of
  the variables whose reading differs from alignment's are dropped; those variables are then read
  by alignment. A rule the *model* contradicts is kept even when the model was right: "a rule and
  the model agree" is one of the checks a model-chosen value must pass, and a rule wrong once still
  tells a clear request from a muddled one. Dropping a Price-to-Book rule that way once served the
  model's next wrong choice on that group, which the rule's disagreement had refused before.
* ``range``: the refused value joins the variable's observed values (``profile.values``).
* ``answer``: the refused answer joins the group's answers (``profile.answers``): a trade balance
  seen negative twice may be positive.
* ``uncorroborated``: when the refused rule or alignment reading gave the reference answer, the
  words around each of its colliding slots' numbers join that slot's cue words (``profile.cues``),
  which the cue reader reads; when a rule reading did not and the cue reader's order did, the rules
  of the slots the two read differently are dropped.
* ``context``: the words around the value the model chose join the variable's cue words
  (``profile.cues``), so the words around another number no longer outscore them for a request
  written this way. On Formula, 8 context revisions each learned the words of one request, and none
  turned a later request into a hit.
* ``word-after``: when the refused values gave the reference answer, and the entry's program gives
  another answer with the refused variables' values all scaled up by one factor, and another again
  with them all scaled down by it (so that the answer depends on the unit they are written in; a
  scaled run that fails shows nothing), the words the request wrote after the numbers the entry
  accepts no word for are learned (:func:`minicache.hit.words_after.learn`). One refused variable's
  word, the other recorded variables written with their examples' words, joins the words the entry
  accepts there (``profile.words_after``, ``profile.scales``): "mins" where the examples wrote
  "minutes". Words of several variables, or of one beside a number written with no word, are
  learned as one set (``profile.learned_words``), which passes only a request that writes that set
  all together: "5 kg and 3 kg" is 8 for a sum built on grams as on kilograms, and teaches "kg"
  for both numbers, not "500 grams and 2 kg". 1800 seconds read as minutes gives 75.0 where the
  answer is 1.25, and teaches nothing; nor does "1800 seconds of a 5400 seconds film" for a share,
  whose answer is one number in any one unit, nor the full hours in "20 seconds and 30 seconds"
  (0 read as minutes too; only the scale up changes it), nor a number the request writes with two
  words ("5 pears ... 5 miles").

* ``wording``: when the refused values gave the reference answer, it counts as evidence for each
  word the request left out of those every validated example wrote, or wrote among operation words
  none wrote (``profile.wording_evidence``, :mod:`minicache.hit.wording`); a word with matching
  answers from two refusals that answered differently stops being required, or joins the operation
  words ("exercises" where every example wrote "practices"). One match can be a coincidence: the
  perimeter of a 6 by 3 plot is 18, as its area is. "How many minutes" to an entry whose examples
  asked "how many hours" gives another answer, and teaches nothing.

The revision is a new version of the entry (same program, counters carried over), written under the
group's build lease (:meth:`minicache.hit.path.HitPath.review_refusal`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from minicache.errors import HitRefused
from minicache.hit.align import same_value
from minicache.hit.checks import Check
from minicache.hit.wording import reviewed
from minicache.hit.words_after import learn
from minicache.programs.signature import answers_match
from minicache.store.base import Entry

LEARNABLE = (
    Check.RULE,
    Check.RANGE,
    Check.ANSWER,
    Check.CONTEXT,
    Check.UNCORROBORATED,
    Check.WORD_AFTER,
    Check.WORDING,
)


@dataclass
class Revision:
    """What one unfounded refusal changes in an entry."""

    rules: dict[str, Any]
    validation: dict[str, Any]
    note: dict[
        str, Any
    ]  # kept in validation["revisions"]: the check, the variables, the request's answer


def revise(
    entry: Entry, refused: HitRefused, reference: Any, run: Callable[[dict[str, Any]], Any]
) -> Revision | None:
    """The entry's rules and validation after ``refused``, given the miss path's ``reference`` answer,
    or None when the refusal was founded or nothing can be learned. ``run`` gives the entry's
    program's answer on a set of values (None if it fails)."""
    readings = refused.readings or {}
    if refused.check not in LEARNABLE or reference is None or not readings:
        return None
    if refused.check == Check.RULE:
        return _drop_rules(entry, readings, reference, run)
    if refused.check == Check.UNCORROBORATED:
        return _tell_apart(entry, readings, reference, run)
    values = readings.get("hit")
    if values is None:
        return None
    answer = refused.answer if refused.check == Check.ANSWER else run(values)
    if answer is None or not answers_match(answer, reference):
        return None
    validation = copy.deepcopy(entry.validation)
    profile = validation.setdefault("profile", {})
    if refused.check == Check.ANSWER:
        profile.setdefault("answers", []).append(answer)
        note = {"check": Check.ANSWER, "answer": answer}
    elif refused.check == Check.CONTEXT:
        known = (profile.get("cues") or {}).get(refused.variable or "", [])
        new = sorted(set(refused.cues or []) - set(known))
        if refused.variable is None or not new:
            return None
        profile.setdefault("cues", {})[refused.variable] = sorted([*known, *new])
        note = {"check": Check.CONTEXT, "variable": refused.variable, "cues": new}
    elif refused.check == Check.WORD_AFTER:
        learned = learn(profile, readings.get("written") or {}, values, run)
        if not learned:
            return None
        note = {"check": Check.WORD_AFTER, "accepted": learned}
    elif refused.check == Check.WORDING:
        words = readings.get("wording") or {}
        if not any(words.get(kind) for kind in ("missing", "extra", "asked", "of")):
            return None
        note = {"check": Check.WORDING, **reviewed(profile, words, reference)}
    else:
        name = refused.variable
        if name is None or not isinstance(values.get(name), (int, float)):
            return None
        profile.setdefault("values", {}).setdefault(name, []).append(values[name])
        note = {"check": Check.RANGE, "variable": name, "value": values[name]}
    return _with_note(entry.rules, validation, note)


def _drop_rules(
    entry: Entry,
    readings: dict[str, dict[str, Any]],
    reference: Any,
    run: Callable[[dict[str, Any]], Any],
) -> Revision | None:
    by_rules = readings.get("rule")
    if by_rules is None or _gives(run, by_rules, reference):
        return None
    proven = readings.get("align")  # zero-model values only (see the module docstring)
    if proven is None or not _gives(run, proven, reference):
        return None
    return _without_misreading_rules(entry, by_rules, proven, Check.RULE)


def _tell_apart(
    entry: Entry,
    readings: dict[str, dict[str, Any]],
    reference: Any,
    run: Callable[[dict[str, Any]], Any],
) -> Revision | None:
    """An uncorroborated reading (:mod:`minicache.hit.independence`) that gave the miss answer: the
    words around each slot's number join its cue words, so that the cue reader tells the slots apart
    in a request written this way. A rule reading that did not, where the cue reader's order did:
    the rules of the slots the two orders read differently are dropped."""
    values, words = readings.get("hit"), readings.get("words") or {}
    if values is None:
        return None
    if _gives(run, values, reference):
        validation = copy.deepcopy(entry.validation)
        learned = (validation.setdefault("profile", {})).setdefault("cues", {})
        new = {
            name: sorted(set(said) - set(learned.get(name, [])))
            for name, said in words.items()
            if set(said) - set(learned.get(name, []))
        }
        if not new:
            return None
        for name, added in new.items():
            learned[name] = sorted([*learned.get(name, []), *added])
        return _with_note(entry.rules, validation, {"check": Check.UNCORROBORATED, "cues": new})
    by_rules, by_cues = readings.get("rule"), readings.get("cues")
    if by_rules is None or by_cues is None or not _gives(run, by_cues, reference):
        return None
    return _without_misreading_rules(entry, by_rules, by_cues, Check.UNCORROBORATED)


def _without_misreading_rules(
    entry: Entry,
    by_rules: dict[str, Any],
    proven: dict[str, Any],
    check: Check,
) -> Revision | None:
    """The entry without the rules whose reading differs from ``proven`` (a reading the miss answer
    confirmed), noted as dropped by ``check``; None where every rule read it right."""
    wrong = sorted(
        k for k, v in by_rules.items() if k in entry.rules and not same_value(v, proven.get(k))
    )
    if not wrong:
        return None
    rules = {k: v for k, v in entry.rules.items() if k not in wrong}
    return _with_note(rules, copy.deepcopy(entry.validation), {"check": check, "dropped": wrong})


def _gives(run: Callable[[dict[str, Any]], Any], values: dict[str, Any], reference: Any) -> bool:
    answer = run(values)
    return answer is not None and answers_match(answer, reference)


def _with_note(rules: dict[str, Any], validation: dict[str, Any], note: dict[str, Any]) -> Revision:
    validation.setdefault("revisions", []).append(note)
    return Revision(rules=rules, validation=validation, note=note)
