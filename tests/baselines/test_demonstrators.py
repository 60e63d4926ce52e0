"""The SFT demonstrators: ``search_reader`` writes only what it has seen; the env's
oracle (what ``sft.demonstrator=oracle`` imitates) opens a doc id before any result."""

from __future__ import annotations

import json
import re

import gymnasium as gym
import pytest

import agentgym  # noqa: F401
from baselines.config import load_config
from baselines.demonstrators import DEMONSTRATORS, demonstrator, search_reader

KWARGS = {"hops": 1, "topk": 1, "snippet_chars": 160, "page_chars": 200, "max_turns": 3, "split": "test"}


def _calls(action: str) -> list[dict]:
    return [json.loads(c) for c in re.findall(r"<tool_call>(.*?)</tool_call>", action, re.S)]


def _play(env, policy, seed: int) -> tuple[list[tuple[dict, str]], float]:
    """(call, everything the agent had seen before writing it) per call, and the reward."""
    _, info = env.reset(seed=seed)
    seen = " ".join(m["content"] for m in info["messages"])
    written = []
    while True:
        action = policy(env)
        written += [(c, seen) for c in _calls(action)]
        _, reward, terminated, truncated, info = env.step(action)
        seen += " " + " ".join(m["content"] for m in info["messages"])
        if terminated or truncated:
            return written, reward


def test_search_reader_writes_only_what_it_has_seen_and_solves_1hop_questions():
    env = gym.make("agentgym/Search-v2", **KWARGS)
    wins, unseen_answers = 0, 0
    for seed in range(40):
        written, reward = _play(env, search_reader, seed)
        wins += reward >= 1
        question = env.unwrapped.task.question.question
        assert written[0][0] == {"name": "search", "arguments": {"query": question}}
        for call, seen in written:
            if call["name"] == "open":
                assert f"[{call['arguments']['doc_id']}]" in seen, "opened an id no result showed"
            if call["name"] == "answer":
                unseen_answers += str(call["arguments"]["answer"]).casefold() not in seen.casefold()
    env.close()
    assert wins == 40  # it falls back to the gold answer when nothing showed it
    assert unseen_answers <= 4  # ... which is rare (7% of 1-hop test questions measured)


def test_the_search_oracle_opens_a_doc_id_before_seeing_any_result():
    """Why search_reader exists: imitating this turn teaches the model to make ids up."""
    env = gym.make("agentgym/Search-v2", **KWARGS)
    written, _ = _play(env, DEMONSTRATORS["oracle"], 0)
    env.close()
    opened = [(c, seen) for c, seen in written if c["name"] == "open"]
    assert opened and f"[{opened[0][0]['arguments']['doc_id']}]" not in opened[0][1]


def test_unknown_demonstrator_is_a_config_error():
    with pytest.raises(Exception, match="demonstrator"):
        load_config(None, ["sft.demonstrator=psychic"])
    with pytest.raises(ValueError, match="search_reader"):
        demonstrator("psychic")


@pytest.fixture(scope="module")
def chat(tiny_model_dir):
    from transformers import AutoTokenizer

    from baselines.chat_tokens import ChatTokenizer

    return ChatTokenizer(AutoTokenizer.from_pretrained(tiny_model_dir))


def _incremental(env, chat, policy, seed: int) -> list[int]:
    """Tokens as the agent loop builds them, turn by turn (what SFT must reproduce)."""
    _, info = env.reset(seed=seed)
    ids = chat.prompt_ids(info["messages"], info["tools"])
    while True:
        action = policy(env)
        ids += chat.tokenizer.encode(action, add_special_tokens=False) + [chat.end_of_turn_id]
        _, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            return ids
        ids += chat.observation_ids(info["messages"], turn_ended=True)


@pytest.mark.parametrize("env_id,kwargs,policy", [("agentgym/Search-v2", KWARGS, search_reader),
                                                  ("agentgym/Calculator-v0", {"difficulty": 1}, DEMONSTRATORS["oracle"])])
