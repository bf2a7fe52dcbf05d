"""The benchmark's commands, added to ``minicache`` through the ``minicache.commands`` entry point:
``run`` (the main job), ``bench`` (methods compared on one stream, one report) and ``bench-spec``
(speculative decoding on the embedded target)."""

from __future__ import annotations

import json
import sys
import tempfile

import click

from minicache.cli.engine import engine_from_options, engine_option
from minicache.cli.options import Runtime

__all__ = ["COMMANDS", "bench", "bench_spec", "run"]


@click.command("bench-spec")
@click.option(
    "-n",
    "--prompts",
    default=10,
    show_default=True,
    help="Number of program-writing prompts (Formula groups).",
)
@click.option(
    "--max-tokens", default=320, show_default=True, help="Output token limit per request."
)
@click.option(
    "--draft-k", default=4, show_default=True, help="Tokens the small model drafts per step."
)
@click.option("--json", "as_json", is_flag=True, help="Print rows as JSON instead of a table.")
def bench_spec(prompts: int, max_tokens: int, draft_k: int, as_json: bool) -> None:
    """Measure speculative decoding on the embedded target: plain vs small-model vs lookup drafting.

    For each of N Formula groups, the target writes a program for one request (the group's
    "cached program"), then writes one for a second request three ways: plain greedy, drafted by
    the small model, and drafted by n-gram lookup in the cached program. Prints tokens/s, seconds
    per request, acceptance rate, speedup over plain and how many outputs equal plain greedy.
    """
    from tqdm import tqdm

    from minicache.models.llamacpp import LlamaCppBackend
    from minicache_bench import spec

    small = LlamaCppBackend.embedded("small")
    target = LlamaCppBackend.embedded("target", drafter_model=small, draft_k=draft_k)
    with tqdm(total=prompts * 3, desc="bench-spec", file=sys.stderr, disable=None) as bar:
        rows = spec.run(
            target, True, n=prompts, max_tokens=max_tokens, progress=lambda _m: bar.update()
        )
    if as_json:
        click.echo(json.dumps(rows, indent=2))
    else:
        click.echo(spec.format_table(rows))
    target.close()
    small.close()


