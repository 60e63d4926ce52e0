"""The ``hf`` engine's per-row seeds: a prompt's draw is its own, whatever else is batched.

Sampled evaluations compare two policies on the same tasks. With one seed per call, a
task's draws depended on which other episodes shared the call (and in what order), so
the same task under the same policy drew differently in two runs that batched it
differently. ``row_seeds`` give each prompt a generator of its own.
"""

from __future__ import annotations

import math

import pytest
import torch

from baselines.engines.base import SamplingConfig, derived_seed
from baselines.engines.hf import HFEngine


@pytest.fixture(scope="module")
def engine(tiny_model_dir, tokenizer):
    return HFEngine(tiny_model_dir, pad_token_id=tokenizer.pad_token_id, eos_token_ids=[tokenizer.eos_token_id])


def _prompts(tokenizer):
    return [tokenizer.encode(text) for text in ("What is 2 + 3?", "Divide 144 by 12, please, and say why", "hi")]


def test_a_rows_draw_depends_on_its_seed_not_on_the_rest_of_the_call(engine, tokenizer):
    sampling = SamplingConfig(max_new_tokens=12, temperature=1.0)
    a, b, c = _prompts(tokenizer)
    alone = engine.generate([b], sampling, row_seeds=[11])[0]
    batched = engine.generate([a, b, c], sampling, row_seeds=[5, 11, 7])[1]
    reordered = engine.generate([c, a, b, a], sampling, seed=123, row_seeds=[9, 2, 11, 4])[2]  # and the call seed is ignored
    assert alone.token_ids == batched.token_ids == reordered.token_ids
    assert alone.logprobs == pytest.approx(batched.logprobs, abs=1e-4)
    others = {tuple(engine.generate([b], sampling, row_seeds=[s])[0].token_ids) for s in range(12, 20)}
    assert len(others) > 1  # the seed does draw: other seeds, other samples


def test_row_seeds_sample_the_warped_distribution_and_report_its_logprobs(engine, tokenizer):
    """Per-row sampling (Gumbel-max over the temperature- and top-p-warped logits) draws
    from the distribution the log-probs describe: the first token's frequencies over 2,000
    seeds match its probabilities, and each reported log-prob is the warped one."""
    prompt = _prompts(tokenizer)[0]
    sampling = SamplingConfig(max_new_tokens=1, temperature=0.7, top_p=0.9)
    with torch.no_grad():
        logits = engine.model(torch.tensor([prompt])).logits[0, -1].float() / sampling.temperature
    probs = torch.softmax(logits, -1)
    order = torch.argsort(probs, descending=True)
    cut = int((torch.cumsum(probs[order], 0) < sampling.top_p).sum()) + 1  # the smallest head holding top_p
    kept = torch.full_like(logits, -math.inf)
    kept[order[:cut]] = logits[order[:cut]]
    warped = torch.log_softmax(kept, -1)
    gens = engine.generate([prompt] * 2000, sampling, row_seeds=list(range(2000)))
    counts = torch.bincount(torch.tensor([g.token_ids[0] for g in gens]), minlength=len(probs)).float()
    assert counts[warped == -math.inf].sum() == 0  # nothing outside the top-p head is ever drawn
    expected = warped.exp() * 2000
    top = order[:5]
    assert torch.all((counts[top] - expected[top]).abs() <= 4 * expected[top].sqrt() + 2), (counts[top], expected[top])
    for g in gens[:50]:
        assert g.logprobs[0] == pytest.approx(float(warped[g.token_ids[0]]), abs=1e-4)


def test_greedy_ignores_row_seeds(engine, tokenizer):
    sampling = SamplingConfig(max_new_tokens=8, temperature=0.0)
    a, b, _ = _prompts(tokenizer)
    assert [g.token_ids for g in engine.generate([a, b], sampling, row_seeds=[1, 2])] == \
        [g.token_ids for g in engine.generate([a, b], sampling)]


def test_derived_seeds_are_distinct_and_stable():
    assert derived_seed(7, 0) != derived_seed(7, 1) != derived_seed(8, 0)
    assert derived_seed(7, 0) == derived_seed(7, 0) and 0 <= derived_seed(2**40, 3) < 2**32
    assert derived_seed(-1, 0) != derived_seed(1, 0)  # a negative key is a key, not an error


@pytest.mark.parametrize("row_seeds", [None, [3, 4]], ids=["call-seed", "row-seeds"])
def test_a_checkpoints_own_sampling_defaults_do_not_change_what_the_engine_samples(tiny_model_dir, tokenizer, tmp_path, row_seeds):
    """A released checkpoint ships sampling defaults in ``generation_config.json``
    (Qwen2.5-Instruct: repetition_penalty, top_k, ...). ``generate`` would apply them on
    top of the turn's own temperature and top-p, so the engine would sample from, and
    report the log-probs of, a distribution the trainer's forward never computes. The
    engine samples what ``SamplingConfig`` says and nothing else."""
    from transformers import AutoModelForCausalLM, GenerationConfig

    from baselines.logprobs import sequence_logprobs

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    model.generation_config = GenerationConfig(**model.generation_config.to_diff_dict(), repetition_penalty=50.0, top_k=2, do_sample=True,
                                               no_repeat_ngram_size=1, min_new_tokens=6)
    model.save_pretrained(tmp_path / "ckpt")
    tokenizer.save_pretrained(tmp_path / "ckpt")
    engine = HFEngine(tmp_path / "ckpt", pad_token_id=tokenizer.pad_token_id, eos_token_ids=[tokenizer.eos_token_id])
    sampling = SamplingConfig(max_new_tokens=8, temperature=1.0)
    prompts = _prompts(tokenizer)[:2]
    gens = engine.generate(prompts, sampling, seed=0, row_seeds=row_seeds)
    for prompt, gen in zip(prompts, gens):
        ids = torch.tensor([prompt + gen.token_ids])
        with torch.no_grad():
            logp, _ = sequence_logprobs(engine.model, ids, torch.ones_like(ids))
        assert gen.logprobs == pytest.approx(logp[0, len(prompt):].tolist(), abs=1e-4)
