"""When a group is worth building, and what a failed build or an evicted entry teaches the next one.

**Admission.** A build costs time (on a small machine it slows the requests it overlaps) and only
pays back through later hits of its group. A group is built when

    P(build succeeds) x E[future arrivals] x (miss cost - hit cost) > build cost

with every term estimated from the workload as it runs:

* miss, hit and build costs are EWMAs of measured seconds. Until a cost has been measured a prior
  stands in: a hit costs ``hit_prior`` of a miss, a build ``build_prior`` misses. A build's seconds
  are its wall time less the time it waited for the compute lock (``Builder.build``): on a busy
  machine a background build spends most of its wall time waiting for requests, and taken whole
  (18-122 s on Formula) that made every build look dearer than the hits it could bring;
* a hit attempt can fall back to a miss (the entry refused or failed). Its expected cost is
  ``(1 - p) x hit + p x fallback``, with the fallback rate ``p`` smoothed towards ``fallback_prior``
  by ``prior_attempts`` pseudo-attempts. Why not one EWMA over hits and fallbacks: with five samples,
  the two fallbacks that came first made hits look 60 times as dear as they were (6.0 s against
  0.1 s on Formula) and no group was built after the warm-up;
* P(build succeeds) is (builds ok + 1) / (builds + 2) over this process's builds, for a group none
  of whose builds has failed. A group whose builds failed k times is its own evidence: its P is
  the posterior mean of a Beta prior with the process's rate as its mean and ``group_prior_weight``
  pseudo-builds, after k failures, ``w x p / (w + k)`` (halved by one failure at w = 1). Why: a
  retry differs from its failed build by one new example, and in no run whose store is kept
  (Formula, SVAMP, TAT-QA, WebShop, no-repetition) did a group whose build had failed later get
  an entry, and priced like a new group's, retries of its three big groups were 5 of a TAT-QA
  run's 8 failed builds;
* E[future arrivals | seen n] is a rate times a horizon. The rate comes from the tenant's groups
  that reached n arrivals: their arrivals after the n-th, over the requests the tenant sent since
  each of them reached n (its exposure), blended with ``prior_weight`` pseudo-groups that got n more
  over the whole stream so far (a group seen n times is, without other evidence, expected to keep
  its pace). The horizon is ``horizon_requests`` when set, else as many requests as the tenant has
  sent so far (a stream of unknown length is, at the median, half over). Why a rate: counting the
  arrivals groups have had so far after the n-th reads a young stream as one whose groups stop
  recurring (E was 1.4-2.6 after 95 Formula requests whose groups recur about 18 times each).
  Everything is kept as running sums per arrival count, so an estimate costs O(n).

**The target's generalization**, a build's dear step (55-115 s of compute on the 2-core VM against
a 4-12 s miss), is priced on its own, by the same rule, when the group's own programs have failed:

    P(generalization makes an entry) x E[future arrivals] x (miss cost - hit cost) > its cost

with P = (made + 1) / (asked + 2) and the cost the mean of its measured seconds, both over the
tenant's record in the store (the counters ``generalizations``, ``generalizations_ok``,
``generalize_ms`` of :mod:`minicache.build.step_costs`: shared by replicas, kept across
restarts), and ``generalize_prior`` misses until one is measured. Why apart from the build's
P(ok): the lifted steps are cheap and often succeed, the target's attempt is dear and made no
entry in any run whose store is kept (Formula, SVAMP, TAT-QA, WebShop, no-repetition;
docs/hits.md, section 5); priced together, each retry asked the target again (115 s and 93.4 s on
TAT-QA, each the worst block of its run).

**The small model's checks**, a build's other dear step (its reading of each held example that no
alignment reads: 1-8 s of compute a build), are priced the same way, just before a build would first
ask it:

    P(build succeeds) x E[future arrivals] x (miss cost - hit cost) > their cost

with the cost the mean of the tenant's measured builds that asked it (store counters
``model_check_builds``, ``model_check_ms``), ``model_check_prior`` misses until one is measured.
A build declined there records no failure (the group waits, as after an early build that found
nothing). Why: once a build's checks that cannot pass ask no model (:mod:`minicache.build.reach`), most
failed builds cost 0.03 s and the build cost admission learns fell with them, so on SVAMP 46
builds ran where 3 had, and the 9 that reached the model cost 0.9-2.3 s each, with requests
waiting for them; the 4 entries served no hit.

**The target's samples** (self-consistency, :mod:`minicache.build.consistency`) are k target calls
per held example, priced as that many misses on top of the build's cost; a build's measured
seconds leave them out, so they are counted once.

A group with a single arrival is never built, whatever the estimate. For the first
``warmup_requests`` requests of a process the estimates are not trusted yet and every group seen
twice is admitted: an early build (``EngineConfig.build_early``) then still needs a model-free
agreement between the group's own programs, so an unneeded one costs milliseconds.

**Learning from failure** (what a failed build or hit records, and what the next build does
with it) is :mod:`minicache.build.failures`'s.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from minicache.build.step_costs import GENERALIZE_COUNTERS, MODEL_CHECK_COUNTERS
from minicache.config.engine import AdmissionConfig

TARGET_NOT_ADMITTED = "not asked: a generalization is not expected to pay"
MODEL_CHECKS_NOT_ADMITTED = "not validated: the small model's checks are not expected to pay"


def request_cost(timings: Mapping[str, float]) -> float:
    """What a request cost, as admission observes it: the sum of its stages' seconds. ``total_s``
    (the wall time of ``solve``) is left out: it also holds any build the request ran inline."""
    return sum(v for k, v in timings.items() if k != "total_s")


PROBATION_REFUSAL = "HitRefused: probation:"  # how a probation refusal's fallback_reason starts


def observed_route(route: str | None, fallback_reason: str | None) -> str | None:
    """The route admission learns a request's cost under. A probation refusal (hit.py) is a miss by
    policy, paid once per entry as part of what a build costs, not a hit attempt that failed:
    counted among hit attempts, the first entries' probations made hits look as dear as misses,
    and no later build was admitted (on Formula: 5 builds, then none)."""
    if route == "fallback" and (fallback_reason or "").startswith(PROBATION_REFUSAL):
        return "miss"
    return route


class Ewma:
    def __init__(self, alpha: float) -> None:
        self.alpha, self.value, self.n = alpha, 0.0, 0

    def add(self, x: float) -> None:
        self.value = x if self.n == 0 else (1 - self.alpha) * self.value + self.alpha * x
        self.n += 1


class Admission:
    """Per-process estimates of what requests, hits and builds cost, and of how groups recur."""

    def __init__(self, config: AdmissionConfig | None = None) -> None:
        self.config = config or AdmissionConfig()
        a = self.config.alpha
        self.miss, self.hit, self.fallback, self.build = Ewma(a), Ewma(a), Ewma(a), Ewma(a)
        self.builds_ok = self.builds_failed = 0
        self.requests = 0
        self.build_s_total = 0.0  # seconds of finished builds (a benchmark reports it per request)
        self._arrivals: dict[str, Counter[str]] = {}  # tenant -> group -> arrivals
        self._sent: Counter[str] = Counter()  # tenant -> requests
        self._reached: dict[str, Counter[int]] = {}  # tenant -> k -> groups that reached k arrivals
        self._reached_at: dict[
            str, Counter[int]
        ] = {}  # tenant -> k -> sum of the tenant's request count then
        self._lock = threading.Lock()
        # Told of every finished build (seconds, ok), outside the lock: lets a benchmark record each
        # build with the request it finished before, so a later process can replay it (``replay``).
        self.on_build: Callable[[float, bool | None], None] | None = None

    # -- observations ------------------------------------------------------------------------
    def observe_request(self, tenant: str, group_id: str, route: str, seconds: float) -> None:
        """One served request: its group's arrival, and its cost by route (build time excluded)."""
        with self._lock:
            counts = self._arrivals.setdefault(tenant, Counter())
            counts[group_id] += 1
            self._sent[tenant] += 1
            k = counts[group_id]
            self._reached.setdefault(tenant, Counter())[k] += 1
            self._reached_at.setdefault(tenant, Counter())[k] += self._sent[tenant]
            self.requests += 1
            if route == "miss":
                self.miss.add(seconds)
            elif route == "hit":
                self.hit.add(seconds)
            elif route == "fallback":
                self.fallback.add(seconds)

    def observe_build(self, seconds: float, ok: bool | None) -> None:
        """A build's compute seconds and outcome; ``ok`` None is an early build that made no entry and
        recorded nothing (minicache.build.builder.NOT_YET): its seconds are spent, but it is no build outcome."""
        with self._lock:
            self.build_s_total += seconds
            if ok is None:
                pass
            elif ok:
                self.build.add(seconds)
                self.builds_ok += 1
            else:
                self.build.add(seconds)
                self.builds_failed += 1
        if self.on_build is not None:
            self.on_build(seconds, ok)

    def replay(self, events: Iterable[tuple[Any, ...]]) -> None:
        """Restore the estimates of an earlier process from what it observed, in order: each event is
        ``("request", tenant, group_id, route, seconds)`` or ``("build", seconds, ok)`` (ok: see :meth:`observe_build`).

        Why re-observe instead of loading saved numbers: the state is then by construction the one
        the earlier process reached (same EWMAs, counts, histogram, warm-up), there is no second
        format to keep in step with the estimates, and a caller that keeps its own record of the
        observations (a benchmark's request rows) needs nothing else saved. ``on_build`` is not told."""
        hook, self.on_build = self.on_build, None
        try:
            for event in events:
                if event[0] == "request":
                    self.observe_request(*event[1:])
                elif event[0] == "build":
                    self.observe_build(*event[1:])
                else:
                    raise ValueError(f"unknown admission event {event[0]!r}")
        finally:
            self.on_build = hook

    def snapshot(self) -> dict[str, Any]:
        """Everything the estimates are made of, as plain data: two processes that observed the same
        events compare equal (how a benchmark's resume is checked), and a script can print it."""
        with self._lock:
            costs = {
                name: (e.value, e.n)
                for name, e in (
                    ("miss", self.miss),
                    ("hit", self.hit),
                    ("fallback", self.fallback),
                    ("build", self.build),
                )
            }
            return {
                "costs": costs,
                "builds_ok": self.builds_ok,
                "builds_failed": self.builds_failed,
                "requests": self.requests,
                "build_s_total": self.build_s_total,
                "arrivals": {t: dict(c) for t, c in self._arrivals.items()},
                "sent": dict(self._sent),
                "reached": {t: dict(c) for t, c in self._reached.items()},
                "reached_at": {t: dict(c) for t, c in self._reached_at.items()},
            }

    def arrivals(self, tenant: str, group_id: str) -> int:
        with self._lock:
            return self._arrivals.get(tenant, Counter())[group_id]

    # -- the decision ------------------------------------------------------------------------
    def expected_future(self, tenant: str, n: int) -> float:
        """E[arrivals after the n-th] for a group seen n times, from the tenant's groups (see module doc)."""
        with self._lock:
            sent = self._sent[tenant]
            reached, reached_at = (
                self._reached.get(tenant, Counter()),
                self._reached_at.get(tenant, Counter()),
            )
            # Every arrival is some group reaching some k, so the arrivals after the n-th (those
            # reaching k > n) are all arrivals less those reaching k <= n.
            more = sent - sum(reached[k] for k in range(1, n + 1))
            exposure = reached[n] * sent - reached_at[n]  # requests sent since each group reached n
        if not sent:
            return float(n)
        w = self.config.prior_weight
        rate = (more + w * n) / (exposure + w * sent)
        return rate * (self.config.horizon_requests or sent)

    def miss_cost(self) -> float | None:
        """Seconds a miss costs (the EWMA), None until one has been measured."""
        with self._lock:
            return self.miss.value if self.miss.n else None

    def hit_attempt_cost(self) -> tuple[float, float]:
        """Expected seconds of a hit attempt, and the fallback rate it assumes (see module doc)."""
        c, miss = self.config, self.miss.value
        hit = self.hit.value if self.hit.n else c.hit_prior * miss
        fallback = self.fallback.value if self.fallback.n else (1 + c.hit_prior) * miss
        p = (self.fallback.n + c.fallback_prior * c.prior_attempts) / (
            self.fallback.n + self.hit.n + c.prior_attempts
        )
        return (1 - p) * hit + p * fallback, p

    def build_success(self, failures: int = 0) -> float:
        """P(a build succeeds) for a group whose builds failed ``failures`` times (module doc)."""
        p = (self.builds_ok + 1) / (self.builds_ok + self.builds_failed + 2)
        w = self.config.group_prior_weight
        return p if failures <= 0 else w * p / (w + failures)

    def estimate(
        self, tenant: str, n: int, first_misses: int = 0, failures: int = 0, samples: int = 0
    ) -> dict[str, float]:
        """The terms of the decision for a group seen ``n`` times, and the expected gain in seconds.
        ``first_misses``: arrivals after the build that the new entry answers as misses anyway (its
        probation, docs/hits.md); they bring no gain. ``failures``: the group's failed builds.
        ``samples``: the target calls the build draws (self-consistency), each priced as a miss."""
        miss = self.miss.value
        hit, p_fallback = self.hit_attempt_cost()
        build = self.build.value if self.build.n else self.config.build_prior * miss
        build += samples * miss
        p_ok = self.build_success(failures)
        future = max(0.0, self.expected_future(tenant, n) - first_misses)
        return {
            "n": n,
            "future": future,
            "p_ok": p_ok,
            "miss_s": miss,
            "hit_s": hit,
            "p_fallback": p_fallback,
            "build_s": build,
            "samples": samples,
            "gain_s": p_ok * future * (miss - hit) - build,
        }

    def generalization_estimate(
        self, tenant: str, n: int, record: Mapping[str, int], first_misses: int = 0
    ) -> dict[str, float]:
        """The terms of asking the target to generalize a group seen ``n`` times, from the tenant's
        ``record`` (its counters: :data:`GENERALIZE_COUNTERS`), and the expected gain in seconds."""
        asked, made, ms = (record.get(name, 0) for name in GENERALIZE_COUNTERS)
        miss = self.miss.value
        hit, _ = self.hit_attempt_cost()
        cost = ms / 1000 / asked if asked else self.config.generalize_prior * miss
        p_ok = (made + 1) / (asked + 2)
        future = max(0.0, self.expected_future(tenant, n) - first_misses)
        return {
            "n": n,
            "asked": asked,
            "made": made,
            "p_ok": p_ok,
            "future": future,
            "miss_s": miss,
            "hit_s": hit,
            "cost_s": cost,
            "gain_s": p_ok * future * (miss - hit) - cost,
        }

    def model_check_estimate(
        self,
        tenant: str,
        n: int,
        record: Mapping[str, int],
        first_misses: int = 0,
        failures: int = 0,
    ) -> dict[str, float]:
        """The terms of a build's small-model checks for a group seen ``n`` times whose builds failed
        ``failures`` times, their cost from the tenant's ``record`` (:data:`MODEL_CHECK_COUNTERS`)."""
        builds, ms = (record.get(name, 0) for name in MODEL_CHECK_COUNTERS)
        miss = self.miss.value
        hit, _ = self.hit_attempt_cost()
        cost = ms / 1000 / builds if builds else self.config.model_check_prior * miss
        p_ok = self.build_success(failures)
        future = max(0.0, self.expected_future(tenant, n) - first_misses)
        return {
            "n": n,
            "p_ok": p_ok,
            "future": future,
            "miss_s": miss,
            "hit_s": hit,
            "cost_s": cost,
            "gain_s": p_ok * future * (miss - hit) - cost,
        }

    def model_checks_declined(
        self,
        tenant: str,
        n: int,
        record: Mapping[str, int],
        first_misses: int = 0,
        failures: int = 0,
    ) -> str | None:
        """Why a build does not ask the small model to read its held examples (module doc), or None
        when it asks: always, until the estimates are trusted."""
        t = self.model_check_estimate(tenant, n, record, first_misses, failures)
        if not self.trusted() or t["gain_s"] > 0:
            return None
        return (
            f"{MODEL_CHECKS_NOT_ADMITTED} ({t['p_ok']:.2f} x {t['future']:.1f} arrivals x "
            f"{t['miss_s'] - t['hit_s']:.1f} s against {t['cost_s']:.1f} s)"
        )

    def target_declined(
        self, tenant: str, n: int, record: Mapping[str, int], first_misses: int = 0
    ) -> str | None:
        """Why a build whose own programs failed does not ask the target to generalize a group seen
        ``n`` times (module doc), or None when it asks: always, until the estimates are trusted."""
        t = self.generalization_estimate(tenant, n, record, first_misses)
        if not self.trusted() or t["gain_s"] > 0:
            return None
        return (
            f"{TARGET_NOT_ADMITTED} ({t['made']:.0f} of the tenant's {t['asked']:.0f} made an entry; "
            f"{t['p_ok']:.2f} x {t['future']:.1f} arrivals x {t['miss_s'] - t['hit_s']:.1f} s "
            f"against {t['cost_s']:.1f} s)"
        )

    def trusted(self) -> bool:
        """Whether the estimates decide (admission on, misses measured, the warm-up over); until then
        every group seen twice is admitted."""
        return (
            self.config.enabled
            and bool(self.miss.n)
            and self.requests >= self.config.warmup_requests
        )

    def admits(
        self, tenant: str, n: int, first_misses: int = 0, failures: int = 0, samples: int = 0
    ) -> tuple[bool, dict[str, float]]:
        """Whether a group seen ``n`` times is worth building now (``first_misses``, ``failures``,
        ``samples``: see :meth:`estimate`)."""
        terms = self.estimate(tenant, n, first_misses, failures, samples)
        if n < 2:  # a one-off group is never built
            return False, terms
        if not self.trusted():
            return True, terms
        return terms["gain_s"] > 0, terms
