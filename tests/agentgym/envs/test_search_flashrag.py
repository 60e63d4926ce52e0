"""FlashRAG QA files through the Search envs: the reward is Search-R1's EM over golden_answers."""

import shutil
from pathlib import Path

import gymnasium as gym
import pytest

import agentgym  # noqa: F401 - registers the envs
from agentgym.policies import oracle_policy
from agentgym.runner import run_episodes

FIXTURES = Path(__file__).parents[2] / "tasks" / "search" / "fixtures" / "flashrag"
CORPUS = [
    '{"id": "0", "contents": "\\"Berlin Wall\\"\\nThe Berlin Wall fell in 1989, under President George H. W. Bush."}',
    '{"id": "1", "contents": "\\"Water\\"\\nAt sea level water boils at 212 \\u00b0F."}',
    '{"id": "2", "contents": "\\"Wuthering Heights\\"\\nWuthering Heights is a novel by Emily Bront\\u00eb."}',
]


@pytest.fixture
def files(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("\n".join(CORPUS) + "\n")
    qa = tmp_path / "bamboogle.jsonl"
    shutil.copy(FIXTURES / "bamboogle.jsonl", qa)
    return {"corpus_path": str(corpus), "qa_path": str(qa)}


@pytest.mark.parametrize("env_id", ["agentgym/Search-v1", "agentgym/SearchR1-v1"])
def test_oracle_solves_a_flashrag_file(files, env_id):
    report = run_episodes(env_id, oracle_policy, 6, 2, env_kwargs={**files, "split": "test"})
    assert report.success_rate == 1.0 and not report.lost


@pytest.mark.parametrize(("answer", "reward", "cover_em"), [
    ("George H. W. Bush", 1.0, 1.0),
    ("george h. w. bush!", 1.0, 1.0),
    ("George H.W. Bush", 0.0, 0.0),  # Search-R1's EM, not Search-v2's aliases: comparable numbers
    ("President George H. W. Bush", 0.0, 1.0),
])
def test_reward_is_search_r1_em_with_cover_em_beside_it(files, answer, reward, cover_em):
    env = gym.make("agentgym/SearchR1-v1", **files, split="test")
    env.reset(options={"task_id": "test_0"})
    _, got, terminated, _, info = env.step(f"<answer>{answer}</answer>")
    assert terminated and got == reward
    assert (info["exact_match"], info["cover_em"]) == (reward, cover_em)
    assert env.unwrapped.fingerprint.fields["scorer"] == "search_r1_em"


def test_the_bundled_questions_keep_their_scorer():
    assert gym.make("agentgym/Search-v1").unwrapped.fingerprint.fields["scorer"] == "grade_answer"
