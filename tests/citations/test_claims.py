"""The claim check: figure extraction, matching against passages, messages and the summary."""

from __future__ import annotations

import json
import time
from datetime import date
from decimal import Decimal

import pytest
from hypothesis import assume, example, given
from hypothesis import strategies as st

from citations.claims import ClaimCheck, Figure, check_claim, extract_figures, summarise

WIDE_38 = "\uff13\uff18\uff05"  # 38% in full-width characters


def figures(text: str) -> list[tuple[str, str, str]]:
    """Return (kind, normalised value, unit) of each figure, values as plain strings."""
    return [(f.kind, _plain(f.value), f.unit) for f in extract_figures(text)]


def _plain(value: Decimal | str) -> str:
    return value if isinstance(value, str) else format(value.normalize(), "f")


def only(text: str) -> tuple[str, str, str]:
    found = figures(text)
    assert len(found) == 1, (text, found)
    return found[0]


def status(claim: str, *passages: str) -> str:
    return check_claim(claim, passages).status


# --- one figure, every accepted spelling -----------------------------------------------------

SAME_FIGURE = {
    ("percent", "38", ""): [
        "38%", "38 percent", "38.0%", "38 per cent", "38 pct", "38 %", "38\u00a0%", WIDE_38,
        "38-percent", "38 Percent",
    ],
    ("currency", "4100000000", "USD"): [
        "$4.1 billion", "$4.1bn", "$4.1B", "$4.1 B", "US$4.1 billion", "USD 4.1bn", "USD4.1bn",
        "4.1 billion dollars", "$4,100 million", "$4100m", "$4,100mm", "4.1 billion USD",
        "$4.1 bln", "$ 4.1 billion", "$4,100,000,000", "4.1bn USD",
    ],
    ("number", "4100000000", ""): ["4,100 million", "4.1 billion", "4.1bn", "4.1B", "4,100mn"],
    ("currency", "3200000000", "EUR"): ["€3.2bn", "EUR 3.2 billion", "3.2 billion euros"],
    ("currency", "5000000", "GBP"): ["£5m", "£5 million", "GBP 5mn", "5 million pounds"],
    ("currency", "300000000000", "JPY"): ["JP¥300 billion", "JPY 300bn", "300 billion yen"],
    ("currency", "300000000000", "¥"): ["¥300 billion", "¥300bn", "¥300,000 million"],
    ("currency", "5000000000", "INR"): ["Rs 500 crore", "₹500 crore", "INR 5 billion"],
    ("currency", "2000000000000", "USD"): ["$2 trillion", "$2tn", "$2T", "$2,000 billion"],
    ("currency", "250000", "USD"): ["$250k", "$250 thousand", "$250,000", "$0.25 million"],
    ("currency", "0.73", "USD"): ["$0.73", "$.73", "US$0.73"],
    ("currency", "0.73", ""): ["73 cents", "73¢"],
    ("quarter", "3", ""): [
        "Q3", "third quarter", "3Q", "3rd quarter", "third-quarter", "Third Quarter",
        "third fiscal quarter",
    ],
    ("quarter", "3", "2026"): [
        "Q3 FY26", "Q3 2026", "third quarter of fiscal 2026", "3Q26", "FY26 Q3", "2026 Q3",
        "Q3'26", "third quarter of 2026", "Q3FY26", "3QFY26", "3Q 2026", "fourth-quarter 2026"
        .replace("fourth", "third"), "Q3 of fiscal year 2026", "FY2026 Q3", "Q3 FY 2026",
    ],
    ("multiple", "2.5", ""): ["2.5x", "2.5\u00d7", "2.5 times", "2.5-fold", "2.5 \u00d7"],
    ("ratio", "3", ""): ["3:1", "3-to-1", "ratio of 3 to 1", "3 to 1 ratio", "6:2", "3-for-1"],
    ("bps", "50", ""): [
        "50 bps", "50bp", "50 basis points", "50-basis-point", "0.5 percentage points",
        "0.5pp", "0.5 ppt", "0.5% points",
    ],
    ("date", "2024-10-03", ""): [
        "2024-10-03", "October 3, 2024", "Oct. 3, 2024", "Oct 3 2024", "3 October 2024",
        "3rd October 2024", "October 3rd, 2024", "10/03/2024", "10/3/24", "03.10.2024",
        "2024/10/03", "3 Oct. 2024", "3rd of October 2024",
    ],
    ("date", "2024-10", ""): ["October 2024", "Oct 2024", "October of 2024", "2024-10", "10/2024"],
    ("ratio", "0.5", ""): ["1:2", "1/2", "2/4", "1-to-2"],
    ("date", "--10-03", ""): ["October 3", "3 October", "Oct. 3rd"],
    ("year", "2024", ""): ["in 2024", "FY2024", "FY24", "fiscal 2024", "fiscal year 2024",
                           "FY 2024", "FY'24", "mid-2024", "FY2023-24"],
    ("number", "2", "nm"): ["2nm", "2 nm", "2-nanometer", "2 nanometre", "2-nm"],
    ("number", "5", "GW"): ["5 GW", "5GW", "5 gigawatts"],
    ("number", "12000", ""): ["12,000", "12000", "12k", "twelve thousand"],
}  # fmt: skip