def test_demonstrations_are_tokenised_exactly_as_rollouts(chat, env_id, kwargs, policy):
    from baselines.sft import oracle_trajectories

    env = gym.make(env_id, **kwargs)
    trajs = oracle_trajectories(env, chat, range(5), policy=policy)
    for seed, traj in zip(range(5), trajs):
        assert traj.token_ids == _incremental(env, chat, policy, seed)
        assert traj.success
    env.close()


def test_counterfactual_copies_swap_entity_and_answer_everywhere(chat):
    from baselines.sft import oracle_trajectories

    env = gym.make("agentgym/Search-v2", **{**KWARGS, "split": "train"})
    trajs = oracle_trajectories(env, chat, range(30), policy=search_reader, counterfactual=0.5, seed=1)
    env.close()
    originals, copies = trajs[:30], trajs[30:]
    assert len(copies) == 15
    by_id = {t.task_id: t for t in originals}
    changed = 0
    for copy in copies:
        source = by_id[copy.task_id.split("#cf")[0]]
        question = copy.messages[1]["content"]
        answer = _calls(copy.messages[-1]["content"])[0]["arguments"]["answer"]
        seen = " ".join(m["content"] for m in copy.messages if m["role"] in ("user", "tool"))
        assert answer.casefold() in seen.casefold()            # still readable from the results
        assert _calls(copy.messages[2]["content"])[0]["arguments"]["query"] == question.removeprefix("Question: ")
        changed += question != source.messages[1]["content"] and answer != _calls(source.messages[-1]["content"])[0]["arguments"]["answer"]
    assert changed >= 10  # a donor of the same kind differs in both (the same episode may be drawn)


def test_invented_entities_are_new_names_copied_everywhere(chat):
    """``invent=1``: every copy's entity is a made-up name, the same one in the question,
    the query, the results' title and text, and never a name the corpus's episodes used."""
    from baselines.demonstrators import counterfactual, episode_slots
    from baselines.sft import _play as play_episode

    env = gym.make("agentgym/Search-v2", **{**KWARGS, "split": "train"})
    played, slots = [], []
    for seed in range(30):
        played.append(play_episode(env, search_reader, seed)[:5])
        slots.append(episode_slots(env, played[-1][0]))
    env.close()
    entities = {s[1]["entity"] for s in slots if s and "entity" in s[1]}
    questions = {p[0][1]["content"] for p in played}
    names = set()
    for messages, *_ in counterfactual(played, slots, 20, seed=2, invent=1.0):
        assert messages[1]["content"] not in questions
        question = messages[1]["content"].removeprefix("Question: ")
        query = _calls(messages[2]["content"])[0]["arguments"]["query"]
        assert query == question
        title = re.search(r"\] (.+?)(?: \(city profile\))?\n", messages[3]["content"]).group(1)
        assert title in question and title not in entities, (title, question)
        assert all(e not in question for e in entities if len(e) > 3)
        names.add(title)
    assert len(names) >= 18  # names are drawn afresh, not from a small list


def test_counterfactual_data_analysis_swaps_the_printed_value_not_the_question(chat):
    from baselines.sft import oracle_trajectories

    env = gym.make("agentgym/DataAnalysis-v2", tier=1, backend="process", max_turns=3)
    try:
        trajs = oracle_trajectories(env, chat, range(24), counterfactual=0.5, seed=3)
    finally:
        env.close()
    by_id = {t.task_id: t for t in trajs[:24]}
    swapped = 0
    for copy in trajs[24:]:
        source = by_id[copy.task_id.split("#cf")[0]]
        assert copy.messages[:2] == source.messages[:2]  # the prompt (question, file list) is the source's
        printed = copy.messages[3]["content"].strip()
        answer = next(iter(_calls(copy.messages[4]["content"])[0]["arguments"].values()))
        assert str(answer) == printed  # still the value the tool showed
        swapped += printed != source.messages[3]["content"].strip()
    assert swapped >= 6