@click.command()
@click.option(
    "--dataset",
    required=True,
    help="formula | tatqa | webshop | svamp | mix | NAME-distinct | stepcache-micro | PATH.jsonl (lines: "
    "{id, question, context?, answer, group?}). svamp: 1,000 word problems (Body + ' ' + Question). "
    "mix: formula, tatqa and svamp together. NAME-distinct (e.g. mix-distinct): one request per gold "
    "group, a stream with no repetition. stepcache-micro is generated per seed (222 math and JSON "
    "variants).",
)
@click.option(
    "--methods",
    default="pot,minicache",
    show_default=True,
    help="Comma-separated: direct, pot, pot-spec, exact, gptcache (the GPTCache library), "
    "gptcache-like (our re-implementation), gencache-like, minicache; for structured outputs "
    "(stepcache-micro): no-reuse, no-reuse+solver, stepcache.",
)
@click.option(
    "--split",
    type=click.Choice(["dev", "test"]),
    help="tatqa and svamp (and their -distinct streams) only: dev is where rules, thresholds and "
    "prompts are tuned, test is quoted beside it. tatqa: dev is tatqa_dataset_dev.json, test is "
    "tatqa_dataset_test_gold.json (other companies' reports). svamp: test is a fixed third of the "
    "equation skeletons (every third by frequency rank, from the second; listed in "
    "minicache_bench.splits.SVAMP_TEST_SKELETONS), dev is the rest, so dev never contains a test "
    "computation. Without --split both halves are used, as before. Other datasets refuse it.",
)
@click.option("--limit", type=int, help="Requests in the stream (after --groups and shuffling).")
@click.option(
    "--groups", type=int, help="Use only this many gold groups (spread over all of them)."
)
@click.option(
    "--seed",
    default="0",
    show_default=True,
    help="Seed of the shuffled, cold-start stream; several ('42,43,44') run once each into DIR/seed<N> "
    "and DIR/results.json pools them.",
)
@click.option(
    "--subset",
    default="",
    help="Cap some methods to the first N requests, e.g. 'direct=200,gencache=200'.",
)
@click.option(
    "--concurrency",
    default="",
    help="Throughput at these client counts, e.g. '1,4,8' (pot and minicache); each request's row "
    "goes to requests.jsonl as METHOD@cC and the report gives the accuracy beside the speed.",
)
@click.option(
    "--throughput-requests",
    default=24,
    show_default=True,
    help="Requests per throughput measurement.",
)
@click.option(
    "--pad-context",
    default="",
    help="Irrelevant context tokens to add, e.g. '0,512,1024,2048' (pot and minicache).",
)
@click.option("--pad-requests", default=20, show_default=True, help="Requests per pad length.")
@click.option(
    "--use-group-labels",
    is_flag=True,
    help="Route by the dataset's group labels (analysis only by default).",
)
@click.option(
    "--inline-builds",
    is_flag=True,
    help="minicache builds on the request that triggers a build instead of in the background, so "
    "every run of the same stream gives the same routes (background builds are what serving does).",
)
@click.option(
    "--interleave",
    is_flag=True,
    help="Serve each request with every method in turn (pot then minicache, then the other way round on "
    "the next request) instead of each method's whole stream in turn, so that methods compared on "
    "one request are measured seconds apart on a machine whose speed drifts. Each request starts "
    "without the previous one's prompt in the models' KV cache. minicache's background builds wait "
    "while another method serves; the seconds a request waited for one to step aside, before its "
    "timer, are in its row (waited_s).",
)
@click.option(
    "--engine-option",
    "engine_options",
    multiple=True,
    metavar="KEY=VALUE",
    help="Set an option of the minicache method's engine (a field of minicache.engine.EngineConfig; "
    "nested tables with dots: verify.min_margin=1.5), checked as `minicache serve --engine-option` "
    "checks it; repeatable. It overrides the benchmark's own settings (background builds, "
    "MINICACHE_AUDIT_RATE, admission) only for the keys it names; the config file's [engine] and "
    "MINICACHE_ENGINE_* set nothing here. Recorded in results.json (config.engine_options) and "
    "the report's title; a rerun into the same --out must give the same options.",
)
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False),
    help="Output folder; rerunning resumes.",
)
@click.pass_obj
def bench(
    runtime: Runtime,
    dataset: str,
    methods: str,
    split: str | None,
    limit: int | None,
    groups: int | None,
    seed: str,
    subset: str,
    concurrency: str,
    throughput_requests: int,
    pad_context: str,
    pad_requests: int,
    use_group_labels: bool,
    inline_builds: bool,
    interleave: bool,
    engine_options: tuple[str, ...],
    out_dir: str,
) -> None:
    """Compare MiniCache with PoT and other caches on one stream; write one report.

    Every method sees the same shuffled stream, starting cold. Numeric answers are scored with
    math.isclose(rel_tol=1e-3, abs_tol=0.01); WebShop actions need the exact max_price and half the
    gold keywords. Writes DIR/results.json, DIR/requests.jsonl (one line per request and method;
    a rerun skips what is there), DIR/report.md (ratios to pot) and DIR/*.png.

    Gold groups (analysis only: purity, groups per computation): Formula's formula name; TAT-QA's
    derivation and SVAMP's Equation with every number masked (minicache_bench.datasets.equation_skeleton:
    "( 76.0 - 25.0 )" is "N-N"; SVAMP has 27). NAME-distinct keeps the first request of each gold
    group in file order, then shuffles and truncates as usual: a stream in which no computation
    repeats. TAT-QA has only 67 such groups, so the 100-request no-repetition stream is
    mix-distinct (Formula's 50, TAT-QA's 67 and SVAMP's 27 labels, kept apart per dataset).

    stepcache-micro compares no-reuse (the target writes every output) with stepcache; outputs are
    scored by the task check (the requested final line with the right solution, or exactly the
    required JSON keys, types and values) and the stitched-output integrity check (every equation
    in every step holds; the whole response is one JSON object). Ratios are then to no-reuse.

    --engine-option KEY=VALUE measures the minicache method with an engine mechanism that is off by
    default (e.g. --engine-option merge_groups=true); the report's title names the options given.
    """
    from pathlib import Path

    from minicache_bench import METHODS, run_seeds
    from minicache_bench.engine_options import minicache_config, option_values, refuse_other_options
    from minicache_bench.splits import split_error

    refused = split_error(dataset) if split else None
    if refused:
        raise click.BadParameter(refused, param_hint="--split")
    names = [m.strip() for m in methods.split(",") if m.strip()]
    unknown = [m for m in names if m not in METHODS]
    if unknown:
        raise click.BadParameter(
            f"unknown method(s) {', '.join(unknown)}; choose from {', '.join(METHODS)}",
            param_hint="--methods",
        )

    def ints(text: str, what: str) -> list[int]:
        try:
            return [int(x) for x in text.split(",") if x.strip()]
        except ValueError:
            raise click.BadParameter(
                f"expected comma-separated integers, got {text!r}", param_hint=what
            ) from None

    caps = {}
    for item in filter(None, (s.strip() for s in subset.split(","))):
        name, _, n = item.partition("=")
        if name not in METHODS or not n.isdigit():
            raise click.BadParameter(f"expected METHOD=N, got {item!r}", param_hint="--subset")
        caps[name] = int(n)
    seeds = ints(seed, "--seed") or [0]
    clients, pads = (
        ints(concurrency, "--concurrency"),
        ints(pad_context, "--pad-context"),
    )  # before models load
    minicache_config(engine_options, background_builds=not inline_builds)  # a bad option: one line
    folders = [Path(out_dir), *(Path(out_dir) / f"seed{s}" for s in seeds)]  # run_seeds' folders
    refuse_other_options(folders, option_values(engine_options))
    click.echo("loading models...", err=True)
    target, small = runtime.backends()
    embedder = (
        runtime.embedder() if runtime.embedder else None
    )  # None: each method's own (build_method)
    results = run_seeds(
        dataset=dataset,
        methods=names,
        target=target,
        small=small,
        embedder=embedder,
        out=Path(out_dir),
        limit=limit,
        groups=groups,
        split=split,
        seeds=seeds,
        concurrency=clients,
        throughput_requests=throughput_requests,
        pad_tokens=pads,
        pad_requests=pad_requests,
        use_group_labels=use_group_labels,
        subset=caps,
        command="minicache " + " ".join(sys.argv[1:]),
        background_builds=not inline_builds,
        interleave=interleave,
        engine_options=engine_options,
    )
    click.echo(open(f"{out_dir}/report.md").read())
    del results


