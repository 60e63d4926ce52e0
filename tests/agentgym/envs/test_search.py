"""Search-v1 and SearchR1-v1: oracle, tools, scoring guards, both retrieval backends."""

import json
import math

import gymnasium as gym
import pytest

import agentgym  # noqa: F401 - registers the envs
from agentgym.envs.search import SearchEnv
from agentgym.errors import ConfigError
from agentgym.fingerprint import fingerprint_diff
from agentgym.policies import oracle_policy
from agentgym.retrieval import LocalRetriever, start_service_in_thread
from agentgym.runner import run_episodes

SAMPLE_PER_SPLIT = 400


def call(name, **arguments):
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


@pytest.mark.parametrize("env_id", ["agentgym/Search-v1", "agentgym/SearchR1-v1"])
@pytest.mark.parametrize("split", ["train", "validation", "test"])
def test_oracle_scores_at_least_99_percent(env_id, split):
    report = run_episodes(env_id, oracle_policy, SAMPLE_PER_SPLIT, 16, seed=1000, env_kwargs={"split": split})
    failed = [e.task_id for e in report.episodes if not e.success]
    assert not report.lost, report.lost[0][1]
    assert report.success_rate >= 0.99, f"oracle failed on {failed}"
    assert report.infra_failed == 0


def test_reset_is_deterministic_and_info_is_complete():
    env = gym.make("agentgym/Search-v1", split="validation")
    obs, info = env.reset(seed=7)
    _, again = env.reset(seed=7)
    assert info["task_id"] == again["task_id"]
    assert {t["function"]["name"] for t in info["tools"]} == {"search", "open", "answer"}
    assert "Question:" in obs and info["messages"][-1]["content"].startswith("Question:")
    fields = env.unwrapped.fingerprint.fields
    assert fields["corpus_version"] == env.unwrapped.dataset.corpus.version and fields["env"] == "agentgym/Search-v1"


def test_search_lists_numbered_results_with_ids_titles_and_snippets():
    env = SearchEnv()
    env.reset(options={"task_id": env.dataset.questions("train")[0].id})
    obs, *_ = env.step(call("search", query="capital of France", k=4))
    result = env.last_results[0]
    assert result.status == "ok"
    lines = [line for line in result.output.splitlines() if line[:2] in {"1.", "2.", "3.", "4.", "5."}]
    assert len(lines) == 4 and lines[0].startswith("1. [country-FR] France (country profile)")
    env.step(call("search", query="x", k=50))
    assert env.last_results[0].status == "invalid_args"
    env.step(call("search", query="   "))
    assert env.last_results[0].status == "agent_error" and "empty" in env.last_results[0].output


def test_open_paginates_and_rejects_unknown_ids():
    env = SearchEnv(page_chars=200)
    env.reset(seed=0)
    doc = max(env.dataset.corpus, key=lambda d: len(d.text))
    pages = math.ceil(len(doc.text) / 200)
    env.step(call("open", doc_id=doc.id))
    first = env.last_results[0]
    assert first.status == "ok" and f"(page 1 of {pages})" in first.output and "page=2" in first.output
    env.step(call("open", doc_id=doc.id, page=pages))
    assert env.last_results[0].status == "ok" and doc.text[-50:] in env.last_results[0].output
    env.step(call("open", doc_id=doc.id, page=pages + 1))
    assert env.last_results[0].status == "agent_error" and f"1 to {pages}" in env.last_results[0].output
    env.step(call("open", doc_id="wiki-99999999"))
    assert env.last_results[0].status == "agent_error" and "search results" in env.last_results[0].output


def test_answer_is_graded_with_guards_and_diagnostics():
    env = SearchEnv(split="test")
    question = next(q for q in env.dataset.questions("test") if q.num_hops == 2)
    env.reset(options={"task_id": question.id})
    env.step(call("search", query=env.dataset.corpus.get(question.supporting_doc_ids[0]).title))
    *_, info = env.step(call("answer", answer=f"{question.answer} or Atlantis"))
    assert info["reward"] == 0.0 and info["answer_guard"] == "multiple_candidates"
    assert info["searches"] == 1 and info["retrieval_recall"] in (0.5, 1.0)
    env.reset(options={"task_id": question.id})
    _, reward, terminated, _, info = env.step(call("answer", answer=question.golden_answers[-1].upper()))
    assert terminated and reward == 1.0 and info["f1"] == 1.0 and info["retrieval_recall"] == 0.0
    assert info["num_hops"] == 2 and info["searches"] == 0


def test_tag_variant_uses_search_r1_prompt_and_information_blocks():
    env = gym.make("agentgym/SearchR1-v1")
    obs, info = env.reset(seed=3)
    assert env.unwrapped.env_id == "agentgym/SearchR1-v1"
    assert "<search>" in obs and "<answer>" in obs
    assert {t["function"]["name"] for t in info["tools"]} == {"search", "answer"}
    obs, *_ = env.step("<think>look it up</think><search>capital of Japan</search>")
    assert obs.startswith("<information>Doc 1(Title: Japan (country profile)) Japan is a country")
    assert "The capital of Japan is Tokyo." in obs and "Doc 2(Title: " in obs
    _, reward, terminated, _, _ = env.step(f"<answer>{env.unwrapped.task.question.answer}</answer>")
    assert terminated and reward == 1.0