@pytest.mark.parametrize(
    ("expected", "text"),
    [(expected, text) for expected, texts in SAME_FIGURE.items() for text in texts],
)
def test_each_spelling_gives_one_figure_with_the_normalised_value(expected, text):
    assert only(text) == expected


def test_a_figure_keeps_its_text_and_offsets_in_the_original_string():
    claim = f"Revenue of {WIDE_38} (up from $4.1bn) in Q3\u00a02024."
    found = extract_figures(claim)
    assert [f.text for f in found] == [WIDE_38, "$4.1bn", "Q3\u00a02024"]
    assert all(claim[f.start : f.end] == f.text for f in found)
    assert found[0] == Figure(kind="percent", value=Decimal("38"), text=WIDE_38)


def test_a_range_gives_both_ends_with_the_unit_written_once():
    assert figures("3-5%") == [("percent", "3", ""), ("percent", "5", "")]
    assert figures("10 to 12 percent") == [("percent", "10", ""), ("percent", "12", "")]
    assert figures("$3-4 billion") == [
        ("currency", "3000000000", "USD"),
        ("currency", "4000000000", "USD"),
    ]
    assert figures("2023-24") == [("year", "2023", ""), ("year", "2024", "")]
    assert figures("2023-2024") == [("year", "2023", ""), ("year", "2024", "")]


def test_the_precision_is_the_unit_of_the_last_digit_written():
    def precision(text: str) -> Decimal:
        return extract_figures(text)[0].precision

    assert precision("38%") == 1
    assert precision("38.0%") == Decimal("0.1")
    assert precision("$4.1bn") == Decimal("1e8")
    assert precision("4,100 million") == Decimal("1e6")
    assert precision("0.5 percentage points") == 10  # in basis points
    assert precision("73 cents") == Decimal("0.01")


def test_spelled_out_numbers_are_figures_but_one_only_with_a_unit():
    assert figures("three segments and one of the largest") == [("number", "3", "")]
    assert figures("Twelve stores and twenty-five staff; two-thirds of sales") == [
        ("number", "12", ""),
        ("number", "25", ""),
    ]
    assert figures("five percent, three times, two million, one billion") == [
        ("percent", "5", ""),
        ("multiple", "3", ""),
        ("number", "2000000", ""),
        ("number", "1000000000", ""),
    ]
    assert status("3 segments", "The company has three segments.") == "supported"
    assert status("three segments", "The company has 3 segments.") == "supported"
    assert status("three segments", "The company has 4 segments.") == "figure not found"
    assert status("twenty-five percent", "It grew 25%.") == "supported"


# --- traps: digits that are not figures ------------------------------------------------------

