"""``minicache demo``: a first look at both models, a few requests through each with their timings."""

from __future__ import annotations

import time

import click

from minicache.cli.options import Runtime

DEMO_REQUESTS = [
    "What is the current ratio if current assets are $45,000 and current liabilities are $30,000?",
    "A loan of $12,000 accrues simple interest at 5% per year. How much interest is owed after 3 years?",
    "What is the current ratio if current assets are $128,500 and current liabilities are $51,400?",
]


@click.command()
@click.pass_obj
def demo(runtime: Runtime) -> None:
    """Send a few requests through both models and print answers and timings.

    The target writes a Python program per request (run here in a subprocess); the small model
    extracts the request's numbers as schema-constrained JSON.
    """
    from minicache.miss.prompts import pot_messages
    from minicache.models.base import GenerationOptions, Message
    from minicache.programs.text import extract_code
    from minicache.sandbox import run_untrusted

    click.echo("loading models...", err=True)
    target, small = runtime.backends()
    schema = {
        "type": "object",
        "properties": {
            "numbers": {"type": "array", "items": {"type": "number"}},
            "quantity_asked": {"type": "string"},
        },
        "required": ["numbers", "quantity_asked"],
    }
    for question in DEMO_REQUESTS:
        click.echo(f"\n> {question}")
        began = time.perf_counter()
        out = target.complete(pot_messages(question), GenerationOptions(max_tokens=320))
        answer = run_untrusted(extract_code(out.text))
        click.echo(
            f"  target program -> {answer}   ({out.prompt_tokens} prompt + {out.completion_tokens} "
            f"output tokens, prefill {out.prefill_s:.2f}s, decode {out.decode_s:.2f}s, "
            f"total {time.perf_counter() - began:.2f}s)"
        )
        ext = small.complete(
            [
                Message(
                    "system",
                    "Extract the numbers in the request and name the quantity asked. "
                    "Answer in JSON.",
                ),
                Message("user", question),
            ],
            GenerationOptions(max_tokens=96, json_schema=schema),
        )
        click.echo(
            f"  small extraction -> {ext.text}   ({ext.completion_tokens} tokens, "
            f"prefill {ext.prefill_s:.2f}s, decode {ext.decode_s:.2f}s)"
        )
    target.close()
    small.close()