def test_trainer_draws_demonstrations_from_sft_env_kwargs(tmp_path, tiny_model_dir, monkeypatch):
    """sft.env_kwargs reach the demonstration env: with train_part [0, 2] for SFT and
    [1, 2] for RL, every demonstrated question is in part 0 (a spy that calls through)."""
    import baselines.sft as sft
    from baselines.trainer import Trainer

    played: list[str] = []
    real = sft.oracle_trajectories

    def spy(env, *args, **kwargs):
        trajs = real(env, *args, **kwargs)
        played.extend(t.task_id for t in trajs)
        return trajs

    monkeypatch.setattr(sft, "oracle_trajectories", spy)
    cfg = load_config(None, [
        f"model.path={tiny_model_dir}", f"log.run_dir={tmp_path}/run", "log.tensorboard=false", "device=cpu", "steps=1",
        "eval_every=0", "env.id=agentgym/Search-v2",
        "env.kwargs={hops: 1, topk: 1, snippet_chars: 160, page_chars: 200, max_turns: 3, train_part: [1, 2]}",
        "sft.env_kwargs={train_part: [0, 2]}", "sft.demonstrator=search_reader", "sft.episodes=12", "sft.steps=1",
        "sft.batch_size=2", "rollout.tasks_per_step=1", "rollout.group_size=2", "algo.micro_batch_size=2",
        "algo.num_minibatches=1"])
    trainer = Trainer(cfg)
    trainer.close()
    part0 = {q.id for q in gym.make("agentgym/Search-v2", hops=1, train_part=[0, 2]).unwrapped.family._questions_of("train")}
    assert len(played) == 12 and all(task_id in part0 for task_id in played)
    assert (tmp_path / "run" / "sft_model" / "config.json").exists()


def _played_data_analysis(episodes):
    """The oracle's DataAnalysis-v2 episodes (seeds 0..episodes-1) and their swappable slots."""
    from baselines.demonstrators import episode_slots
    from baselines.sft import _play as play_episode

    env = gym.make("agentgym/DataAnalysis-v2", tier=1, backend="process", max_turns=3)
    try:
        played, slots = [], []
        for seed in range(episodes):
            played.append(play_episode(env, None, seed)[:5])
            slots.append(episode_slots(env, played[-1][0]))
    finally:
        env.close()
    return played, slots


def test_invented_names_rename_data_analysis_columns_values_and_files_consistently():
    """``invent=1`` on DataAnalysis: the quoted columns/values and the file stem become
    made-up names in the file list, the question and the code alike, and the program
    still prints what the copy answers (the output is not the names')."""
    from baselines.demonstrators import counterfactual

    played, slots = _played_data_analysis(30)
    originals = {p[0][1]["content"] for p in played}
    renamed = 0
    for messages, *_ in counterfactual(played, slots, 15, seed=4, invent=1.0):
        prompt, code = messages[1]["content"], _calls(messages[2]["content"])[0]["arguments"]["code"]
        assert prompt not in originals
        file_name = re.search(r"- (\S+\.csv) \(", prompt).group(1)
        assert f"In {file_name}," in prompt and f"read_csv('{file_name}')" in code
        for name in re.findall(r"'([^']+)'", prompt.split("Question:")[1]):
            if name != "value" and not name.isdigit():
                assert f"'{name}'" in code, (name, code)  # the code uses the question's (new) names
        answer = next(iter(_calls(messages[-1]["content"])[0]["arguments"].values()))
        assert answer == json.loads(messages[3]["content"])  # (a text answer prints JSON-quoted)
        renamed += 1
    assert renamed == 15


