"""The engine's knobs, in one place every stage reads (route, hit, miss, build, audits, StepCache).

Its own module so that the stages can take the configuration without importing the engine that
assembles them (which would be an import cycle).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .admission import AdmissionConfig
from .hit import VerifyConfig
from .stepcache import StepConfig


@dataclass
class EngineConfig:
    build_after: int = 3  # examples a group needs before a build
    # ... or this many, when another example with other values backs one of the group's own programs
    # (a model-free agreement: run on each other's values, they give each other's answers) and
    # admission admits it (every such group during its warm-up). Such an early build tries only those
    # candidates, never the target, and if none is trusted it records no failure: the group waits
    # for build_after. 0 switches it off. (minicache.build, docs/scale.md)
    build_early: int = 2
    validate_n: int = 3  # held examples a candidate entry is checked on
    validate_min: int = 2  # ... of which this many must match
    max_failures: int = 3  # in-service failures before an entry is evicted
    max_events: int = 10_000  # build/audit/evict events kept in memory (readers follow a cursor)
    # failed builds before a group is shown as uncacheable (it still backs off, then retries)
    max_build_failures: int = 3
    build_candidates: int = 2  # the group's own programs (lifted) validated per build, best first ...
    build_retries: int = 1  # ... then this many target generalization attempts
    # The newest examples whose programs are lifted and compared with each other in a build: that
    # model-free step runs candidates x examples programs, so a group that kept failing (and kept
    # gathering examples) would otherwise make each build slower, quadratically.
    build_compare: int = 12
    background_builds: bool = True
    lookup_draft: bool = False  # draft the miss program from the group's last program (bench-spec decides)
    # A miss names its group as the target's prefix_key (GenerationOptions): a backend that keeps KV
    # states then prefills only what the request does not share with the group's last miss (on Formula,
    # the formula's statement and explanation: about 1 s of a 4.6 s miss on the 2-core VM).
    keep_group_prefix: bool = True
    use_rules: bool = True
    use_choice: bool = True
    # What routing compares requests by: "lexical" (hashed word and word-pair counts of the skeleton,
    # minicache.lexical; about 0.1 ms) or "minilm" (the MiniLM sentence embedding, 20-50 ms of a core).
    route_embedder: str = "lexical"
    # None: the embedder's own calibrated threshold (lexical 0.82, minilm 0.80; docs/routing.md).
    route_threshold: float | None = None
    route_refresh_s: float = 1.0  # how often a tenant's routing index reads other replicas' new examples
    route_per_group: int = 32  # embeddings the routing index keeps per group (a representative set)
    route_exact_rows: int = 20_000  # kept rows up to which routing searches exactly (then coarse buckets)
    frozen: bool = False  # no new builds (existing entries keep serving)
    build_lease_s: float = 600.0  # how long a build may hold its group's lease before others may take over
    max_question_chars: int = 32_000
    max_context_chars: int = 200_000
    miss_max_tokens: int = 640
    # Corrected attempts after the target's program fails. Each is another target call, which PoT does
    # not make: 0 keeps a miss at one PoT call (the pot baseline has no retry either).
    miss_retries: int = 0
    # Hit verification and audits (minicache.hit, docs/hits.md).
    verify: VerifyConfig = field(default_factory=VerifyConfig)
    audit_rate: float = 0.05  # share of served hits also answered by the miss path, in the background
    # Seeds the draw of which hits are audited, so a run (and a test counting target calls) audits the
    # same hits each time; None draws from the OS.
    audit_seed: int | None = 0
    audit_delta: float = 0.01  # an entry caught wrong serves no model-chosen hit while its error bound exceeds this
    audit_z: float = 1.96  # the bound's confidence (Wilson score interval, z=1.96: 95% two-sided)
    step: StepConfig = field(default_factory=StepConfig)  # StepCache (structured outputs)
    # Which groups are built, and the back-off of failing ones (minicache.admission, minicache.failures).
    admission: AdmissionConfig = field(default_factory=AdmissionConfig)
