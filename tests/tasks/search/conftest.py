import pytest

from tasks.search import build_knowledge_base, generate_audited, split_questions


@pytest.fixture(scope="session")
def kb():
    """The bundled knowledge base, built once per test session (a few seconds)."""
    return build_knowledge_base()


@pytest.fixture(scope="session")
def generated(kb):
    return generate_audited(kb, seed=0)


@pytest.fixture(scope="session")
def questions(generated):
    return generated[0]


@pytest.fixture(scope="session")
def audit(generated):
    return generated[1]


@pytest.fixture(scope="session")
def splits(questions):
    return split_questions(questions, seed=0)