def test_search_reader_answers_with_the_results_own_tokens():
    """A word's space is part of its first token (" T|an|z|ania"); the answer keeps the
    space the result had, so its tokens are the result's and a small model can copy them
    (without it the JSON value starts 'T|an|...', a respelling the tiny model never learned)."""
    from baselines.tiny_model import build_tokenizer

    env = gym.make("agentgym/Search-v2", **KWARGS)
    texts, checked = [], []
    for seed in range(60):
        written, reward = _play(env, search_reader, seed)
        answer = str(written[-1][0]["arguments"]["answer"])
        seen = written[-1][1]
        assert reward >= 1
        if answer[:1] == " ":
            assert answer[1:2].isalpha() and answer in seen  # the space is the result's
            checked.append((answer, seen))
        else:
            assert not answer[:1].isalpha() or f" {answer}" not in seen
        texts += [seen, json.dumps({"answer": answer})]
    env.close()
    assert len(checked) >= 10  # countries, capitals, currencies
    tok = build_tokenizer(texts * 3, 600)
    for answer, seen in checked:
        call = tok.encode(json.dumps({"name": "answer", "arguments": {"answer": answer}}))
        value = tok.encode(answer)
        assert any(call[k:k + len(value)] == value for k in range(len(call))), answer
        shown = tok.encode(seen)
        assert any(shown[k:k + len(value)] == value for k in range(len(shown))), answer


def test_invented_names_keep_underscores_digits_and_capitals_and_plain_words_draw_as_before():
    """A held-out ``seattle_weather`` must look like the made-up names SFT showed: a model
    that only copied smooth syllables wrote ``seattleweather.csv``."""
    import random
    import re

    from baselines.demonstrators import invented_name

    for seed in range(10):
        assert re.fullmatch(r"[a-z]{3,}_[a-z]{3,}", invented_name("seattle_weather", random.Random(seed)))
        assert re.fullmatch(r"[A-Z]{3,}_[A-Z]{3,}", invented_name("TEMP_MIN", random.Random(seed)))
        assert re.fullmatch(r"[a-z]{3,}[A-Z][a-z]{2,}", invented_name("gdpPercap", random.Random(seed)))
    # Search's entities (plain words) keep their exact draws: the documented runs stay reproducible
    assert invented_name("James Prescott Joule", random.Random(0)) == _old_invented_name("James Prescott Joule", random.Random(0))


def test_spelled_names_keep_the_shape_and_hold_the_pieces_syllables_never_do():
    """Syllable names never hold ``ps``, ``x`` or ``qu`` (the held-out ``tips`` is ``ti`` +
    ``ps`` for the tiny tokenizer, and the model wrote ``tiokes.csv``); names spelled with
    a tokenizer's pieces do, in the shape of the name they replace."""
    import random
    import re

    from baselines.demonstrators import invented_name

    pieces = ["ps", "x", "qu", "tion", "ment", "a"]
    syllable = " ".join(invented_name(w, random.Random(seed)) for seed in range(200) for w in ("tips", "seattle_weather"))
    assert not re.search(r"ps|x|qu", syllable)
    spelled = []
    for seed in range(50):
        name = invented_name("seattle_weather", random.Random(seed), pieces)
        assert re.fullmatch(r"(?:ps|x|qu|tion|ment|a){2,}_(?:ps|x|qu|tion|ment|a){2,}", name), name
        assert re.fullmatch(r"[A-Z]+_[A-Z]+", invented_name("TEMP_MIN", random.Random(seed), pieces))
        spelled.append(invented_name("tips", random.Random(seed), pieces))
    assert all(re.fullmatch(r"(?:ps|x|qu|tion|ment|a)+", n) and len(n) >= 3 for n in spelled), spelled
    assert {p for p in pieces if any(p in n for n in spelled)} == set(pieces)


def test_spelled_copies_rename_consistently_and_none_spelled_replays_the_old_copies():
    """``spelled`` makes some copies' names from the pieces, renamed everywhere as before;
    ``spelled=0`` (or no pieces) draws nothing more, so earlier runs' data is unchanged."""
    from baselines.demonstrators import counterfactual

    played, slots = _played_data_analysis(20)
    plain = [m for m, *_ in counterfactual(played, slots, 12, seed=4, invent=1.0)]
    assert plain == [m for m, *_ in counterfactual(played, slots, 12, seed=4, invent=1.0, pieces=["qu", "x"], spelled=0.0)]
    assert plain == [m for m, *_ in counterfactual(played, slots, 12, seed=4, invent=1.0, pieces=(), spelled=1.0)]
    spelled = [m for m, *_ in counterfactual(played, slots, 12, seed=4, invent=1.0, pieces=["qu", "xo"], spelled=1.0)]
    for messages in spelled:
        prompt, code = messages[1]["content"], _calls(messages[2]["content"])[0]["arguments"]["code"]
        file_name = re.search(r"- (\S+\.csv) \(", prompt).group(1)
        assert re.fullmatch(r"(?:qu|xo|[_\d])+\.csv", file_name, re.IGNORECASE), file_name
        assert f"In {file_name}," in prompt and f"read_csv('{file_name}')" in code