@click.command()
@click.option(
    "--groups", default=5, show_default=True, help="How many Formula groups (formulas) to stream."
)
@click.option("--per-group", default=6, show_default=True, help="Requests per group.")
@click.option("--seed", default=0, show_default=True, help="Shuffle seed of the stream.")
@click.option(
    "--store",
    default=None,
    help="SQLite file or postgresql:// URL (default: a fresh temporary SQLite "
    "file, so the run starts cold).",
)
@click.option(
    "--json",
    "as_json",
    type=click.Path(),
    help="Also write the summary and per-request rows to this JSON file.",
)
@engine_option
@click.pass_obj
def run(
    runtime: Runtime,
    groups: int,
    per_group: int,
    seed: int,
    store: str | None,
    as_json: str | None,
    engine_options: tuple[str, ...],
) -> None:
    """The main job: a shuffled stream of FinLoRA Formula requests through MiniCache on the configured models.

    Shows each request's route (miss / hit / fallback), latency and correctness against gold, and each
    build as it happens; ends with hit rate, accuracy and mean latency of hits and misses. Gold
    answers are FinLoRA's as published (a few NPV/PV golds are wrong; see docs/data.md).
    """
    from minicache_bench.mainjob import format_summary, formula_stream, serve_and_show

    with tempfile.TemporaryDirectory() as tmp:
        with engine_from_options(runtime, store or f"{tmp}/minicache.db", engine_options) as mc:
            stream = formula_stream(groups, per_group, seed=seed)
            click.echo(
                f"streaming {len(stream)} requests from {groups} formulas (cold cache)...", err=True
            )
            summary = serve_and_show(mc, stream)
    click.echo(format_summary(summary))
    if as_json:
        with open(as_json, "w") as fh:
            json.dump(summary, fh, indent=2, default=str)


COMMANDS = (
    run,
    bench,
    bench_spec,
)  # added to `minicache` through the minicache.commands entry point
