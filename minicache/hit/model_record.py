"""Whether asking the small model still pays for an entry, from what its choices have earned so far.

A hit that neither the rules nor the alignment can read goes to the small model, and its choice is
served only if every corroboration check passes (:mod:`minicache.hit.verify`). Where a group keeps
sending requests its entry's program does not fit, the checks keep refusing, and each refusal adds
the model's seconds to the miss that follows. On Formula the small model's choices for Purchasing
Power Parity's entry (its requests solve for three different unknowns) were refused
on every one of about a dozen requests, 0.2-2.8 s each on top of a 5-7 s miss.

Asking costs the model's seconds ``m`` every time and saves a miss of ``M`` seconds when the choice
is served, so it pays while

    p x M > m

with ``p`` the share of the entry's choices served. Each entry keeps its record in the store
(``model_served``, ``model_refused``, ``model_ms``: shared by replicas, kept across restarts, carried
into a refusal review's revision, which keeps the program). ``p`` is the optimistic end of the
record's Wilson interval (``z`` = :attr:`VerifyConfig.model_gate_z`), so the model is declined only
once its record shows, with that confidence, that asking does not pay; ``m`` is the mean of its
attempts' seconds and ``M`` the admission's measured miss cost (until a miss has been measured, the
model is always asked). Calls shorter than ``min_s`` (a tenth of a second) on average are always
made: the gate is there to save seconds, few are saved below that, and timings that small are
mostly noise (a scripted fake's, a fast server's). Declining costs no trust: the request pays for
the miss it would most likely have paid for anyway, and zero-model hits are served as before.
"""

from __future__ import annotations

from minicache.hit.audits import wilson_upper
from minicache.store.base import Entry


def model_declined(
    entry: Entry, miss_s: float | None, z: float = 1.0, min_s: float = 0.1
) -> str | None:
    """Why the small model is not asked for ``entry`` now (see the module doc), or None."""
    attempts = entry.model_served + entry.model_refused
    if miss_s is None or miss_s <= 0 or attempts == 0:
        return None
    model_s = entry.model_ms / 1000 / attempts
    if model_s < min_s:
        return None
    upper = wilson_upper(entry.model_served, attempts, z)
    if upper * miss_s > model_s:
        return None
    return (
        f"the small model's choices for this entry were served {entry.model_served} of {attempts} times "
        f"({model_s:.2f} s each); at most {upper:.0%} would be, and asking pays only above "
        f"{model_s / miss_s:.0%} against a {miss_s:.2f} s miss"
    )