def _old_invented_name(like, rng):
    onsets = "b c d f g h j k l m n p r s t v w z br dr gr kr st tr ch sh th".split()
    vowels = "a e i o u a e i o u y ae ou ei".split()
    words = []
    for word in like.split():
        out = ""
        while len(out) < max(3, len(word) + rng.randint(-2, 2)):
            out += rng.choice(onsets) + rng.choice(vowels) + (rng.choice("nrlsmtk") if rng.random() < 0.3 else "")
        words.append(out[:1].upper() + out[1:] if word[0].isupper() else out)
    return " ".join(words)


# ------------------------------------------------------------ recovery from a mistake
def _da_env(**kwargs):
    return gym.make("agentgym/DataAnalysis-v2", tier=1, backend="process", **{"max_turns": 3, "invent_names": 1.0, **kwargs})


def test_recovery_episodes_show_a_real_error_then_the_right_call_and_succeed():
    """``recovering(oracle, 1)``: the first call fails in the sandbox (a file name copied
    wrong, or code cut off after a bracket), the second is the oracle's code, and the
    episode still ends in a success within three turns."""
    from baselines.demonstrators import oracle, recovering
    from baselines.sft import _play as play_episode

    env = _da_env()
    kinds = set()
    try:
        for seed in range(24):
            env.reset(seed=seed)
            right = env.unwrapped.task.question.oracle_code()
            messages, _, _, _, success, failed = play_episode(env, recovering(oracle, 1.0), seed)
            calls = [c for m in messages if m["role"] == "assistant" for c in _calls(m["content"])]
            assert success and failed and [c["name"] for c in calls] == ["python", "python", "answer"]
            wrong = calls[0]["arguments"]["code"]
            assert wrong != right and calls[1]["arguments"]["code"] == right
            error = messages[messages.index(next(m for m in messages if m["role"] == "tool"))]["content"]
            kind = "name" if "FileNotFoundError" in error else "cut" if "SyntaxError" in error else error
            assert kind in ("name", "cut")
            kinds.add(kind)
    finally:
        env.close()
    assert kinds == {"name", "cut"}


def test_recovery_fraction_is_reproducible_and_zero_is_the_plain_demonstrator():
    from baselines.demonstrators import oracle, recovering
    from baselines.sft import _play as play_episode

    env = _da_env()
    try:
        plain = [play_episode(env, oracle, s) for s in range(16)]
        zero = [play_episode(env, recovering(oracle, 0.0), s) for s in range(16)]
        quarter = [bool(play_episode(env, recovering(oracle, 0.25, seed=1), s)[5]) for s in range(40)]
        again = [bool(play_episode(env, recovering(oracle, 0.25, seed=1), s)[5]) for s in range(40)]
        other = [bool(play_episode(env, recovering(oracle, 0.25, seed=2), s)[5]) for s in range(40)]
    finally:
        env.close()
    assert [p[0] for p in zero] == [p[0] for p in plain] and not any(p[5] for p in plain)
    assert quarter == again and quarter != other
    assert 4 <= sum(quarter) <= 18  # about a quarter of 40


def test_recovery_is_left_out_when_the_turns_leave_no_room_to_retry():
    """With ``max_turns=2`` (call, answer) a mistake would end the episode unsolved: the
    demonstration stays the plain one, so every demonstration is a success."""
    from baselines.demonstrators import oracle, recovering
    from baselines.sft import _play as play_episode

    env = _da_env(max_turns=2)
    try:
        played = [play_episode(env, recovering(oracle, 1.0), s) for s in range(8)]
    finally:
        env.close()
    assert all(p[4] and not p[5] for p in played)