def test_bring_your_own_corpus_and_questions(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("\n".join(json.dumps(d) for d in [
        {"id": "0", "contents": '"Zorblat"\nZorblat is the capital of the island of Quux.'},
        {"id": "1", "contents": '"Quux"\nQuux is an island whose language is Quuxish.'},
    ]) + "\n")
    qa = tmp_path / "qa.jsonl"
    qa.write_text(json.dumps({"id": "q1", "question": "What is the capital of Quux?", "golden_answers": ["Zorblat"],
                              "supporting_doc_ids": ["0"]}) + "\n")
    report = run_episodes("agentgym/Search-v1", oracle_policy, 3, 1,
                          env_kwargs={"corpus_path": str(corpus), "qa_path": str(qa), "split": "test"})
    assert report.success_rate == 1.0 and report.episodes[0].task_id == "q1"
    with pytest.raises(ConfigError, match="qa_path"):
        SearchEnv(corpus_path=str(corpus))


@pytest.fixture
def retriever_service():
    env = SearchEnv()
    running = start_service_in_thread(LocalRetriever.for_corpus(env.dataset.corpus).index, port=0)
    yield running
    running.stop()


def test_remote_backend_solves_tasks_and_keeps_the_fingerprint(retriever_service):
    remote = SearchEnv(split="validation", retriever_url=retriever_service.url)
    assert str(remote.fingerprint) == str(SearchEnv(split="validation").fingerprint)
    report = run_episodes("agentgym/Search-v1", oracle_policy, 64, 16,
                          env_kwargs={"split": "validation", "retriever_url": retriever_service.url})
    assert report.success_rate == 1.0 and report.infra_failed == 0 and not report.lost
    assert retriever_service.service.stats.queries >= 64


def test_a_service_over_another_corpus_is_refused_and_an_unknown_one_is_unverified(tmp_path):
    corpus = tmp_path / "other.jsonl"
    corpus.write_text(json.dumps({"id": "0", "contents": '"Zorblat"\nZorblat is a city.'}) + "\n")
    from tasks.search.corpus import Corpus

    other = start_service_in_thread(LocalRetriever.for_corpus(Corpus.read_jsonl(corpus)).index, port=0)
    try:
        with pytest.raises(ConfigError, match="corpus version"):
            SearchEnv(retriever_url=other.url)
    finally:
        other.stop()
    down = SearchEnv(retriever_url="http://127.0.0.1:9", retriever_timeout_s=0.5, retriever_retries=0)
    diff = fingerprint_diff(down, SearchEnv())
    assert diff == {"retriever_corpus": ("unverified", None)}


def test_service_stopped_mid_episode_is_infra_failed_not_an_agent_error(retriever_service):
    env = SearchEnv(split="test", retriever_url=retriever_service.url, retriever_timeout_s=0.5,
                    retriever_retries=1)
    env.reset(seed=0)
    _, _, terminated, truncated, info = env.step(env.oracle_action())
    assert not (terminated or truncated) and not info["infra_failed"]
    retriever_service.stop()
    _, reward, terminated, truncated, info = env.step(call("search", query="anything"))
    assert info["infra_failed"] and truncated and not terminated
    assert [r["status"] for r in info["tool_results"]] == ["infra_error"]
    assert "not your fault" in env.last_results[0].output
    metrics = env.telemetry.metrics()
    assert metrics["tool/search/infra_error_rate"] > 0 and metrics["tool/search/agent_error_rate"] == 0


def test_a_refused_config_holds_no_retriever_client():
    """A ConfigError from the family's checks (no questions for ``hops``) comes before it
    takes a share of the process's retriever client, so nothing is left holding it."""
    from agentgym.envs.search import SearchFamily
    from agentgym.resources import shared_resources
    from agentgym.runtime import run_sync

    url = "http://127.0.0.1:9"  # never reached: the config is refused first
    settings = {"timeout_s": 5.0, "max_retries": 2, "max_concurrency": 64}  # the family's defaults
    with pytest.raises(ConfigError, match="hops=9"):
        SearchFamily(retriever_url=url, hops=9)
    client = shared_resources().retriever(url, **settings)
    run_sync(shared_resources().release_retriever(client))  # the only user lets go: closed, forgotten
    assert shared_resources().retriever(url, **settings) is not client


@pytest.mark.parametrize("bad", [{"split": "dev"}, {"render_mode": "human"}, {"parser": "xml"}])
def test_a_refused_env_config_is_a_config_error_and_holds_no_retriever_client(retriever_service, bad):
    """The env's own checks (split, render_mode, parser) run before the family is built,
    so the refusal is a ConfigError (not the family's KeyError) and no share is taken."""
    from agentgym.resources import shared_resources
    from agentgym.runtime import run_sync

    url = retriever_service.url  # a fresh service (port) per test: no other test shares its client
    with pytest.raises(ConfigError):
        gym.make("agentgym/Search-v1", retriever_url=url, **bad)
    settings = {"timeout_s": 5.0, "max_retries": 2, "max_concurrency": 64}  # the family's defaults
    client = shared_resources().retriever(url, **settings)
    run_sync(shared_resources().release_retriever(client))  # the only user lets go: closed, forgotten
    fresh = shared_resources().retriever(url, **settings)
    run_sync(shared_resources().release_retriever(fresh))
    assert fresh is not client


def test_an_unanswered_episode_still_says_its_hop_count_and_template():
    """The slicing keys are in the info of every episode's end, not only answered ones."""
    env = gym.make("agentgym/Search-v1", split="validation", max_turns=1)
    try:
        env.reset(seed=7)
        question = env.unwrapped.task.question
        _, reward, terminated, truncated, info = env.step(
            '<tool_call>{"name": "search", "arguments": {"query": "anything"}}</tool_call>')
        assert truncated and not terminated and reward == 0.0
        assert (info["num_hops"], info["template"]) == (question.num_hops, question.template)
    finally:
        env.close()
