"""In-process llama.cpp backend (llama-cpp-python), the embedded default.

One :class:`LlamaCppBackend` owns one model instance. llama.cpp contexts are not thread-safe, and
two models computing at once on the same cores only slow each other down, so every call takes the
process-wide :data:`~minicache.models.compute.CPU_LOCK`: concurrent callers queue instead of
corrupting a KV cache or thrashing the CPU. Requests go first: a background call (a build, an
audit) steps aside between forward passes when one waits, its state saved and restored.
Greedy decoding is the default; JSON-schema output is enforced by a grammar; the KV cache of the
previous call is reused for the longest common prompt prefix (as llama-cpp-python does).

Two things make the small model's extraction cheap on a CPU:

* a flat JSON object whose values are ``enum`` choices or short texts (candidate choice, an
  action's keywords) is decoded by :mod:`.choice`: forced tokens are batched and the model is asked
  only where the allowed values branch and for each text token, which gives the same greedy output
  in a few forward passes;
* the KV state of each system prompt (an entry's extraction template) is saved after its first
  use and restored when that prompt returns after another one (:mod:`.kv_states`), so entries that
  alternate on a busy cache do not pay the template's prefill again.

A call may name a key (``GenerationOptions.prefix_key``: the miss path names the request's group):
the last such call's KV state is kept, and the next call with the key restores it, cut back to the
tokens the two prompts share, so a group's template is prefilled once. :meth:`forget_request` keeps
only system prefixes: a kept state never serves a call that did not name its key.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from minicache.errors import BackendError, ModelFileError
from minicache.models import fetch, llama_forwarding
from minicache.models.base import (
    CPU_LOCK,
    Completion,
    DraftKind,
    GenerationOptions,
    Message,
    check_real_models_allowed,
)
from minicache.models.choice import Field, decode_object, object_fields
from minicache.models.compute import is_background_thread
from minicache.models.kv_states import KvStates, common_prefix
from minicache.models.llama_setup import (
    default_threads,
    fix_schema_patterns,
    import_llama,
    make_llama_class,
)


class LlamaCppBackend:
    """A GGUF model run in this process. Use :meth:`embedded` for the pinned default models."""

    supports_grammar = True

    def __init__(
        self,
        model_path: str | Path,
        *,
        name: str | None = None,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        n_batch: int = 512,
        seed: int = 0,
        default_draft: DraftKind = "none",
        drafter_model: LlamaCppBackend | None = None,
        draft_k: int = 4,
        verbose: bool = False,
    ) -> None:
        check_real_models_allowed(f"LlamaCppBackend({model_path})")
        path = Path(model_path)
        if not path.exists():
            raise ModelFileError(f"model file not found: {path}")
        llama_cpp = import_llama()
        self.name = name or path.stem
        self.path = path
        self.default_draft: DraftKind = default_draft
        self.drafter_model = drafter_model
        self.draft_k = draft_k
        self._lock = CPU_LOCK
        self._llama_cpp = llama_cpp
        self._pieces: dict[int, bytes] = {}  # token id -> its text, for text fields in choice.py
        try:
            self.llm = make_llama_class(llama_cpp)(
                model_path=str(path),
                n_ctx=n_ctx,
                n_threads=n_threads or default_threads(),
                n_threads_batch=n_threads or default_threads(),
                n_batch=n_batch,
                seed=seed,
                verbose=verbose,
            )
        except (ValueError, RuntimeError) as exc:
            raise ModelFileError(f"llama.cpp could not load {path}: {exc}") from exc
        self.llm.eval_log = []
        self.kv = KvStates(llama_cpp)  # saved system prefixes and kept calls
        self._formatters: dict[bool, Any] = {}

    @classmethod
    def embedded(cls, which: str = "target", **kwargs: Any) -> LlamaCppBackend:
        """The pinned embedded model (``"target"`` or ``"small"``), verified before loading."""
        model = fetch.EMBEDDED[which]
        path = fetch.model_path(model)
        check_real_models_allowed(f"embedded {which} model")
        fetch.verify(model, path, full=False)
        return cls(path, name=f"embedded-{which}", **kwargs)

    # ------------------------------------------------------------------------------------
    def _grammar(self, gbnf: str):
        """Compiled GBNF grammars, kept: a group's extraction grammar is the same on every hit."""
        cache = self.__dict__.setdefault("_grammars", {})
        if gbnf not in cache:
            if len(cache) > 256:
                cache.clear()
            try:
                cache[gbnf] = self._llama_cpp.LlamaGrammar.from_string(gbnf, verbose=False)
            except (ValueError, RuntimeError) as exc:
                raise BackendError(f"invalid grammar: {exc}") from exc
        return cache[gbnf]

    def tokenize(self, text: str) -> list[int]:
        return self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=False)

    # -- the prompt as llama-cpp-python's chat handler builds it, and a cache of its system prefix --
    def _formatter(self, generation_prompt: bool):
        """The GGUF's own chat template (what ``create_chat_completion`` uses), or None if the model
        uses another chat format, in which case the fast paths below are skipped."""
        if generation_prompt not in self._formatters:
            from llama_cpp import llama_chat_format

            template = self.llm.metadata.get("tokenizer.chat_template")
            formatter = None
            if template and self.llm.chat_format == "chat_template.default":
                eos, bos = self.llm.token_eos(), self.llm.token_bos()
                formatter = llama_chat_format.Jinja2ChatFormatter(
                    template=template,
                    eos_token=self.llm._model.token_get_text(eos) if eos != -1 else "",
                    bos_token=self.llm._model.token_get_text(bos) if bos != -1 else "",
                    stop_token_ids=[eos],
                    add_generation_prompt=generation_prompt,
                )
            self._formatters[generation_prompt] = formatter
        return self._formatters[generation_prompt]

    def _chat_tokens(self, messages: list[Message]) -> tuple[list[int], int] | None:
        """(prompt tokens, length of the system message's prefix in them), or None without a template."""
        full, head = self._formatter(True), self._formatter(False)
        if full is None or head is None:
            return None
        rendered = full(messages=[m.as_dict() for m in messages])
        tokens = self.llm.tokenize(
            rendered.prompt.encode("utf-8"), add_bos=not rendered.added_special, special=True
        )
        prefix = 0
        if messages and messages[0].role == "system" and len(messages) > 1:
            first = head(messages=[messages[0].as_dict()])
            system = self.llm.tokenize(
                first.prompt.encode("utf-8"), add_bos=not first.added_special, special=True
            )
            if rendered.prompt.startswith(first.prompt) and tokens[: len(system)] == system:
                prefix = len(system)
        return tokens, prefix

    def _token_bytes(self, token: int) -> bytes:
        """A token's text (special tokens: empty), as llama-cpp-python detokenizes it."""
        if token not in self._pieces:
            self._pieces[token] = self.llm.detokenize([token], special=False)
        return self._pieces[token]

    def _choose(self, fields: list[Field], prompt: tuple[list[int], int]) -> Completion:
        """A flat JSON object of enum and text values, decoded greedily with forced tokens batched
        (see choice.py)."""
        tokens, prefix = prompt
        if len(tokens) + 80 * len(fields) > self.llm.n_ctx():
            raise BackendError(
                f"{self.name}: prompt of {len(tokens)} tokens exceeds the context window"
            )
        llama_cpp = self._llama_cpp
        n_vocab = self.llm.n_vocab()

        def eval_tokens(batch: list[int]):
            import numpy as np

            self.llm.eval(batch)
            return np.ctypeslib.as_array(
                llama_cpp.llama_get_logits_ith(self.llm._ctx.ctx, -1), shape=(n_vocab,)
            )

        began = time.perf_counter()
        self.kv.load_prefix(self.llm, tokens, prefix)
        start = min(common_prefix(self.llm, tokens), len(tokens) - 1)
        self.llm.n_tokens = start
        out = decode_object(
            fields, self.tokenize, eval_tokens, tokens[start:], token_bytes=self._token_bytes
        )
        wall = time.perf_counter() - began
        prefill = wall - out.total_s + out.first_eval_s
        return Completion(
            text=out.text,
            prompt_tokens=len(tokens),
            completion_tokens=out.completion_tokens,
            prefill_s=prefill,
            decode_s=max(0.0, wall - prefill),
            finish_reason="stop",
            model=self.name,
            draft={"cached_prompt_tokens": start, "forward_passes": out.evals},
            choice_margins=out.margins,
        )

    def _drafter(self, kind: DraftKind, draft_text: str | None):
        from minicache.models.speculative import LookupDrafter, SmallModelDrafter

        if kind == "small":
            if self.drafter_model is None:
                raise BackendError(
                    "draft='small' needs a drafter_model (the small model) on this backend"
                )
            return SmallModelDrafter(self.drafter_model.llm, k=self.draft_k)
        if kind == "lookup":
            return LookupDrafter(self.tokenize(draft_text or ""))
        return None

    def complete(
        self, messages: list[Message], options: GenerationOptions | None = None
    ) -> Completion:
        opts = options or GenerationOptions()
        kind: DraftKind = opts.draft or self.default_draft
        if kind == "lookup" and not opts.draft_text:
            kind = "none"
        if opts.json_schema is not None or opts.grammar is not None:
            # Grammar-constrained sampling and drafting do not mix in llama-cpp-python.
            kind = "none"
        kwargs: dict[str, Any] = dict(
            messages=[m.as_dict() for m in messages],
            max_tokens=opts.max_tokens,
            temperature=opts.temperature,
            stop=list(opts.stop) or None,
        )
        if opts.temperature == 0.0:
            kwargs.update(top_k=1)
        if opts.seed is not None:
            kwargs["seed"] = opts.seed
        if opts.json_schema is not None:
            kwargs["response_format"] = {
                "type": "json_object",
                "schema": fix_schema_patterns(opts.json_schema),
            }
        elif opts.grammar is not None:
            kwargs["grammar"] = self._grammar(opts.grammar)
        fields = object_fields(opts.json_schema) if opts.json_schema is not None else None
        with self._lock, self._stepping_aside_for_requests():
            prompt = self._chat_tokens(messages)
            if fields is not None and prompt is not None:
                return self._choose(fields, prompt)
            key = opts.prefix_key if prompt is not None and kind == "none" else None
            if (
                prompt is not None
                and kind == "none"
                and not self.kv.load_kept(self.llm, key, *prompt)
            ):
                self.kv.load_prefix(self.llm, *prompt)
            drafter = self._drafter(kind, opts.draft_text)
            self.llm.draft_model = drafter
            self.llm.spec_window = (self.draft_k if kind == "small" else 8) + 1 if drafter else 1
            self.llm.eval_log = []
            began = time.perf_counter()
            try:
                # A drafter runs under the same lock.
                if opts.on_text is None:
                    out = self.llm.create_chat_completion(**kwargs)
                else:  # the pieces as they are made (a streamed miss), collected as the whole
                    out = llama_forwarding.streamed(self.llm, kwargs, opts.on_text)
            except ValueError as exc:  # e.g. prompt longer than the context window
                raise BackendError(f"{self.name}: {exc}") from exc
            finally:
                self.llm.draft_model = None
                self.llm.spec_window = 1
            wall = time.perf_counter() - began
            log = list(self.llm.eval_log)
            self.kv.keep(self.llm, key)
        usage = out.get("usage") or {}
        choice = out["choices"][0]
        prefill_s = log[0][1] if log else 0.0
        prompt_tokens = int(usage.get("prompt_tokens", 0))
        stats: dict[str, Any] = {}
        completion_tokens = int(usage.get("completion_tokens", 0))
        if drafter is not None:
            # Each verification batch is [last token] + draft; tokens produced in it that came
            # from the draft are the accepted ones.
            verify_batches = max(0, len(log) - 1)
            accepted = max(0, completion_tokens - 1 - verify_batches)
            stats = {
                "kind": kind,
                "proposed": drafter.proposed,
                "accepted": min(accepted, drafter.proposed),
                "target_batches": verify_batches,
                "acceptance": (min(accepted, drafter.proposed) / drafter.proposed)
                if drafter.proposed
                else 0.0,
            }
        return Completion(
            text=choice["message"].get("content") or "",
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            prefill_s=prefill_s,
            decode_s=max(0.0, wall - prefill_s),
            finish_reason=choice.get("finish_reason") or "stop",
            model=self.name,
            draft=stats
            | {"cached_prompt_tokens": max(0, prompt_tokens - (log[0][0] if log else 0))},
        )

    # -- pass-through (minicache.models.forwarding.Forwarding): the client's body as it came ---------
    def forward_chat(self, body: dict[str, Any]) -> dict[str, Any]:
        return llama_forwarding.forward_chat(self, body)

    def stream_chat(self, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
        return llama_forwarding.stream_chat(self, body)

    def forward_completion(self, body: dict[str, Any]) -> dict[str, Any]:
        return llama_forwarding.forward_completion(self, body)

    def stream_completion(self, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
        return llama_forwarding.stream_completion(self, body)

    @contextmanager
    def _stepping_aside_for_requests(self) -> Iterator[None]:
        """On a background thread (a build, an audit), let waiting requests go first between forward
        passes: the model's state (KV cache, tokens, sampler, drafter) is saved, the lock handed over
        and the state restored, so the background call's output does not change (test_real_models)."""
        llm = self.llm
        if not is_background_thread() or llm is None:
            yield
            return
        outer = llm.step_aside
        llm.step_aside = lambda: self.kv.step_aside(llm)
        try:
            yield
        finally:
            llm.step_aside = outer

    def warm_up(self, messages: list[Message] | None = None) -> None:
        """One short generation, then :meth:`forget_request`. The first call after loading pays for
        paging the weights in, and the first call with a system prompt for computing it (both kept
        afterwards: the prefix's state is saved); a measurement should charge neither to whichever
        request comes first. ``messages``: a prompt with the system message to be measured."""
        self.complete(messages or [Message("user", "Say OK.")], GenerationOptions(max_tokens=2))
        self.forget_request()

    def forget_request(self) -> None:
        """Drop the last call's prompt and output from the KV cache, keeping only a system prefix
        the cache has saved (as the next request, with its own user message, would find it).

        For measurements that send one prompt twice in a row (the benchmark's ``--interleave``:
        pot's prompt, then minicache's miss with the same prompt): without this the second call
        would find the whole prompt computed already and skip its prefill."""
        with self._lock:
            llm = self.llm
            if llm is None:
                return
            self.kv.forget_request(llm)

    def close(self) -> None:
        with self._lock:
            llm, self.llm = self.llm, None
            if llm is not None:
                llm.close()