NOT_FIGURES = [
    "Revenue rose[^1] strongly[^src-2].",
    "as reported [1] and [12, 13]",
    "as reported【3†source】",
    "revenue¹ and margin²",
    "1. Revenue\n2) Margin\n  3. Cash\n- 4. Debt\n## 5. Outlook",
    "GPT-4 and GPT-4o",
    "the H100, B200 and GB200",
    "the A17 Pro chip",
    "COVID-19 and mRNA-1273",
    "5G phones and 3D printing",
    "its 10-K and 8-K filings",
    "since the 1990s",
    "ranked 3rd and 21st",
    "the S&P 500, the Russell 2000 and the FTSE 100",
    "under Section 230 and Chapter 11",
    "upgraded to v2.1, version 3.2 and 1.2.3",
    "call +1 415 555 0100 or (415) 555-0100 or 415-555-0100 or 1-800-555-0199",
    "support 24/7",
    "at 10:30 am and 09:15:00",
    "see https://example.com/2024/10/38-percent and www.example.com/4.1bn",
    "write to ir2024@example.com",
    "for the third time, one of them",
    "items (1) and (2)",
    "the No. 1 maker and #2 seller",
    "H1 and 1H24",
]


@pytest.mark.parametrize("text", NOT_FIGURES)
def test_digits_that_are_not_figures_are_not_extracted(text):
    assert figures(text) == []


def test_a_full_date_is_one_figure_not_a_year_and_numbers():
    assert figures("On October 3, 2024 the company reported.") == [("date", "2024-10-03", "")]
    assert figures("Filed 2024-10-03.") == [("date", "2024-10-03", "")]
    assert figures("Q3 2024 and FY2026") == [("quarter", "3", "2024"), ("year", "2026", "")]


def test_list_numbering_is_skipped_but_a_figure_at_a_line_start_is_kept():
    assert figures("1. Margin was 38%.\n1.5% of revenue") == [
        ("percent", "38", ""),
        ("percent", "1.5", ""),
    ]


def test_a_bare_number_after_a_label_is_part_of_it_but_after_any_other_word_a_figure():
    assert figures("Its tier 1 ratio; a phase 3 trial; Table 2 shows; Sec. 230") == []
    assert figures("Maintains 4300 miles of gas mains") == [("number", "4300", "")]
    assert figures("Population 8,400,000 (2020)") == [
        ("number", "8400000", ""),
        ("year", "2020", ""),
    ]
    assert figures("Sales of the iPhone 15 rose. Microsoft 365 seats grew.") == [
        ("number", "15", ""),
        ("number", "365", ""),
    ]
    assert figures("Over 500 stores. In 2024 it sold 12 and Top 10 holders own.") == [
        ("number", "500", ""),
        ("year", "2024", ""),
        ("number", "12", ""),
        ("number", "10", ""),
    ]
    assert figures("Nvidia\u2019s 2024 revenue and Apple's 15 stores") == [
        ("year", "2024", ""),
        ("number", "15", ""),
    ]
    assert figures("Nvidia shipped 3 million GPUs and Microsoft 365 had 40%.") == [
        ("number", "3000000", ""),
        ("number", "365", ""),
        ("percent", "40", ""),
    ]


def test_a_number_after_a_capitalised_first_word_is_checked_not_taken_as_a_name():
    """ "Maintains 4300 miles" once counted as checked with no figure read: a wrong number in
    that place must be flagged, and the right one found."""
    page = "The utility maintains 4,300 miles of gas mains across the state."
    assert status("Maintains 4300 miles of gas mains.", page) == "supported"
    assert status("Maintains 5300 miles of gas mains.", page) == "figure not found"
    assert status("Maintains many miles of gas mains.", page) == "no figure to check"


@pytest.mark.parametrize(
    "written", ["10,000", "10000", "10k", "10K", "10 thousand", "ten thousand"]
)
def test_a_figure_matches_however_the_page_writes_its_value(written):
    for claim in ("It has 10,000 users.", "It has 10000 users.", "It has 10k users."):
        assert status(claim, f"The service now counts {written} users.") == "supported"


