"""The engine's knobs, in one place every stage reads (route, hit, miss, build, audits, StepCache).

Its own module so that the stages can take the configuration without importing the engine that
assembles them (which would be an import cycle).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

ROUTE_EMBEDDERS = ("lexical", "minilm")  # EngineConfig.route_embedder


class Wording(StrEnum):
    """What the wording check holds a hit's question to (``VerifyConfig.wording``,
    minicache.hit.wording)."""

    OFF = "off"  # nothing
    OPERATIONS = "operations"  # no operation word the examples' questions did not write
    ASKED = "asked"  # that, and the asked quantity's words every example's question wrote
    FULL = "full"  # that, and every content word every example's question wrote


@dataclass
class AdmissionConfig:
    enabled: bool = True
    # Requests observed before the estimates are trusted; until then build_after alone decides
    # (a few measurements make a noisy EWMA, and short streams would otherwise never build).
    warmup_requests: int = 30
    alpha: float = 0.2  # EWMA weight of the newest measurement
    hit_prior: float = 0.2  # a hit's cost as a share of a miss's, until hits are measured
    build_prior: float = 1.0  # a build's cost in misses, until builds are measured
    fallback_prior: float = 0.2  # share of hit attempts that fall back, before any is measured ...
    prior_attempts: float = 5.0  # ... held with the weight of this many attempts
    prior_weight: float = 1.0  # pseudo-groups behind the "keeps its pace" prior
    # Pseudo-builds at the process's success rate behind a group's own failed builds (module doc).
    group_prior_weight: float = 1.0
    # Requests ahead that a build's hits are counted over; None: as many as the tenant has sent.
    # Set it when the traffic is known (e.g. a tenant's daily volume when processes restart daily).
    horizon_requests: int | None = None
    # A target generalization's cost in misses until the tenant's are measured (on a 2-core machine:
    # 13-15 misses on Formula, 5.6-10 on TAT-QA; docs/hits.md, section 5).
    generalize_prior: float = 8.0
    # A build's small-model checks, in misses, until the tenant's are measured (on a 2-core machine:
    # 1.0-2.3 s against a 2.0 s SVAMP miss, 2.8-8.3 s against an 11 s TAT-QA miss).
    model_check_prior: float = 0.5
    backoff_s: float = 60.0  # back-off after a group's second failed build; doubles with each after
    backoff_max_s: float = 86_400.0


@dataclass
class VerifyConfig:
    """Knobs of the hit checks (see docs/hits.md for how they were chosen)."""

    value_range: float = 100.0  # a value may lie this factor outside the examples' magnitudes
    answer_range: float = 1000.0  # ... and the answer this factor outside the examples' answers
    min_margin: float = 1.0  # the decoder's log-probability gap, chosen vs runner-up (nats)
    exemplars: int = 3  # exemplars kept per entry for alignment
    align: bool = True  # zero-model alignment with exemplars (EngineConfig.use_rules=False switches it off too)
    # a second model call with the variables in reverse order must agree
    reorder_check: bool = False
    # A refuted value taken out, the model chooses once more (HitVerifier._second_choice). Off: replayed
    # on Formula's refutations it made no hit (docs/hits.md).
    second_choice: bool = False
    # The values the entry's learned rules read are given to the small model, which chooses only the
    # rest (HitVerifier.pinned). Off: it chooses every value and a rule it contradicts refuses the hit.
    # On: replayed on Formula's rule/align refusals and model-chosen hits it made more hits and no new
    # wrong one (docs/hits.md, section 2).
    pin_readings: bool = True
    # A rule's or an alignment's reading is served only where its slots of one kind are told apart by
    # the other zero-model reader, the words around the numbers or the group's record of their sizes
    # (minicache.hit.independence). Off: such a reading is served on its own.
    corroborate_zero_model: bool = True
    # The question's words (minicache.hit.wording): "operations" refuses a hit whose question writes
    # an operation word ("more", "average", "percentage") none of the entry's validated examples'
    # questions wrote; "asked" (the default) also refuses one that does not write the words of the
    # quantity every example asked for, or asks for another ("How many minutes" to an entry whose
    # examples all asked "how many hours", "its perimeter" to one that computes an area); "full"
    # also refuses one that leaves out any content word every example wrote. "full" stays off by
    # default: on the Formula stream, records learned from two or three examples required incidental
    # words ("company", "portfolio") and refused most of the first would-be hits (docs/hits.md).
    # "off": none of them.
    wording: Wording = Wording.ASKED
    # Probation (layer 5): a new entry's first `probation` hit attempts are answered by the miss path
    # and compared with the would-be hit; one disagreement evicts it. A tenant whose probations mostly
    # pass (at least `probation_tenant_min` run, failure estimate (failed+1)/(run+2) at most
    # `probation_max_failure`) has shown that routing keeps its computations apart: its new entries
    # skip probation, except every `probation_every`-th, so the record follows the workload. 0 switches
    # probation off. (docs/hits.md: the rates measured on SVAMP and Formula these were chosen between.)
    # `probation` is the length for an entry stored without a contradiction; each contradiction its
    # stored validation holds (a held example it got wrong, split samples, a revision) adds one
    # comparison, up to `probation_max` (minicache.hit.scrutiny.probation_length).
    probation: int = 1
    probation_tenant_min: int = 5
    probation_max_failure: float = 0.35
    probation_every: int = 4
    probation_max: int = 3  # the longest probation the contradictions in an entry's record can make
    # The share of an entry's hits audited starts at EngineConfig.audit_rate, grows with the doubts in
    # its record and shrinks with its agreeing audits, within these bounds; the floor is reached once
    # its failure bound is under audit_delta (minicache.hit.scrutiny.audit_share).
    audit_rate_min: float = 0.005
    audit_rate_max: float = 0.5  # the highest audit share the doubts in an entry's record can raise
    # The small model is not asked for an entry whose choices have not paid for their seconds
    # (minicache.hit.model_record: z, the bound's confidence; calls under min_s are always made).
    model_gate: bool = True
    model_gate_z: float = 1.0
    model_gate_min_s: float = 0.1


@dataclass
class StepConfig:
    threshold: float = 0.80  # cosine between masked requests for a cached request to be considered
    # linear equations: model repairs per failing step after its patch, before the solver
    repair_rounds: int = 0
    # linear equations: more failing steps than this go to the solver unpatched
    max_patched_steps: int = 2
    # same-frame cached requests adapted to find the one needing the fewest patches
    candidates: int = 4
    max_tokens: int = 200  # a full generation
    patch_max_tokens: int = 64  # one patched step


@dataclass
class EngineConfig:
    build_after: int = 3  # examples a group needs before a build
    # ... or this many, when another example with other values backs one of the group's own programs
    # (a model-free agreement: run on each other's values, they give each other's answers) and
    # admission admits it (every such group during its warm-up). Such an early build tries only those
    # candidates, never the target, and if none is trusted it records no failure: the group waits
    # for build_after. 0 switches it off. (minicache.build.builder, docs/scale.md)
    build_early: int = 2
    validate_n: int = 3  # held examples a candidate entry is checked on
    validate_min: int = 2  # ... of which this many must match
    max_failures: int = 3  # in-service failures before an entry is evicted
    max_events: int = 10_000  # build/audit/evict events kept in memory (readers follow a cursor)
    # failed builds before a group is shown as uncacheable (it still backs off, then retries)
    max_build_failures: int = 3
    # the group's own programs (lifted) validated per build, best first ...
    build_candidates: int = 2
    build_retries: int = 1  # ... then this many target generalization attempts
    # The newest examples whose programs are lifted and compared with each other in a build: that
    # model-free step runs candidates x examples programs, so a group that kept failing (and kept
    # gathering examples) would otherwise make each build slower, quadratically.
    build_compare: int = 12
    # Self-consistency (minicache.build.consistency): a build asks the target the miss prompt this many
    # times per held example; each example's most common computation is its winner, the entry is the
    # computation more than half the winners (validate_min at least) write, a minority's examples held
    # as recorded, and more than build_agreement of all samples must have written their example's
    # winner (else the group is not built). 1: no samples, the miss programs as they are. Each sample
    # is a target call, priced by admission. Off by default: on Formula the samples delayed builds
    # far more than they improved entries (docs/results.md).
    build_samples: int = 1
    build_temperature: float = 0.7  # the sampling temperature of a build's samples
    # the share of a build's samples that must agree with their example's winner (0.5: a majority)
    build_agreement: float = 0.5
    background_builds: bool = True
    # draft the miss program from the group's last program (bench-spec decides)
    lookup_draft: bool = False
    # A miss names its group as the target's prefix_key (GenerationOptions): a backend that keeps KV
    # states then prefills only what the request does not share with the group's last miss (on Formula,
    # the formula's statement and explanation: about 1 s of a 4.6 s miss on the 2-core VM).
    keep_group_prefix: bool = True
    use_rules: bool = True
    use_choice: bool = True
    # What routing compares requests by: "lexical" (hashed word and word-pair counts of the skeleton,
    # minicache.route.lexical; about 0.1 ms) or "minilm" (the MiniLM sentence embedding, 20-50 ms of a core).
    route_embedder: str = "lexical"
    # None: the embedder's own calibrated threshold (lexical 0.82, minilm 0.80; docs/routing.md).
    route_threshold: float | None = None
    # how often a tenant's routing index reads other replicas' new examples
    route_refresh_s: float = 1.0
    route_per_group: int = 32  # embeddings the routing index keeps per group (a representative set)
    # kept rows up to which routing searches exactly (then coarse buckets)
    route_exact_rows: int = 20_000
    # A request that reaches no group by its embedding joins a group whose example differs from it
    # only in consistently substituted words (minicache.route.slots). A hit reads a request that so
    # differs from an exemplar's in the exemplar's words only where each substituted word is a name
    # or an item after a number (items only for a program without constants but 0 and 1), every
    # number keeps its value and kind, and the entry's examples had other words in that place;
    # otherwise it refuses the hit for the miss path (minicache.hit.word_slots). Off: no benchmark
    # run has measured it on its own (docs/routing.md has a replay of routing alone).
    route_word_slots: bool = False
    # Routing reads the words a question uses to name a row of its context's table as a value, like
    # its numbers (minicache.programs.tables.without_row): questions asking one thing of different line
    # items share a group. Which row a hit reads, and whether it asks what the entry's example asked,
    # stay the table reader's to check. Off: each row named is routed by its words.
    route_table_rows: bool = True
    frozen: bool = False  # no new builds (existing entries keep serving)
    # how long a build may hold its group's lease before others may take over
    build_lease_s: float = 600.0
    # After a build, groups whose entries are one computation up to parameter names merge into the
    # oldest (minicache.build.merge); after a miss, a group without an entry whose examples are an
    # entry's computation joins that entry's group (minicache.build.join). Off: it changes which
    # exemplars read a request wherever two computations share a program (a / b), which no
    # benchmark run has measured (docs/routing.md).
    merge_groups: bool = False
    max_question_chars: int = 32_000
    max_context_chars: int = 200_000
    miss_max_tokens: int = 640
    # Corrected attempts after the target's program fails. Each is another target call, which PoT does
    # not make: 0 keeps a miss at one PoT call (the pot baseline has no retry either).
    miss_retries: int = 0
    # Hit verification and audits (minicache.hit.verify, docs/hits.md).
    verify: VerifyConfig = field(default_factory=VerifyConfig)
    # share of served hits also answered by the miss path, in the background
    audit_rate: float = 0.05
    # Seeds the draw of which hits are audited, so a run (and a test counting target calls) audits the
    # same hits each time; None draws from the OS.
    audit_seed: int | None = 0
    # an entry caught wrong serves no model-chosen hit while its error bound exceeds this
    audit_delta: float = 0.01
    audit_z: float = 1.96  # the bound's confidence (Wilson score interval, z=1.96: 95% two-sided)
    step: StepConfig = field(default_factory=StepConfig)  # StepCache (structured outputs)
    # Which groups are built, and the back-off of failing ones (minicache.build.admission, minicache.build.failures).
    admission: AdmissionConfig = field(default_factory=AdmissionConfig)
