import pytest

from agentgym.retrieval import BM25Index, start_service_in_thread
from tasks.search import Corpus, Document


def small_corpus() -> Corpus:
    return Corpus([
        Document("fr", "France (country profile)", "The capital of France is Paris. The currency is the Euro."),
        Document("de", "Germany (country profile)", "The capital of Germany is Berlin. The currency is the Euro."),
        Document("camus", "Albert Camus", "French philosopher and writer (1913–1960). He wrote The Stranger."),
        Document("lyon", "Lyon (city profile)", "Lyon is a city in France. It has a population of 472,317."),
        Document("jp", "Japan (country profile)", "The capital of Japan is Tokyo. The currency is the Yen."),
    ])


@pytest.fixture(scope="module")
def corpus():
    return small_corpus()


@pytest.fixture(scope="module")
def index(corpus):
    return BM25Index.build(corpus)


@pytest.fixture
def service(index):
    running = start_service_in_thread(index, port=0)
    yield running
    running.stop()