def test_episodes_with_a_failed_call_are_not_counterfactually_copied(chat, tiny_model_dir):
    """A copy renames the question's names; the error text of a mistake names the old
    ones, so a copy of a recovery episode would show an error that is not its own."""
    from baselines.demonstrators import oracle, recovering
    from baselines.sft import oracle_trajectories

    env = _da_env()
    try:
        trajs = oracle_trajectories(env, chat, range(24), policy=recovering(oracle, 0.5, seed=3), counterfactual=1.0,
                                    seed=3, invent=1.0)
    finally:
        env.close()
    failed = {t.task_id for t in trajs[:24] if any(m["role"] == "tool" and "Error" in m["content"] for m in t.messages)}
    copied = {t.task_id.split("#cf")[0] for t in trajs[24:]}
    assert failed and len(trajs) == 48
    assert not failed & copied
    for t in trajs[:24]:  # the mistaken call is context, not imitated; the fix and the answer are
        spans = t.info.get("unlearned", [])
        assert len(spans) == (t.task_id in failed)
        for start, end in spans:
            assert not any(t.loss_mask[start:end])
            assert '"python"' in chat.tokenizer.decode(t.token_ids[start:end])
        assert sum(t.loss_mask) > 0
    from transformers import AutoModelForCausalLM

    from baselines.sft import sft_train

    # the SFT step runs on them (rows of different lengths; the observation loss reads the spans)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    losses = sft_train(model, trajs, steps=2, batch_size=8, lr=1e-3, pad_token_id=chat.tokenizer.pad_token_id or 0,
                       observation_weight=1.0)
    assert len(losses) == 2


def test_mistakes_apply_to_python_calls_only():
    import random

    from baselines.demonstrators import mistaken_call

    rng = random.Random(0)
    search = '<tool_call>{"name": "search", "arguments": {"query": "x"}}</tool_call>'
    assert mistaken_call(search, rng) is None and mistaken_call("no call at all", rng) is None
    code = "import pandas as pd\ndf = pd.read_csv('sea_weather.csv')\nprint(df['t'].max())\n"
    action = f'<tool_call>{json.dumps({"name": "python", "arguments": {"code": code}})}</tool_call>'
    wrong = {_calls(mistaken_call(action, random.Random(s)))[0]["arguments"]["code"] for s in range(40)}
    assert code.replace("sea_weather", "seaweather") in wrong  # the underscore dropped, as the model does
    assert any(w.endswith(("(", "[")) and w != code for w in wrong)  # cut after a bracket past read_csv
    assert all(len(w) >= len("import pandas as pd\ndf = pd.read_csv('sea_weather.csv')") - 1 for w in wrong)


def test_short_and_column_mistakes_are_the_models_cut_file_names_and_dropped_column_letters():
    """``short``: the file name cut (``'nile'`` for ``nile.csv``, at an underscore or a
    letter, never with its extension); ``column``: a quoted column with a letter or an
    underscore dropped, never the file. In oracle code and in names-first bindings."""
    import random

    from baselines.demonstrators import bind_names_first, mistaken_call

    oracle_code = "import pandas as pd\ndf = pd.read_csv('state_crime.csv')\nprint(df['hs_grad'].max())\n"
    for code in (oracle_code, bind_names_first(oracle_code)):
        action = f'<tool_call>{json.dumps({"name": "python", "arguments": {"code": code}})}</tool_call>'
        short = {_calls(mistaken_call(action, random.Random(s), ("short",)))[0]["arguments"]["code"] for s in range(40)}
        files = {re.search(r"'([^']*)'", w[w.index("read_csv") if "read_csv('" in w else w.index("file = "):]).group(1) for w in short}
        assert "state_crime" in files and "state" in files and not any(".csv" in f for f in files)
        assert all("state_crime".startswith(f) and f for f in files)
        column = {_calls(mistaken_call(action, random.Random(s), ("column",)))[0]["arguments"]["code"] for s in range(40)}
        assert code.replace("'hs_grad'", "'hsgrad'") in column
        assert all("'state_crime.csv'" in w and "'hs_grad'" not in w for w in column)
    action = f'<tool_call>{json.dumps({"name": "python", "arguments": {"code": oracle_code}})}</tool_call>'
    with pytest.raises(ValueError, match="mistake kinds"):
        mistaken_call(action, random.Random(0), ("typo",))
    default = [mistaken_call(action, random.Random(s)) for s in range(20)]  # the original kinds' draws, unchanged
    assert default == [mistaken_call(action, random.Random(s), ("name", "cut")) for s in range(20)]


