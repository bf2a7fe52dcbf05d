"""The hit checks by name: what a refusal says refused it (:attr:`minicache.errors.HitRefused.check`).

A closed vocabulary: the hit stage raises a refusal under one of these names and reads them back
where a refusal decides what follows (a second choice, a revision of the entry). They are the
strings that events and refusal records carry; a StrEnum compares equal to, and serializes as,
its string.
"""

from __future__ import annotations

from enum import StrEnum


class Check(StrEnum):
    # Extraction: the zero-model readings disagree, or a model's choice contradicts them.
    RULE = "rule"  # a learned rule reads another value (minicache.hit.rules)
    ALIGN = (
        "align"  # alignment with the exemplars reads another value, or none (minicache.hit.align)
    )
    # A rule's or an alignment's reading of slots of one kind that nothing independent tells apart
    # (minicache.hit.independence), or a model's choice of them that the words around their numbers
    # contradict (minicache.hit.corroboration).
    UNCORROBORATED = "uncorroborated"
    REORDER = "reorder"  # the model chose otherwise with the variables in reverse order
    # Corroboration of the model's choice (minicache.hit.corroboration).
    DUPLICATE = "duplicate"  # one number written once fills two variables
    CONTEXT = "context"  # the words around another number describe the variable better
    SWAP = "swap"  # the chosen numbers fit their words better in another order
    MARGIN = "margin"  # the decoder chose by too small a log-probability margin
    # Plausibility against the group's profile (minicache.hit.profile).
    RANGE = "range"  # a value outside the sign or magnitude of the examples' values
    # A value not written in the form (percent, money) or the unit kind ("unit:minute") every
    # example wrote it in (minicache.hit.profile).
    UNIT = "unit"
    # A value followed by another word than the entry accepts after it ("seconds" for "minutes";
    # minicache.hit.words_after).
    WORD_AFTER = "word-after"
    # A request that leaves out a word every validated example wrote ("minutes" asked where every
    # example asked "hours"; minicache.hit.wording).
    WORDING = "wording"
    UNWRITTEN = "unwritten"  # a value the request does not write, where the examples wrote theirs
    ANSWER = "answer"  # the answer outside the sign or magnitude of the group's answers
    # The entry's standing (minicache.hit.audits, minicache.hit.model_record).
    PROBATION = "probation"  # a new entry's first attempts are compared with the miss path
    AUDIT = "audit"  # a demoted entry serves zero-model hits only
    MODEL_RECORD = "model-record"  # the small model's choices have not paid for their seconds
