"""The bundled corpus and the search tool over it."""

from __future__ import annotations

from collections import Counter
from datetime import datetime

from demo_agent.corpus import load_corpus
from demo_agent.search import SearchIndex, tokenize

CORPUS = load_corpus()
INDEX = SearchIndex(CORPUS.documents)


def test_corpus_is_marked_as_fictional():
    assert "FICTIONAL DEMO DATA" in CORPUS.notice


def test_corpus_has_enough_documents_of_both_types_and_outlets():
    documents = CORPUS.documents
    assert len(documents) >= 40
    types = Counter(d.source["type"] for d in documents)
    assert types["BIGDATA"] >= 10 and types["EXTERNAL"] >= 10
    assert len({d.outlet for d in documents}) >= 4
    assert len({d.key for d in documents}) == len(documents)


def test_sources_have_the_protocol_shapes_with_realistic_gaps():
    bigdata = [d.source for d in CORPUS.documents if d.source["type"] == "BIGDATA"]
    external = [d.source for d in CORPUS.documents if d.source["type"] == "EXTERNAL"]
    assert all({"id", "hd", "src_name", "ts"} <= s.keys() for s in bigdata)
    assert 0 < sum("url" not in s for s in bigdata) < len(bigdata) / 2
    assert all({"hd", "ts"} <= s.keys() and {"name", "url"} <= s["action"].keys() for s in external)
    assert 0 < sum("id" not in s for s in external) < len(external) / 2
    for source in bigdata + external:
        datetime.fromisoformat(source["ts"])


def test_every_document_has_two_to_five_sentences_that_rebuild_its_text():
    for document in CORPUS.documents:
        assert 2 <= len(document.sentences) <= 5, document.key
        assert " ".join(document.sentences) == document.text, document.key
        assert all(s[-1] in ".!?" for s in document.sentences), document.key


def test_companies_have_documents_and_calendar_entries():
    per_company = Counter(d.company for d in CORPUS.documents)
    assert len(CORPUS.companies) >= 8
    for company in CORPUS.companies:
        assert per_company[company.key] >= 3, company.key
        assert CORPUS.calendar_entry(company.key) is not None, company.key
    assert per_company[None] >= 4  # market and sector documents
    assert set(per_company) - {None} == {c.key for c in CORPUS.companies}


def test_search_ranks_and_boosts_the_asked_about_company():
    hits = INDEX.search(tokenize("NVIDIA gross margin"))
    assert hits[0].document.company == "nvidia"
    boosted = INDEX.search(tokenize("margin"), companies={"tesla"})
    assert boosted[0].document.company == "tesla"
    assert [h.score for h in boosted] == sorted((h.score for h in boosted), reverse=True)


def test_search_drops_documents_that_match_only_a_common_word():
    assert INDEX.search(tokenize("walmart revenue")) == []
    assert INDEX.search(tokenize("weather Paris")) == []
    assert INDEX.search(tokenize("inflation"))[0].document.topic == "inflation"