def test_a_year_is_never_a_number_that_it_contains():
    assert status("The city has 17 parks.", "The city had parks in 2017.") == "figure not found"
    assert status("In 2017 the city had parks.", "The city has 17 parks.") == "figure not found"


def test_a_month_before_an_amount_is_not_a_date():
    assert figures("In March 2 million units shipped.") == [("number", "2000000", "")]
    assert figures("In May 5% more") == [("percent", "5", "")]


def test_footnote_markers_next_to_a_figure_leave_the_figure_alone():
    assert figures("margin of 38%[^1][^2]") == [("percent", "38", "")]
    assert figures("margin of 38%¹") == [("percent", "38", "")]


@pytest.mark.parametrize("piece", ["A", "aA", "x.y", "a-", "-1", "1,", "$", "+1 ", "Oct ", "[^"])
def test_long_runs_take_linear_time(piece):
    # "A" * 20_000 must stay linear: backtracking over each word per start would take ~25 s.
    text = (piece * 20_000)[:20_000]
    started = time.process_time()
    extract_figures(text)
    assert time.process_time() - started < 2.0


# --- matching ----------------------------------------------------------------------------------


@pytest.mark.parametrize("passage", ["38%", "38.2%", "37.6%", "37.5%", "38.5%", "38 percent"])
def test_a_percent_matches_what_rounds_to_it(passage):
    assert status("Margin was 38%.", f"Gross margin was {passage}.") == "supported"


@pytest.mark.parametrize("passage", ["36%", "38.6%", "37.4%", "3.8%", "380%", "38 bps"])
def test_a_percent_does_not_match_what_rounds_elsewhere(passage):
    assert status("Margin was 38%.", f"Gross margin was {passage}.") == "figure not found"


def test_a_claim_more_precise_than_its_source_is_not_supported():
    assert status("Margin was 38.2%.", "Gross margin was 38%.") == "figure not found"
    assert status("Margin was 38.0%.", "Gross margin was 38.04%.") == "supported"


@pytest.mark.parametrize(
    ("claim", "passage", "expected"),
    [
        ("$4.1bn", "revenue of $4.08 billion", "supported"),
        ("$4.1bn", "revenue of 4,100 million dollars", "supported"),
        ("$4.1bn", "revenue of 4.1 billion", "supported"),  # the currency stated elsewhere
        ("4,100 million", "revenue of $4.1 billion", "supported"),
        ("$4.1bn", "revenue of $4.2 billion", "figure not found"),
        ("$4.1bn", "revenue of €4.1 billion", "figure not found"),
        ("¥300bn", "revenue of CN¥300 billion", "supported"),
        ("¥300bn", "revenue of JPY 300 billion", "supported"),
        ("JPY 300bn", "revenue of CNY 300 billion", "figure not found"),
        ("$4.1bn", "revenue of $4.1 million", "figure not found"),
        ("$4bn", "revenue of $4.4 billion", "supported"),
        ("$400 million", "revenue of $398 million", "figure not found"),
        ("73 cents a share", "EPS of $0.73", "supported"),
        ("$0.73 a share", "EPS of 73 cents", "supported"),
        ("3nm chips", "on its 3-nanometer process", "supported"),
        ("3nm chips", "on its 3 process", "figure not found"),
        ("3nm chips", "5 GW and 3 GW", "figure not found"),
        ("3 plants", "three plants of 3nm", "supported"),
        ("2.5x", "2.5 times", "supported"),
        ("2.5x", "2.6x", "figure not found"),
        ("2.5x", "2.5%", "figure not found"),
        ("3:1", "a ratio of 3 to 1", "supported"),
        ("3:1", "6:2", "supported"),
        ("3:1", "3:2", "figure not found"),
        ("50 bps", "up 0.5 percentage points", "supported"),
        ("0.5%", "up 50 bps", "figure not found"),
        ("fell 5%", "a change of -5%", "supported"),
        ("fell 5%", "a change of \u22125%", "supported"),
    ],
)
def test_amounts_match_across_spellings_and_units(claim, passage, expected):
    assert status(claim, passage) == expected