def test_recovery_from_a_short_file_or_a_dropped_column_shows_the_hint_and_succeeds():
    """Through the real env with ``name_hints``: the first call fails with the mistake's
    own exception, the listing follows it, and the demonstrator's call then solves."""
    from baselines.demonstrators import names_first, recovering
    from baselines.sft import _play as play_episode

    env = _da_env(name_hints=True)
    seen = set()
    try:
        for seed in range(16):
            messages, _, _, _, success, failed = play_episode(env, recovering(names_first, 1.0, mistakes=("short", "column")), seed)
            error = next(m for m in messages if m["role"] == "tool")["content"]
            assert success and failed, error
            kind = "short" if "FileNotFoundError" in error else "column" if "KeyError" in error else error
            assert kind in ("short", "column") and "Files in your working directory:]" in error
            seen.add(kind)
    finally:
        env.close()
    assert seen == {"short", "column"}


# ------------------------------------------------------------ names first
def test_names_first_code_names_each_string_once_on_its_own_line_and_still_solves():
    """``names_first``: the oracle's code with every quoted file, column and value bound to
    a variable on its own line first, so every copied name ends in the same ``'`` and
    newline (the tiny model closed ``df['yield`` with the ``')`` of ``read_csv``). The
    program must stay the oracle's: each rewritten episode still succeeds."""
    from baselines.demonstrators import names_first
    from baselines.sft import _play as play_episode

    env = _da_env(invent_names=0.0)
    rewritten = 0
    try:
        for seed in range(24):
            env.reset(seed=seed)
            right = env.unwrapped.task.question.oracle_code()
            messages, _, _, _, success, failed = play_episode(env, names_first, seed)
            calls = [c for m in messages if m["role"] == "assistant" for c in _calls(m["content"])]
            assert success and not failed and [c["name"] for c in calls] == ["python", "answer"]
            code = calls[0]["arguments"]["code"]
            literals = set(re.findall(r"'[^'\n]*'", right))
            if code == right:
                continue
            rewritten += 1
            lines = code.split("\n")
            bound = [i for i, line in enumerate(lines) if re.fullmatch(r"(file|column|value)\d* = '[^'\n]*'", line)]
            assert bound == list(range(bound[0], bound[0] + len(bound))), code  # one block,
            assert all(line.startswith("import ") for line in lines[:bound[0]]), code  # after the imports
            values = [lines[i].split(" = ", 1)[1] for i in bound]
            assert sorted(values) == sorted(literals), code  # each string once
            rest = "\n".join(lines[bound[-1] + 1:])
            assert "'" not in rest, code  # and nowhere else
    finally:
        env.close()
    assert rewritten >= 20


def test_mistakes_find_the_file_name_in_names_first_code():
    """The recovery demonstrations' file-name mistake applies to a bound ``file``, too."""
    import random

    from baselines.demonstrators import _call, bind_names_first, mistaken_call, python_code

    code = bind_names_first("import pandas as pd\ndf = pd.read_csv('pen_guins.csv')\nresult = float(df['x'].sum())\n")
    wrong = [python_code(mistaken_call(_call("python", code=code), random.Random(s))) for s in range(12)]
    assert any("file = 'penguins.csv'" in w and w.endswith("sum())\n") for w in wrong)  # the name, whole code
    assert any("file = 'pen_guins.csv'" in w and not w.endswith("\n") for w in wrong)  # the code cut off
