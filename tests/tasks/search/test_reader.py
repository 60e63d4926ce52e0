"""The one-query reader: it chains the facts of the documents it was given, and only those."""

import pytest

from tasks.search.reader import asked_for, read_answer

IRAN = '"Iran (country profile)"\nThe capital of Iran is Tehran. The currency of Iran is the Iranian Rial (IRR). ' \
       'The official language of Iran is Persian. Iran has a population of 81,000,000. ' \
       'The demonym for people from Iran is Iranian. Iran borders Armenia, Afghanistan and Turkey.'
TURKEY = '"Turkey (country profile)"\nThe capital of Turkey is Ankara. The demonym for people from Turkey is Turkish. ' \
         'Turkey has a population of 80,000,000. Turkey borders Armenia, Georgia, Iran and Greece.'
YAZD = '"Yazd (city profile)"\nYazd is a city in Iran. It has a population of 477,905.'
KIAROSTAMI = '"Abbas Kiarostami"\nIranian film director (1940–2016). Abbas Kiarostami was a film director.'
PAMUK = '"Orhan Pamuk"\nTurkish novelist (born 1952). Orhan Pamuk is a novelist.'


@pytest.mark.parametrize("question, docs, expected", [
    ("What is the capital of Iran?", [TURKEY, IRAN], "Tehran"),
    ("Ankara is the capital of which country?", [IRAN, TURKEY], "Turkey"),
    ("What currency is used in the country where the city of Yazd is?", [YAZD, TURKEY, IRAN], "Iranian Rial"),
    ("What is the capital of the home country of Abbas Kiarostami?", [KIAROSTAMI, TURKEY, IRAN], "Tehran"),
    ("Which country borders both Afghanistan and Turkey?", [TURKEY, IRAN], "Iran"),
    ("What is the capital of the country that borders both Afghanistan and Georgia?", [IRAN, TURKEY], "Tehran"),
    ("In what year did Abbas Kiarostami die?", [PAMUK, KIAROSTAMI], "2016"),
    ("Who was born earlier, Orhan Pamuk or Abbas Kiarostami?", [PAMUK, KIAROSTAMI], "Abbas Kiarostami"),
    ("Which has more people, the home country of Orhan Pamuk or the home country of Abbas Kiarostami?",
     [PAMUK, KIAROSTAMI, TURKEY, IRAN], "Iran"),
    ("In what year was the novelist from the country whose capital is Ankara born?", [IRAN, PAMUK, TURKEY], "1952"),
    ("Who is the novelist born in the 1950s whose nationality is that of the country where Cappadocia is located?",
     ['"Cappadocia"\nHistorical region in Turkey. Cappadocia is a region.', TURKEY, PAMUK], "Orhan Pamuk"),
    ("Name the novelist born in the 1950s of the same nationality as Nazim Hikmet.",
     ['"Nazim Hikmet"\nTurkish poet (1902–1963). A poet.', '"Reza Amiri"\nIranian novelist (born 1955). A novelist.',
      PAMUK], "Orhan Pamuk"),
])
def test_the_reader_chains_facts_of_its_documents(question, docs, expected):
    assert read_answer(question, docs) == expected


def test_the_reader_does_not_know_what_its_documents_do_not_say():
    """Without Iran's profile the capital of the country of Yazd is not in the documents."""
    assert read_answer("What is the capital of the country in which the city of Yazd lies?", [YAZD, TURKEY]) != "Tehran"
    assert read_answer("In what year did Abbas Kiarostami die?", [PAMUK]) != "2016"


@pytest.mark.parametrize("question, kind", [
    ("Which country borders both Spain and France?", "country"),
    ("In which country is the city of Graz?", "country"),
    ("When did Ada Lovelace die?", "year_died"),
    ("What is the official language of the country where the city of Yazd is?", "language"),
    ("Who was born earlier, A or B?", "earlier"),
])
def test_asked_for_reads_the_answer_type(question, kind):
    assert asked_for(question) == kind


_ANSWERS_OF_THE_AUDIT = """
import json, sys
from typer.testing import CliRunner
from agentgym.cli import app
out = CliRunner().invoke(app, ["dataset-report", "agentgym/Search-v2", "--json"]).output
print(json.dumps(json.loads(out)["shortcuts"]["templates"], sort_keys=True))
"""


def test_the_shortcut_audit_is_the_same_in_every_process():
    """The published audit must not depend on Python's string-hash seed (a set's iteration
    order): with border lists kept as sets, ties between neighbours and the fallback's order
    differed between processes, and a multi-hop template read 0.10 in one run, 0.25 in another."""
    import os
    import subprocess
    import sys

    runs = []
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run([sys.executable, "-c", _ANSWERS_OF_THE_AUDIT], env=env, capture_output=True,
                              text=True, timeout=300, check=True)
        runs.append(done.stdout)
    assert runs[0] and runs[0] == runs[1] == runs[2]