@pytest.mark.parametrize(
    ("claim", "passage", "expected"),
    [
        ("Q3", "third quarter results", "supported"),
        ("Q3", "in 3 plants", "figure not found"),
        ("3 plants", "Q3 output", "figure not found"),
        ("Q3 2024", "Q3 2023", "figure not found"),
        ("Q3 2024", "third-quarter 2024", "supported"),
        ("Q3 FY27", "the third quarter of fiscal 2027", "supported"),
        ("Q3 2024", "In 2024, third-quarter sales rose.", "supported"),
        ("Q3 2024", "Third-quarter sales rose.", "figure not found"),
        ("Q3", "Q4", "figure not found"),
        ("in 2024", "on October 3, 2024", "supported"),
        ("in 2024", "in Q3 2024", "supported"),
        ("in 2024", "FY2024", "supported"),
        ("in 2024", "in 2023", "figure not found"),
        ("October 2024", "on October 3, 2024", "supported"),
        ("October 3, 2024", "in October 2024", "figure not found"),
        ("October 3", "filed 2024-10-03", "supported"),
        ("October 3, 2024", "On October 3 the company, in its 2024 report", "supported"),
        ("October 3, 2024", "filed 2024-10-04", "figure not found"),
        ("October 3, 2024", "3 employees in 2024", "figure not found"),
    ],
)
def test_quarters_years_and_dates_match_by_their_parts(claim, passage, expected):
    assert status(claim, passage) == expected


def test_a_passage_may_say_a_multiple_in_words():
    assert status("Revenue rose 2x.", "Revenue doubled.") == "supported"
    assert status("Revenue rose 2.0x.", "Revenue more than doubled.") == "supported"
    assert status("Revenue rose 3x.", "Revenue tripled.") == "supported"
    assert status("Revenue rose 3x.", "Revenue doubled.") == "figure not found"
    assert figures("Revenue doubled, twice.") == []  # in a claim, words are not figures


def test_a_figure_may_be_in_any_of_the_passages():
    check = check_claim("Revenue $4.1bn, margin 38%.", ["Revenue was $4.1 billion.", "38% margin"])
    assert check.status == "supported"
    assert [f.text for f in check.found] == ["$4.1bn", "38%"]
    assert check.message == "$4.1bn and 38% found in its sources"


def test_a_date_may_be_the_publication_date_of_a_source():
    claim = "On October 3, 2024, revenue rose 38% in 2024."
    assert status(claim, "Revenue rose 38%.") == "figure not found"
    check = check_claim(claim, ["Revenue rose 38%."], published=["2024-10-03T14:05:00Z", ""])
    assert check.status == "supported"
    other_day = check_claim(claim, ["Revenue rose 38%."], published=["2024-10-04T00:00:00Z"])
    assert other_day.message == "October 3, 2024 not found in its source"
    # A publication date is no passage: without one the claim cannot be checked.
    assert check_claim(claim, [], published=["2024-10-03"]).status == "not read"


# --- verdicts and messages -------------------------------------------------------------------


def test_a_missing_figure_is_named():
    check = check_claim("Margin was 38%.", ["Gross margin was 36%."])
    assert check.status == "figure not found"
    assert check.is_flagged
    assert check.message == "38% not found in its source"
    assert [(f.kind, f.value) for f in check.missing] == [("percent", Decimal(38))]
    assert check.found == ()


def test_several_missing_figures_are_listed_once_each():
    check = check_claim(
        "Margin was 38% on $4.1 billion of revenue, and 38% again in Q2.",
        ["Revenue was $3 billion.", "Margin was 36% in the second quarter."],
    )
    assert check.message == "38% and $4.1 billion not found in its sources"
    assert [f.text for f in check.found] == ["Q2"]
    three = check_claim("12%, 38% and $4.1bn", ["nothing"], sources=1)
    assert three.message == "12%, 38% and $4.1bn not found in its source"


