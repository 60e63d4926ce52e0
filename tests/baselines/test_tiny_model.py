"""The tiny model's tokenizer: one split for every loader, and (``isolate_words``) a name
tokenised the same wherever it stands, so a small model can copy it."""

from __future__ import annotations

from pathlib import Path

import pytest
from transformers import AutoTokenizer

from baselines.tiny_model import TinyModelSpec, build_tiny_model, build_tokenizer

CORPUS = [
    f"{city} is a city in {country}. Its time zone is Africa/{city}." for city, country in
    [("Morogoro", "Tanzania"), ("Awasa", "Ethiopia"), ("Pasay", "Philippines"), ("Fushun", "China")]
] * 30 + [
    '<tool_call>{"name": "answer", "arguments": {"answer": "Tanzania"}}</tool_call>',
    "In tips.csv, what is the mean of 'total_bill' where 'sex' is 'Female'? It's 18.06.\n",
] * 30
SPEC = dict(vocab_size=400, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1)
TEXTS = [' Tanzania', '"Tanzania', 'Tanzania', '{"answer": "Philippines"}', "df['sex'] == 'Female'", "It's 1,400,646.\n\n  x",
         "Morogoro is a city in Tanzania.", 'pd.read_csv("tips.csv")']


def _loaded(tmp_path, isolate_words: bool):
    out = build_tiny_model(tmp_path / f"isolate-{isolate_words}", CORPUS, TinyModelSpec(**SPEC, isolate_words=isolate_words))
    return AutoTokenizer.from_pretrained(out)


@pytest.mark.parametrize("isolate_words", [False, True])
def test_every_loader_gives_the_same_ids(tmp_path, isolate_words):
    """transformers loads a qwen2 tokenizer with Qwen2's own split, whatever tokenizer.json
    says; the merges learned on a finer split must give the same ids under it."""
    built = build_tokenizer(CORPUS, 400, isolate_words)
    loaded = _loaded(tmp_path, isolate_words)
    for text in TEXTS:
        assert loaded(text)["input_ids"] == built(text)["input_ids"], text


def test_an_isolated_word_is_the_same_tokens_after_a_space_or_a_quote(tmp_path):
    tok = _loaded(tmp_path, True)
    ids = {prefix: tok(prefix + "Tanzania")["input_ids"] for prefix in (" ", '"', "")}
    assert ids[" "][1:] == ids['"'][1:] == ids[""]
    assert tok.decode(ids[" "][:1]) == " "
    # The copy in the answer's JSON is the snippet's tokens, not a respelling.
    snippet, call = tok(" Tanzania.")["input_ids"], tok('{"answer": "Tanzania"}')["input_ids"]
    assert snippet[1:-1] == ids[""] and any(call[k:k + len(ids[""])] == ids[""] for k in range(len(call)))


def test_without_isolation_a_word_after_a_space_starts_with_another_token(tmp_path):
    """Why the option exists: Qwen2's merges join the space to the word."""
    tok = _loaded(tmp_path, False)
    spaced, quoted = tok(" Tanzania")["input_ids"], tok('"Tanzania')["input_ids"]
    assert tok.decode(spaced[:1]).startswith(" ") and tok.decode(spaced[:1]) != " "
    assert spaced[0] not in quoted


def test_the_option_is_part_of_the_cached_build(tmp_path):
    a = build_tiny_model(tmp_path / "m", CORPUS, TinyModelSpec(**SPEC, isolate_words=False))
    b = build_tiny_model(tmp_path / "m", CORPUS, TinyModelSpec(**SPEC, isolate_words=True))
    assert a != b and (a / "tokenizer.json").read_text() != (b / "tokenizer.json").read_text()


def _files(directory):
    return {p.name: p.read_bytes() for p in directory.iterdir()}


def test_two_seeds_share_a_directory_without_rebuilding_each_other(tmp_path):
    """A seed sweep runs ``agentgym train`` several times with one ``model.tiny_dir``.
    Each build is its own directory: a second seed must not rewrite the first's weights
    (under a run still loading them), and the first seed's build is reused as it was."""
    first = build_tiny_model(tmp_path / "m", CORPUS, TinyModelSpec(**SPEC, seed=0))
    before = _files(first)
    second = build_tiny_model(tmp_path / "m", CORPUS, TinyModelSpec(**SPEC, seed=1))
    assert second != first and _files(first) == before
    assert (second / "model.safetensors").read_bytes() != before["model.safetensors"]
    again = build_tiny_model(tmp_path / "m", CORPUS, TinyModelSpec(**SPEC, seed=0))
    assert again == first and _files(again) == before
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == sorted([first.name, second.name])


def test_a_build_cut_off_leaves_nothing_to_load(tmp_path, monkeypatch):
    """A build that dies half way (killed, disk full) is never published: the next one
    starts over instead of loading a model without weights."""
    from transformers import PreTrainedTokenizerFast

    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as m:
        m.setattr(PreTrainedTokenizerFast, "save_pretrained", disk_full)  # after the weights are written
        with pytest.raises(OSError, match="No space"):
            build_tiny_model(tmp_path / "m", CORPUS, TinyModelSpec(**SPEC))
    assert list((tmp_path / "m").iterdir()) == []
    out = build_tiny_model(tmp_path / "m", CORPUS, TinyModelSpec(**SPEC))
    assert AutoTokenizer.from_pretrained(out)("tips.csv")["input_ids"]


_BUILD = ("import json, sys; from baselines.tiny_model import TinyModelSpec, build_tiny_model; "
          "corpus, spec = json.load(open(sys.argv[2])); print(build_tiny_model(sys.argv[1], corpus, TinyModelSpec(**spec)))")


def test_concurrent_builds_of_one_spec_publish_one_directory(tmp_path):
    """Runs started together (ranks, a sweep) may all find no build and all build; one
    publishes and the others use it, without an error and without a half-written file."""
    import json
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    (tmp_path / "args.json").write_text(json.dumps([CORPUS, SPEC]))
    procs = [subprocess.Popen([sys.executable, "-c", _BUILD, str(tmp_path / "m"), str(tmp_path / "args.json")], cwd=root,
                              env={**os.environ, "PYTHONPATH": str(root)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(3)]
    outputs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], [err[-2000:] for _, err in outputs]
    paths = {out.strip().splitlines()[-1] for out, _ in outputs}
    assert len(paths) == 1
    assert [p.name for p in (tmp_path / "m").iterdir()] == [Path(*paths).name]
    assert AutoTokenizer.from_pretrained(*paths)("tips.csv")["input_ids"]
