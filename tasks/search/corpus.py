"""Documents in the Search-R1 / FlashRAG corpus shape, and the bundled default corpus.

A corpus line is ``{"id": "...", "contents": "\\"Title\\"\\ntext"}`` exactly as
Search-R1's retrieval server and FlashRAG read it, so a corpus written here can be
served by their tools and theirs can be loaded here. A corpus has a ``version``: a
content hash over ids and contents, which goes into the env fingerprint.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from tasks.search.jsonl import RowReader, jsonl_rows
from tasks.search.sources import City, Country, WikiArticle, ascii_fold

__all__ = [
    "Corpus",
    "CorpusFormatError",
    "Document",
    "city_doc_id",
    "city_document",
    "country_doc_id",
    "country_document",
    "wiki_doc_id",
    "wiki_document",
]


class CorpusFormatError(ValueError):
    """A corpus file is not in the ``{"id", "contents"}`` jsonl format."""


@dataclass(frozen=True)
class Document:
    id: str
    title: str
    text: str

    @property
    def contents(self) -> str:
        """The Search-R1 ``contents`` field: the quoted title, a newline, the text."""
        return f'"{self.title}"\n{self.text}'

    def to_json(self) -> dict[str, str]:
        return {"id": self.id, "contents": self.contents}

    @classmethod
    def from_contents(cls, doc_id: str, contents: str) -> Document:
        """Split Search-R1 ``contents`` back into title and text (quotes optional)."""
        first, _, rest = contents.partition("\n")
        title = first.strip()
        if len(title) >= 2 and title[0] == title[-1] == '"':
            title = title[1:-1]
        return cls(id=doc_id, title=title, text=rest.strip())


class Corpus(Sequence[Document]):
    """An ordered, immutable collection of documents with O(1) lookup by id."""

    def __init__(self, documents: Iterable[Document]):
        self._docs = tuple(documents)
        self._by_id = {doc.id: i for i, doc in enumerate(self._docs)}
        if len(self._by_id) != len(self._docs):
            raise CorpusFormatError("Expected unique document ids, actual corpus repeats some ids.")
        self._version: str | None = None

    def __len__(self) -> int:
        return len(self._docs)

    def __getitem__(self, index):  # type: ignore[override]
        return self._docs[index]

    def __iter__(self) -> Iterator[Document]:
        return iter(self._docs)

    def get(self, doc_id: str) -> Document | None:
        index = self._by_id.get(doc_id)
        return None if index is None else self._docs[index]

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._by_id

    def jsonl_lines(self) -> Iterator[str]:
        for doc in self._docs:
            yield json.dumps(doc.to_json(), ensure_ascii=False)

    @property
    def version(self) -> str:
        """Content hash (16 hex digits) over every line of the jsonl form."""
        if self._version is None:
            digest = hashlib.sha256()
            for line in self.jsonl_lines():
                digest.update(line.encode("utf-8"))
                digest.update(b"\n")
            self._version = digest.hexdigest()[:16]
        return self._version

    def write_jsonl(self, path: str | os.PathLike[str]) -> None:
        with open(path, "w", encoding="utf-8") as f:
            for line in self.jsonl_lines():
                f.write(line + "\n")

    @classmethod
    def read_jsonl(cls, path: str | os.PathLike[str]) -> Corpus:
        """Read a Search-R1/FlashRAG corpus (``id`` and ``contents`` per line).

        Lines with ``title`` and ``text`` instead of ``contents`` are accepted too. Every
        problem (not UTF-8, not JSON, a field of the wrong type, a repeated id, no
        documents at all) is a ``CorpusFormatError`` naming the file and line.
        """
        docs: list[Document] = []
        first_line: dict[str, int] = {}
        for lineno, row in jsonl_rows(path, CorpusFormatError, _EXPECTED_ROW):
            doc = _document_from_row(RowReader(row, path, lineno, CorpusFormatError))
            if doc.id in first_line:
                raise CorpusFormatError(f"{Path(path)}:{lineno}: document id {doc.id!r} is already used on line "
                                        f"{first_line[doc.id]}; give every document its own id")
            first_line[doc.id] = lineno
            docs.append(doc)
        if not docs:
            raise CorpusFormatError(f"{Path(path)}: no documents; expected one JSON object per line with "
                                    f'"id" and "contents" (Search-R1/FlashRAG corpus format)')
        return cls(docs)


_EXPECTED_ROW = 'a JSON object with "id" and "contents" (Search-R1/FlashRAG corpus format)'


def _document_from_row(row: RowReader) -> Document:
    doc_id = row.string("id")
    if "contents" in row.row:
        return Document.from_contents(doc_id, row.string("contents"))
    if "title" in row.row and "text" in row.row:
        return Document(id=doc_id, title=row.string("title"), text=row.string("text", blank_ok=True))
    raise row.fail(f'expected {_EXPECTED_ROW} (or "title" and "text"), actual keys: {sorted(row.row)[:10]}')


def wiki_doc_id(index: int) -> str:
    return f"wiki-{index:05d}"


def country_doc_id(country: Country) -> str:
    return f"country-{country.iso2}"


def city_doc_id(city: City) -> str:
    return f"city-{city.geonameid}"


def wiki_document(index: int, article: WikiArticle) -> Document:
    """The description leads the text: it carries nationality and life years."""
    lead = article.description.rstrip(".")
    text = f"{lead}. {article.extract}" if lead else article.extract
    return Document(id=wiki_doc_id(index), title=article.title, text=text)


def _join_names(names: Sequence[str]) -> str:
    if len(names) <= 1:
        return "".join(names)
    return f"{', '.join(names[:-1])} and {names[-1]}"


def country_document(country: Country, countries: dict[str, Country], borders: bool = True) -> Document:
    """A fact passage written from structured data, one sentence per fact (Search-v2's profiles
    leave the border list out: ``borders=False``)."""
    name = country.name
    sentences = []
    if country.subregion or country.region:
        where = ", ".join(dict.fromkeys(p for p in (country.subregion, country.region) if p))
        sentences.append(f"{name} is a country or territory in {where}.")
    sentences.append(f"The capital of {name} is {country.capital}.")
    if country.currency_name:
        sentences.append(
            f"The currency of {name} is the {country.currency_name} ({country.currency_code})."
        )
    if len(country.languages) == 1:
        sentences.append(f"The official language of {name} is {country.languages[0]}.")
    elif country.languages:
        sentences.append(f"The official languages of {name} are {_join_names(country.languages)}.")
    if country.population:
        sentences.append(f"{name} has a population of {country.population:,}.")
    if country.demonym:
        sentences.append(f"The demonym for people from {name} is {country.demonym}.")
    neighbours = [countries[n].name for n in country.neighbours if n in countries]
    if neighbours and borders:
        sentences.append(f"{name} borders {_join_names(neighbours)}.")
    folded = {ascii_fold(name)}
    others = []
    for alias in country.aliases:  # aliases carry accent-folded twins; show each name once
        if ascii_fold(alias) not in folded:
            folded.add(ascii_fold(alias))
            others.append(alias)
    if others:
        sentences.append(f"{name} is also known as {_join_names(others[:4])}.")
    return Document(id=country_doc_id(country), title=f"{name} (country profile)", text=" ".join(sentences))


def city_document(city: City, country: Country) -> Document:
    text = f"{city.name} is a city in {country.name}. It has a population of {city.population:,}."
    if city.timezone:
        text += f" Its time zone is {city.timezone}."
    return Document(id=city_doc_id(city), title=f"{city.name} (city profile)", text=text)