def test_a_claim_whose_source_was_not_read_is_never_flagged_and_says_why():
    for passages in ([], [""], ["  \n"]):
        check = check_claim("Margin was 38%.", passages)
        assert check.status == "not read"
        assert not check.is_flagged
        assert check.line == "not read: its source sent no passage"
        assert check.missing == ()
    unread = check_claim("Margin was 38%.", [], unread="HTTP 404")
    assert (unread.status, unread.line) == ("not read", "not read: HTTP 404")


def test_a_source_read_without_a_passage_supports_none_of_the_claims_figures():
    """The page was read and no sentence of it speaks of the claim: its figure is not there."""
    check = check_claim("Gross margin widened to 38%.", [], read=True)
    assert check.status == "figure not found"
    assert check.is_flagged
    assert check.line == "38% not found in its source"
    assert check_claim("Margins widened.", [], read=True).status == "no figure to check"


def test_a_claim_without_figures_has_no_figure_to_check_and_is_never_counted_as_checked():
    check = check_claim("Demand for GPT-4 class models[^1] stayed strong.", ["Demand grew 40%."])
    assert check.status == "no figure to check"
    assert check.line == "no figure to check"
    assert not check.is_flagged
    assert summarise([check]) == "1 cited claim: 1 with no figure to check"


# --- the one-line summary ----------------------------------------------------------------------

OK = ClaimCheck(status="supported")
NO_FIGURES = ClaimCheck(status="no figure to check")
NOT_READ = ClaimCheck(status="not read", message="HTTP 404")


def flagged(count: int) -> ClaimCheck:
    missing = tuple(Figure(kind="percent", value=Decimal(n), text=f"{n}%") for n in range(count))
    return ClaimCheck(status="figure not found", missing=missing)


@pytest.mark.parametrize(
    ("checks", "summary"),
    [
        ([], ""),
        ([OK], "1 cited claim: 1 figure found"),
        ([OK] * 6 + [NO_FIGURES] * 3, "9 cited claims: 6 figures found, 3 with no figure to check"),
        ([OK] * 8 + [flagged(1)], "9 cited claims: 8 figures found, 1 not found"),
        ([OK, flagged(2)], "2 cited claims: 1 figure found, 1 not found"),
        ([flagged(1), flagged(1)], "2 cited claims: 2 not found"),
        ([OK, NOT_READ, NOT_READ], "3 cited claims: 1 figure found, 2 not read"),
        ([NOT_READ], "1 cited claim: 1 not read"),
        (
            [OK, OK, flagged(1), NO_FIGURES],
            "4 cited claims: 2 figures found, 1 not found, 1 with no figure to check",
        ),
        (
            [NOT_READ, NO_FIGURES, flagged(1), OK],
            "4 cited claims: 1 figure found, 1 not found, 1 with no figure to check, 1 not read",
        ),
    ],
)
def test_the_summary_counts_each_outcome(checks, summary):
    assert summarise(checks) == summary


def test_the_summary_of_real_checks():
    passage = "Revenue was $4.1 billion and gross margin 73.6%."
    checks = [
        check_claim("Revenue reached $4.1bn.", [passage]),
        check_claim("Margin was 74%.", [passage]),
        check_claim("Margin was 80%.", [passage]),
        check_claim("Demand was strong.", [passage]),
        check_claim("Margin was 74%.", []),
    ]
    assert summarise(checks) == (
        "5 cited claims: 2 figures found, 1 not found, 1 with no figure to check, 1 not read"
    )


# --- JSON ----------------------------------------------------------------------------------------


