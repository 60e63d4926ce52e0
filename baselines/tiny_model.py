"""Build a small Qwen2-style model and a BPE tokenizer locally, with no model hub.

Tests and the CPU demo need a real ``transformers`` model and a chat template with tool
support, but nothing may be downloaded. :func:`build_tiny_model` trains a byte-level BPE
tokenizer on caller-supplied text (the env's prompts, tool schemas, oracle actions),
attaches a Hermes/Qwen-style chat template (``<tool_call>{json}</tool_call>``, tool results
as ``<tool_response>`` user turns; tools listed compactly as ``name(params): description``
to keep CPU prompts short), initialises a Qwen2 model at random, and saves both
with ``save_pretrained`` so that ``transformers`` (and vLLM) load the directory by path.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

__all__ = ["TinyModelSpec", "build_tiny_model", "build_tokenizer", "CHAT_TEMPLATE", "default_corpus"]

CHAT_TEMPLATE = (Path(__file__).with_name("chat_template.jinja")).read_text()
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# Added but not "special": they must survive decode(skip_special_tokens=True) because
# the env parses them out of the action text.
TOOL_TOKENS = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]
# Contractions, letter runs, single digits, punctuation runs, newlines, spaces: Qwen2's
# split, which transformers applies whenever it loads a qwen2 tokenizer (and so vLLM).
_SPLIT_PATTERN = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
# The merges are learned on the same split less the one character a letter run may carry
# in front (a space, a quote): no merge joins a letter to what precedes it, so a word is
# the same tokens wherever it stands. Under Qwen2's own merges "Tanzania" in a snippet
# (" T|an|z|ania") and in an answer's JSON ('"|T|an|z|ania') begin with different tokens,
# and a 2-layer model cannot copy across that; it answered "Italy" for a city the snippet
# placed in the Philippines (0% on held-out country answers, 58% on years, whose digits
# are single tokens everywhere). Costs ~1.37x the tokens: a space is a token of its own,
# so it is a choice (TinyModelSpec.isolate_words), made for the tasks that copy names.
_WORD_MERGE_PATTERN = _SPLIT_PATTERN.replace(r"[^\r\n\p{L}\p{N}]?\p{L}+", r"\p{L}+")


@dataclass(frozen=True)
class TinyModelSpec:
    """Size of the random-init Qwen2 model; defaults fit a CPU demo."""

    vocab_size: int = 1024
    hidden_size: int = 128
    intermediate_size: int = 384
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    max_position_embeddings: int = 2048
    isolate_words: bool = False  # merges never join a letter to what precedes it (see _WORD_MERGE_PATTERN)
    seed: int = 0


def default_corpus() -> list[str]:
    """Generic text covering the chat format, JSON tool calls and arithmetic."""
    lines = [
        '<tool_call>\n{"name": "calculator", "arguments": {"expression": "12 + 7"}}\n</tool_call>',
        '<tool_call>\n{"name": "answer", "arguments": {"answer": "19"}}\n</tool_call>',
        '{"type": "function", "function": {"name": "search", "description": "Search the corpus.", '
        '"parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}}',
        "You are a helpful assistant. Use the tools to solve the task, then call answer.",
        "Function signatures, one per line, inside <tools></tools>:",
        "To call a function, write a JSON object with its name and arguments inside",
        "What is 3 * (4 + 5)? The result is 27. Compute the value of the expression.",
        "<|im_start|>system\n", "<|im_start|>user\n", "<|im_start|>assistant\n", "<|im_start|>tool\n",
        "<tools>\n</tools>\nCall a tool with <tool_call>",
    ]
    numbers = [f"{a} + {b} = {a + b}; {a} - {b} = {a - b}; {a} * {b} = {a * b}" for a in range(20) for b in range(0, 20, 3)]
    return lines * 20 + numbers


def build_tokenizer(corpus: Iterable[str], vocab_size: int = 1024, isolate_words: bool = False):
    """Train a byte-level BPE (digits split one by one) and wrap it for transformers.

    ``isolate_words``: learn the merges on words without the space or quote in front
    (``_WORD_MERGE_PATTERN``), so a name is the same tokens in a snippet and in a call.
    """
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    def split(pattern: str):
        return pre_tokenizers.Sequence(
            [pre_tokenizers.Split(Regex(pattern), behavior="isolated"), pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]
        )

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = split(_WORD_MERGE_PATTERN if isolate_words else _SPLIT_PATTERN)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(list(corpus), trainer)
    # Saved with the split transformers applies when it loads a qwen2 tokenizer, so the
    # ids of a string do not depend on the loader (tokenizers, transformers, vLLM); the
    # finer merge split gives the same ids under it (no merge crosses its boundaries).
    tok.pre_tokenizer = split(_SPLIT_PATTERN)
    tok.add_tokens(TOOL_TOKENS)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"],
        chat_template=CHAT_TEMPLATE,
        clean_up_tokenization_spaces=False,
    )


def build_tiny_model(out_dir: str | Path, corpus: Iterable[str] | None = None, spec: TinyModelSpec = TinyModelSpec()) -> Path:
    """Build (or reuse) a tiny model; returns the directory to load with
    ``from_pretrained``: ``out_dir/<digest>``, one per spec (seed included) and corpus.

    A build is reused when one of the same spec and corpus exists, so the demo and the
    tests pay for tokenizer training once. Each build has its own directory because a
    seed sweep shares one ``out_dir``: rebuilt in place, a second seed's model would
    overwrite the first's under a run still loading it. A build is written to a hidden
    temporary directory and published by one ``rename``, so a build cut off half way is
    never loaded, and of several processes building the same one at once, the first to
    publish wins and the others use its directory.
    """
    import hashlib
    import os
    import shutil
    import tempfile

    texts = list(corpus) if corpus is not None else default_corpus()
    digest = hashlib.sha256(json.dumps([asdict(spec), texts]).encode()).hexdigest()[:16]
    final = Path(out_dir) / digest
    if (final / "agentgym_tiny.json").exists():
        return final
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    out = Path(tempfile.mkdtemp(prefix=f".{digest}-", dir=out_dir))
    out.chmod(0o755)  # (mkdtemp's 0700 would hide the model from other users of a shared cache)
    try:
        _build_into(out, texts, spec, digest)
        try:
            os.rename(out, final)
        except OSError:  # another process published this build first: use theirs
            if not (final / "agentgym_tiny.json").exists():
                raise
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return final


def _build_into(out: Path, texts: list[str], spec: TinyModelSpec, digest: str) -> None:
    """Train the tokenizer, initialise the model and save both (and the marker, last) in ``out``."""
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    tokenizer = build_tokenizer(texts, spec.vocab_size, spec.isolate_words)
    eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_hidden_layers,
        num_attention_heads=spec.num_attention_heads,
        num_key_value_heads=spec.num_key_value_heads,
        max_position_embeddings=spec.max_position_embeddings,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=eos,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(spec.seed)
    model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(eos_token_id=eos, pad_token_id=tokenizer.pad_token_id)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    (out / "agentgym_tiny.json").write_text(json.dumps({"digest": digest, "spec": asdict(spec)}))
