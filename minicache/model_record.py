"""Whether asking the small model still pays for an entry, from what its choices have earned so far.

A hit that neither the rules nor the alignment can read goes to the small model, and its choice is
served only if every corroboration check passes (:mod:`minicache.hit`). Where a group keeps
sending requests its entry's program does not fit, the checks keep refusing, and each refusal adds
the model's seconds to the miss that follows. On formula-v25 (2026-12-06) the small model's choices
for Purchasing Power Parity's entry (its requests solve for three different unknowns) were refused
on every one of about a dozen requests, 0.2-2.8 s each on top of a 5-7 s miss.

Asking costs the model's seconds ``m`` every time and saves a miss of ``M`` seconds when the choice
is served, so it pays while

    p x M > m

with ``p`` the share of the entry's choices served. The record is kept per program (a refusal
review's revision keeps its program and its record; a rebuild with another program starts afresh),
in this process, like the admission estimates (:mod:`minicache.admission`). ``p`` is the optimistic
end of the record's Wilson interval (``z`` = :attr:`VerifyConfig.model_gate_z`), so the model is
declined only once its record shows, with that confidence, that asking does not pay; ``m`` is the
mean of its attempts' seconds and ``M`` the admission's measured miss cost (until a miss has been
measured, the model is always asked). Calls shorter than ``min_s`` (a tenth of a second) are always
made: the gate is there to save seconds, few are saved below that, and timings that small are
mostly noise (a scripted fake's, a fast server's). Declining costs no trust: the request pays for the miss it
would most likely have paid for anyway, and zero-model hits are served as before.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass

from .hit import wilson_upper
from .store.base import Entry


@dataclass
class Record:
    served: int = 0
    refused: int = 0
    seconds: float = 0.0

    @property
    def attempts(self) -> int:
        return self.served + self.refused


class ModelRecord:
    """Each entry program's record of the small model's choices: served, refused, seconds."""

    def __init__(self, z: float = 1.0, min_s: float = 0.1) -> None:
        self.z, self.min_s = z, min_s
        self._records: dict[tuple[str, str, str], Record] = {}
        self._lock = threading.Lock()

    @staticmethod
    def key(tenant: str, entry: Entry) -> tuple[str, str, str]:
        return tenant, entry.group_id, hashlib.sha256(entry.program.encode()).hexdigest()

    def observe(self, tenant: str, entry: Entry, served: bool, seconds: float) -> None:
        """One hit attempt in which the small model chose values: served, or refused by a check."""
        with self._lock:
            record = self._records.setdefault(self.key(tenant, entry), Record())
            if served:
                record.served += 1
            else:
                record.refused += 1
            record.seconds += max(0.0, seconds)

    def get(self, tenant: str, entry: Entry) -> Record:
        with self._lock:
            found = self._records.get(self.key(tenant, entry))
            return Record(found.served, found.refused, found.seconds) if found else Record()

    def declines(self, tenant: str, entry: Entry, miss_s: float | None) -> str | None:
        """Why the small model is not asked for this entry now (see the module doc), or None."""
        record = self.get(tenant, entry)
        if miss_s is None or miss_s <= 0 or record.attempts == 0:
            return None
        model_s = record.seconds / record.attempts
        if model_s < self.min_s:
            return None
        upper = wilson_upper(record.served, record.attempts, self.z)
        if upper * miss_s > model_s:
            return None
        return (f"the small model's choices for this entry were served {record.served} of {record.attempts} "
                f"times ({model_s:.2f} s each); at most {upper:.0%} would be, and asking pays only above "
                f"{model_s / miss_s:.0%} against a {miss_s:.2f} s miss")