def test_a_check_is_json_and_comes_back_equal():
    check = check_claim(
        "On October 3, 2024 revenue was $4.1bn, up 38% in Q3 2024.",
        ["Revenue of $4.1 billion was reported on 2024-10-03 for Q3 2024, up 36%."],
    )
    data = json.loads(json.dumps(check.to_dict()))
    assert data["status"] == "figure not found"
    assert data["missing"][0] == {
        "kind": "percent",
        "value": "38",
        "text": "38%",
        "unit": "",
        "precision": "1",
        "start": 42,
        "end": 45,
    }
    assert [f["value"] for f in data["found"]] == ["2024-10-03", "4100000000", "3"]
    back = ClaimCheck.from_dict(data)
    assert back == check
    assert [f.precision for f in back.found] == [f.precision for f in check.found]
    assert isinstance(back.found[1].value, Decimal)


# --- properties over number formats ----------------------------------------------------------

SCALES = {
    "": 1,
    " thousand": 10**3,
    "k": 10**3,
    " million": 10**6,
    "m": 10**6,
    "mn": 10**6,
    " mn": 10**6,
    " billion": 10**9,
    "bn": 10**9,
    "B": 10**9,
    " trillion": 10**12,
    "tn": 10**12,
    " lakh": 10**5,
    " crore": 10**7,
}
SYMBOLS = {"$": "USD", "US$": "USD", "USD ": "USD", "€": "EUR", "EUR ": "EUR", "£": "GBP"}
SYMBOLS |= {"¥": "¥", "JPY ": "JPY", "C$": "CAD", "CHF ": "CHF", "Rs ": "INR"}
amounts = st.decimals(min_value=0, max_value=10**9, places=2, allow_nan=False).map(
    lambda d: d.normalize() if d == d.to_integral() else d
)


def written(value: Decimal, *, commas: bool) -> str:
    return format(value, ",f" if commas else "f")


@given(amounts, st.booleans(), st.sampled_from(sorted(SYMBOLS)), st.sampled_from(sorted(SCALES)))
@example(Decimal("4100"), True, "$", " million")
def test_a_written_currency_amount_reads_back_as_its_value(value, commas, symbol, scale):
    text = f"revenue of {symbol}{written(value, commas=commas)}{scale} in the year"
    assert figures(text) == [("currency", _plain(value * SCALES[scale]), SYMBOLS[symbol])]


@given(amounts, st.booleans(), st.sampled_from(["%", " percent", " per cent", "x", " times"]))
def test_a_written_percent_or_multiple_reads_back_as_its_value(value, commas, suffix):
    kind = "percent" if "per" in suffix or suffix == "%" else "multiple"
    text = f"a rise of {written(value, commas=commas)}{suffix}."
    assert figures(text) == [(kind, _plain(value), "")]


# Ways to write one amount in billions that must all mean the same figure.
def spellings(billions: Decimal) -> list[str]:
    millions = billions * 1000
    return [
        f"${billions} billion",
        f"${billions}bn",
        f"${billions}B",
        f"US${billions} billion",
        f"{billions} billion dollars",
        f"${written(millions, commas=True)} million",
        f"${written(millions, commas=False)}m",
        f"USD {written(billions * 10**9, commas=True)}",
    ]


billions = st.decimals(min_value=Decimal("0.01"), max_value=999, places=2, allow_nan=False)


@given(billions, st.data())
def test_an_amount_matches_itself_in_another_spelling(value, data):
    claim, passage = data.draw(st.permutations(spellings(value)))[:2]
    assert status(f"Revenue was {claim}.", f"Sales were {passage} last year.") == "supported"


@given(
    st.decimals(min_value=0, max_value=1000, places=1, allow_nan=False),
    st.sampled_from(["%", " percent"]),
    st.data(),
)
def test_a_percent_matches_within_half_a_unit_of_its_last_digit_and_never_beyond(
    value, suffix, data
):
    places = -value.as_tuple().exponent
    half = Decimal(1).scaleb(-places) / 2
    inside = data.draw(st.decimals(min_value=-half, max_value=half, places=places + 2))
    outside = data.draw(
        st.decimals(min_value=half + Decimal("0.001"), max_value=half + 5, places=places + 3)
    )
    claim = f"grew {value}{suffix}"
    assert status(claim, f"rose {value + inside}%") == "supported"
    if value - outside >= 0:  # signs are not compared
        assert status(claim, f"rose {value - outside}%") == "figure not found"
    assert status(claim, f"rose {value + outside}%") == "figure not found"


@given(billions, st.integers(min_value=1, max_value=500))
def test_a_different_amount_beyond_the_claims_rounding_never_matches(value, cents):
    # The claim writes hundredths of a billion: $10 million either way is the most it allows.
    other = value + Decimal(cents) / 100
    assert status(f"${value}bn", f"${other} billion") == "figure not found"


@given(
    st.lists(
        st.one_of(
            st.characters(exclude_categories=("Cs",)),
            st.sampled_from([*"0123456789%$€.,:-/ Q", "bn", " million", "Oct ", "\n1. ", "\uff13"]),
        ),
        max_size=40,
    ).map("".join)
)
def test_any_text_gives_figures_that_are_slices_of_it_and_serialise(text):
    for figure in extract_figures(text):
        assert text[figure.start : figure.end] == figure.text
        assert Figure.from_dict(json.loads(json.dumps(figure.to_dict()))) == figure
    check = check_claim(text, [text])
    assert check.status in ("supported", "no figure to check", "not read")


MONTH_NAMES = (
    "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December",
)  # fmt: skip
dates = st.dates(min_value=date(1900, 1, 1), max_value=date(2099, 12, 31))


def date_spellings(day: date) -> list[str]:
    month = MONTH_NAMES[day.month - 1]
    return [
        day.isoformat(),
        f"{month} {day.day}, {day.year}",
        f"{month[:3]}. {day.day}, {day.year}",
        f"{day.day} {month} {day.year}",
        f"{day.year}/{day.month:02d}/{day.day:02d}",
        f"{day.month}/{day.day}/{day.year}",
    ]


@given(dates, st.data())
def test_a_date_matches_itself_in_another_spelling(day, data):
    claim, passage = data.draw(st.permutations(date_spellings(day)))[:2]
    assert figures(claim) == [("date", day.isoformat(), "")]
    assert status(f"Filed on {claim}.", f"The filing of {passage} said so.") == "supported"
    assert status(f"in {day.year}", f"The filing of {passage} said so.") == "supported"


@given(dates, dates, st.data())
def test_a_different_date_never_matches(day, other, data):
    assume(day != other)
    claim = data.draw(st.sampled_from(date_spellings(day)))
    passage = data.draw(st.sampled_from(date_spellings(other)))
    assert status(f"Filed on {claim}.", f"Filed on {passage}.") == "figure not found"


def quarter_spellings(quarter: int, year: int) -> list[str]:
    ordinal = ("first", "second", "third", "fourth")[quarter - 1]
    return [
        f"Q{quarter} {year}",
        f"Q{quarter} FY{year % 100:02d}",
        f"{quarter}Q{year % 100:02d}",
        f"{ordinal} quarter of {year}",
        f"{ordinal}-quarter fiscal {year}",
        f"FY{year} Q{quarter}",
    ]


@given(st.integers(1, 4), st.integers(2000, 2099), st.integers(1, 4), st.data())
def test_a_quarter_matches_itself_in_another_spelling_and_no_other_quarter(
    quarter, year, other, data
):
    claim, passage = data.draw(st.permutations(quarter_spellings(quarter, year)))[:2]
    assert figures(claim) == [("quarter", str(quarter), str(year))]
    assert status(f"Sales rose in {claim}.", f"In {passage}, sales rose.") == "supported"
    if other != quarter:
        elsewhere = data.draw(st.sampled_from(quarter_spellings(other, year)))
        assert status(f"Sales rose in {claim}.", f"In {elsewhere}, sales rose.") == (
            "figure not found"
        )
