"""Claim check: are the figures of a cited claim in the passages of its sources?

Deterministic and offline (standard library only, no model call). `extract_figures` reads the
figures of a text (numbers, percentages, currency amounts, dates, years, quarters, ratios,
multiples, basis points), each with a kind and a normalised value; `check_claim` looks for every
figure of one cited claim among the figures of its passages; `summarise` writes the answer's
one-line summary.

Normalisation: "$4.1 billion", "$4.1bn", "4.1B" and "4,100 million" are all 4100000000;
"38%", "38 percent", "38 per cent" and "38.0%" are 38; "Q3", "third quarter" and "3Q" are
quarter 3; "3:1", "3-to-1" and "6/2" are ratio 3; "October 3, 2024", "3 Oct 2024" and
"2024-10-03" are one date figure (the year inside it is not a figure of its own, nor is the
year of "Q3 2024" or "FY2026").

Matching rule: a claim's figure is found when a passage has a figure of a compatible kind whose
value, rounded the way the claim wrote its figure, is the claim's value: the difference is at
most half a unit of the claim's last written digit. So "38%" matches 38.2% and 37.6% (also
37.5% and 38.5%) but not 36%; "$4.1bn" matches $4.08bn; "38.2%" does not match 38% (the claim
says more than its source). Signs are ignored ("fell 5%" is the source's "-5%").
Compatible kinds: a currency amount and a plain number are one family ("$4.1 billion" matches
a passage's "4.1 billion", which often states the currency once), but two different currencies
never match ("¥" agrees with yen and yuan); a number with a unit ("3nm", "5 GW") needs the same
unit in the passage; a year matches a year, a date in that year, a quarter of that year or the
same plain number; a date matches a date that agrees on every part the claim states; a quarter
matches the same quarter of the same year (a passage's quarter without a year counts when the
passage names that year elsewhere). Fiscal and calendar years are not told apart. "percentage
points" are basis points x 100. A source's publication date, when the caller gives it, can
support a claim's date or year.

States (`CheckStatus`, the names the exports carry): every cited claim ends in exactly one.
"supported": every figure it states is in the passages; "figure not found" (the only flag,
naming the figures: "38% not found in its source"), also when its source was read and no
sentence of it speaks of the claim at all; "no figure to check": it states no figure this module
can read, so nothing was checked; "not read": no source of it was read ("not read: HTTP 404").

Not figures (false-positive traps): footnote markers ("[^1]", "[1]", superscripts), list
numbering at a line start ("1. ", "2) "), identifiers with letters ("GPT-4", "H100", "A17",
"COVID-19", "5G", "10-K", "1990s"), a bare number after a label word or label abbreviation
("tier 1", "phase 3", "Section 230", "No. 1") or in an index's name ("S&P 500"), version numbers
("v2.1", "1.2.3"), phone numbers, clock times ("10:30 am"), "24/7", URLs, ordinals ("3rd"), and
"one" or "zero" without a unit ("one of the largest"). A number after any other capitalised word
is a figure ("Maintains 4300 miles", "Population 8,400,000", "iPhone 15"): a name's number is a
figure its source states too. Spelled-out numbers are figures ("three segments", "twenty-five
stores"), but not the numerator of a fraction ("two-thirds"); a passage's "one", and its
multiples ("doubled"), count as well, so "3 segments" is found in "three segments" and "2x" in
"doubled".

Standard library only: price-parser reads one price per string and knows no scale words or
percentages, and quantulum3 returns floats, guesses units with a classifier and sees "Q3" or
"GPT-4" as quantities; the traps above would have to be undone around either.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from functools import lru_cache
from typing import Any, Literal

FigureKind = Literal[
    "number", "percent", "bps", "multiple", "ratio", "currency", "quarter", "year", "date"
]
CheckStatus = Literal["supported", "figure not found", "no figure to check", "not read"]
CHECK_STATES: tuple[CheckStatus, ...] = (
    "supported",
    "figure not found",
    "no figure to check",
    "not read",
)

_ZERO = Decimal(0)
_ONE = Decimal(1)


@dataclass(frozen=True, slots=True)
class Figure:
    """One figure as written (`text`) with its normalised `value`.

    `value` is a Decimal, except for dates: an ISO string that may lack parts ("2024-10-03",
    "2024-10", "--10-03"). `unit` is a currency code, a physical unit or a quarter's year.
    `precision` is the unit of the last digit written, in `value`'s units ("4.1bn": 100000000).
    `start` and `end` locate `text` in the string it was read from. Equality ignores these three.
    """

    kind: FigureKind
    value: Decimal | str
    text: str
    unit: str = ""
    precision: Decimal = field(default=_ZERO, compare=False)
    start: int = field(default=0, compare=False)
    end: int = field(default=0, compare=False)

    @property
    def label(self) -> str:
        """Return the figure as written, on one line, for messages."""
        return " ".join(self.text.split())

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "value": self.value if isinstance(self.value, str) else _decimal_text(self.value),
            "text": self.text,
            "unit": self.unit,
            "precision": _decimal_text(self.precision),
            "start": self.start,
            "end": self.end,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Figure:
        kind = data["kind"]
        return cls(
            kind=kind,
            value=data["value"] if kind == "date" else Decimal(data["value"]),
            text=data["text"],
            unit=data.get("unit", ""),
            precision=Decimal(data.get("precision", "0")),
            start=data.get("start", 0),
            end=data.get("end", 0),
        )


@dataclass(frozen=True, slots=True)
class ClaimCheck:
    """The verdict on one cited claim; only "figure not found" is a flag.

    `message` names the figures found or not found ("38% not found in its source"), or, for a
    claim not read, why ("HTTP 404"); a claim with no figure to check has none.
    """

    status: CheckStatus
    found: tuple[Figure, ...] = ()
    missing: tuple[Figure, ...] = ()
    message: str = ""

    @property
    def is_flagged(self) -> bool:
        return self.status == "figure not found"

    @property
    def line(self) -> str:
        """The check as a card says it: "38% not found in its source", "not read: HTTP 404"."""
        if self.status == "not read":
            return f"not read: {self.message}"
        return self.message or self.status

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "message": self.message,
            "found": [f.to_dict() for f in self.found],
            "missing": [f.to_dict() for f in self.missing],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ClaimCheck:
        return cls(
            status=data["status"],
            found=tuple(Figure.from_dict(f) for f in data.get("found", ())),
            missing=tuple(Figure.from_dict(f) for f in data.get("missing", ())),
            message=data.get("message", ""),
        )


def extract_figures(text: str) -> list[Figure]:
    """Return the figures of a claim's `text` in order ("one" and "zero" only with a unit)."""
    return list(_extract(text, spelled_bare=False))


@lru_cache(maxsize=1024)
def claim_figures(claim: str) -> tuple[Figure, ...]:
    """Return the figures `check_claim` looks for: the claim's, each value once (cached: a claim
    is read when its passages are chosen and again when they are checked)."""
    return tuple(_unique(_extract(claim, spelled_bare=False)))


def passage_figures(text: str) -> tuple[Figure, ...]:
    """Return the figures a passage offers a claim (its spelled-out numbers and multiples too)."""
    return _passage_figures(text)


def supports(claim: Figure, passage: Figure) -> bool:
    """Return True if the passage's figure says the claim's figure (the module's matching rule,
    without the years a passage names elsewhere)."""
    return _supports(claim, passage, frozenset())


def check_claim(
    claim: str,
    passages: Sequence[str],
    *,
    sources: int | None = None,
    published: Sequence[str] = (),
    read: bool | None = None,
    unread: str = "its source sent no passage",
) -> ClaimCheck:
    """Check every figure of `claim` against the figures of `passages`.

    `read` says whether a source of the claim was read at all; by default, whether there is a
    passage. A source read without a passage (no sentence of its page speaks of the claim)
    supports none of its figures; a claim none of whose sources was read is "not read", and
    `unread` says why in a few words. `published` holds the cited sources' publication dates
    (ISO 8601): a claim's date or year that is one of them counts as found, since answers date
    events by the report ("On October 3, ..."). `sources` (how many sources are cited) only
    chooses "its source" or "its sources" in the message; by default it is the number of
    passages.
    """
    passages = [p for p in passages if p and not p.isspace()]
    if not (passages if read is None else read):
        return ClaimCheck(status="not read", message=unread)
    figures = claim_figures(claim)
    if not figures:
        return ClaimCheck(status="no figure to check")
    in_passages = [_passage_figures(p) for p in passages]
    in_passages.append(tuple(filter(None, map(_publication_date, published))))
    # Only a quarter or a date without its year looks for the year elsewhere in its passage.
    needs_years = any(f.kind in ("quarter", "date") for f in figures)
    years = [_years_named(figs) if needs_years else frozenset() for figs in in_passages]
    found: list[Figure] = []
    missing: list[Figure] = []
    for figure in figures:
        hit = any(
            _supports(figure, candidate, passage_years)
            for figs, passage_years in zip(in_passages, years, strict=True)
            for candidate in figs
        )
        (found if hit else missing).append(figure)
    cited = sources if sources is not None else max(len(passages), 1)
    where = "its source" if cited == 1 else "its sources"
    if missing:
        named = _join_labels([f.label for f in missing])
        return ClaimCheck(
            status="figure not found",
            found=tuple(found),
            missing=tuple(missing),
            message=f"{named} not found in {where}",
        )
    return ClaimCheck(
        status="supported",
        found=tuple(found),
        message=f"{_join_labels([f.label for f in found])} found in {where}",
    )


_SUMMARY_PARTS: tuple[tuple[CheckStatus, str, str], ...] = (
    ("supported", "figure found", "figures found"),
    ("figure not found", "not found", "not found"),
    ("no figure to check", "with no figure to check", "with no figure to check"),
    ("not read", "not read", "not read"),
)


def summarise(checks: Sequence[ClaimCheck]) -> str:
    """Return the answer's one-line summary, or "" when nothing is cited.

    The claims in each state, in this order, leaving out the states no claim is in: "4 cited
    claims: 2 figures found, 1 not found, 1 with no figure to check, 1 not read".
    """
    if not checks:
        return ""
    counts = {state: 0 for state in CHECK_STATES}
    for check in checks:
        counts[check.status] += 1
    parts = [
        f"{counts[state]} {one if counts[state] == 1 else many}"
        for state, one, many in _SUMMARY_PARTS
        if counts[state]
    ]
    return f"{_count(len(checks), 'cited claim')}: {', '.join(parts)}"


# --- matching ---------------------------------------------------------------------------------

_AMOUNT_KINDS = frozenset({"number", "currency"})


def _supports(claim: Figure, passage: Figure, passage_years: frozenset[int]) -> bool:
    """Return True if the passage's figure says the claim's figure (rules in the docstring)."""
    if claim.kind == "year":
        return _year_of(passage) == int(claim.value) or (
            passage.kind == "number" and not passage.unit and passage.value == claim.value
        )
    if claim.kind == "date":
        return passage.kind == "date" and _same_date(claim, passage, passage_years)
    if claim.kind == "quarter":
        return (
            passage.kind == "quarter"
            and passage.value == claim.value
            and (
                not claim.unit
                or passage.unit == claim.unit
                or (not passage.unit and int(claim.unit) in passage_years)
            )
        )
    if claim.kind in _AMOUNT_KINDS:
        if passage.kind not in _AMOUNT_KINDS or not _units_agree(claim, passage):
            return False
    elif passage.kind != claim.kind:
        return False
    if not isinstance(claim.value, Decimal) or not isinstance(passage.value, Decimal):
        return False  # only dates hold text, and they were compared above
    return abs(passage.value - claim.value) <= claim.precision / 2


def _units_agree(claim: Figure, passage: Figure) -> bool:
    if claim.unit == passage.unit or not claim.unit:
        return True
    if {claim.unit, passage.unit} in ({"¥", "JPY"}, {"¥", "CNY"}):
        return True
    # A passage amount without a currency may be in the claim's currency, never in another unit.
    return claim.kind == "currency" and not passage.unit


def _year_of(figure: Figure) -> int | None:
    if figure.kind == "year":
        return int(figure.value)
    if figure.kind == "quarter":
        return int(figure.unit) if figure.unit else None
    if figure.kind == "date":
        return _date_parts(str(figure.value))[0]
    return None


def _years_named(figures: Sequence[Figure]) -> frozenset[int]:
    return frozenset(y for y in map(_year_of, figures) if y is not None)


def _same_date(claim: Figure, passage: Figure, passage_years: frozenset[int]) -> bool:
    wanted = _date_parts(str(claim.value))
    given = _date_parts(str(passage.value))
    for index, (want, got) in enumerate(zip(wanted, given, strict=True)):
        if want is None or want == got:
            continue
        if index == 0 and got is None and want in passage_years:
            continue
        return False
    return True


def _date_parts(value: str) -> tuple[int | None, int | None, int | None]:
    """Return (year, month, day) of "2024-10-03", "2024-10" or "--10-03"."""
    year_text, _, rest = value.partition("-") if not value.startswith("--") else ("", "", value[2:])
    month_text, _, day_text = rest.partition("-")
    return (
        int(year_text) if year_text else None,
        int(month_text) if month_text else None,
        int(day_text) if day_text else None,
    )


def _publication_date(timestamp: str) -> Figure | None:
    day = _ISO_DAY.match(timestamp.strip())
    if day is None:
        return None
    return Figure(kind="date", value=day.group(), text=timestamp)


_ISO_DAY = re.compile(r"\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])(?!\d)")


def _unique(figures: Sequence[Figure]) -> list[Figure]:
    seen: set[tuple[str, Decimal | str, str]] = set()
    unique = []
    for figure in figures:
        key = (figure.kind, figure.value, figure.unit)
        if key not in seen:
            seen.add(key)
            unique.append(figure)
    return unique


def _join_labels(labels: list[str]) -> str:
    """Return "a", "a and b" or "a, b and c", each label once (both ends of "3-5%" share one)."""
    labels = list(dict.fromkeys(labels))
    return labels[0] if len(labels) == 1 else f"{', '.join(labels[:-1])} and {labels[-1]}"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _decimal_text(value: Decimal) -> str:
    return format(value.normalize(), "f")


# --- extraction -------------------------------------------------------------------------------


def _expand(pattern: str, **parts: str) -> str:
    """Return `pattern` with each `{NAME}` replaced (quantifiers like `{1,3}` are left alone)."""
    return re.sub(r"\{([A-Z][A-Z0-9_]*)\}", lambda m: parts[m.group(1)], pattern)


_NUM = r"(?>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)(?!\d)"
_YEAR4 = r"(?:1[89]\d\d|20\d\d|21\d\d)"
_MONTH = r"""(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?
    |Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)\.?"""
_DAY = r"(?:3[01]|[12]\d|0?[1-9])(?!\d)(?:st|nd|rd|th)?"
_SCALE_WORD = r"(?i:thousand|lakh|crore|million|billion|trillion|bn|bln|mn|mln|tn|trn)"
# "of 2024", "fiscal 2026", "of fiscal year 2026", "FY26", "FY 2026", "'24"
_YEAR_PART = _expand(
    r"""(?:(?i:of)[ ])?
    (?:(?:(?i:fiscal)[ ](?:(?i:year)[ ])?|FY[ ]?)?(?P<{G}4>{YEAR4})(?!\d)
      |(?:FY[ ]?'?|')(?P<{G}2>\d{2})(?!\d))""",
    YEAR4=_YEAR4,
    G="{G}",
)
_CURRENCY_SYMBOL = r"""(?:US\$|USD|C\$|CA\$|CAD|A\$|AU\$|AUD|HK\$|HKD|S\$|SGD|NZ\$|NZD|\$|€|EUR
    |£|GBP|JP¥|JPY|CN¥|CNY|RMB|¥|CHF|₹|INR|Rs\.?|₩|KRW)"""
_CURRENCY_WORD = r"""(?:USD|EUR|GBP|JPY|CNY|RMB|CHF|CAD|AUD|HKD|INR|KRW
    |(?i:dollars?|euros?|pounds?(?:[ ]sterling)?|yen|yuan|renminbi|francs?|rupees?|won))"""
_UNIT = r"""(?:nm|nanomet(?:er|re)s?|GWh|MWh|kWh|TWh|GW|MW|kW|TW|(?i:gigawatts?|megawatts?)
    |Gbps|Mbps|GHz|MHz|TB|GB|PB|MB|km|kg|mAh|(?i:tonnes?|tons?|barrels?)|bbl|bpd
    |qubits?|sq[ ]?ft|(?i:square[ ]feet))"""
_NUMBER_WORD = r"""(?:zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve
    |thirteen|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty
    |sixty|seventy|eighty|ninety|hundred)"""
# What follows a number: percentage points before percent, "x" only attached ("2 x 3" is not 2x);
# single-letter scales only attached ("5m", not "5 m").
_SUFFIX = r"""
    (?:
        (?P<{G}pp>[ -]?(?i:percentage[ -]points?|ppts?|pp)|[ ]?%[ ]?(?i:pts?|points?))
      | (?P<{G}pct>[ ]?%|[ -]?(?i:percent|per[ ]?cent|pct))
      | (?P<{G}bp>[ -]?(?i:basis[ -]points?|bps|bp))
      | (?P<{G}mult>x|[ ]?\u00d7|[ ](?i:times)|[ -]?(?i:fold))
      | (?:[ ]?(?P<{G}scale>{SCALE_WORD})|(?P<{G}scale1>[kKmMbBT]))
        (?:[ ](?P<{G}curw>{CURRENCY_WORD}))?
      | (?P<{G}cents>[ ]?(?:¢|(?i:cents?)))
      | [ ]?(?P<{G}cur>{CURRENCY_WORD})
      | [ -]?(?P<{G}unit>{UNIT})
    )?
    (?![A-Za-z])
"""

# Text that holds digits but no figure; each alternative is one trap from the module docstring.
_NOT_A_FIGURE = r"""
    https?://\S+ | www\.\S+ | (?<![\w.+-])[\w.+-]+@[\w-]+\.[\w.]+
  | \[\^[^\]\s]{1,40}\] | \[\d{1,3}(?:[ ]?[,;-][ ]?\d{1,3})*\] | 【[^】]{0,40}】
  | ^[ \t]*(?:[-*+>][ \t]+|\#{1,6}[ \t]+)?\(?\d{1,3}[.)](?=[ \t])
  | (?<![\w.])(?:\+?\d{1,3}[ .-]?)?(?:\(\d{3}\)|\d{3})[ .-]\d{3}[ .-]\d{4}(?!\d)
  | (?<![\w./])24/7(?![\w/])
  | (?<![\w.])\+\d{1,3}(?:[ .-]\d{2,4}){2,5}(?!\d)
  | (?<![\w.])(?:v|(?i:version|release|build)[ ])\d+(?:\.\d+)*
  | (?<![\w.])(?!\d{1,2}\.\d{1,2}\.\d{4}(?![\d.]))\d+(?:\.\d+){2,}
  | (?<![\w.])\d{1,2}-[A-Z](?!\w)
  | (?<![\w.])\d{1,2}:\d{2}(?::\d{2}|[ ]?(?:(?i:am|pm|a\.m\.|p\.m\.)
        |ET|EST|EDT|PT|PST|PDT|CT|UTC|GMT|BST|CET|CEST|JST|HKT))(?!\w)
  | \(\d{1,2}\)
  | (?<![\w&])(?:S&P|Russell|FTSE|Nasdaq|NASDAQ|Nikkei|Stoxx|STOXX|MSCI[ ]\w+|Inc\.)[ -]?\d+
  | \#\d+ | (?<!\w)Nos?\.[ ]?\d+
"""

_DATE = r"""
    (?P<date_iso>(?<![\w.])(?P<iso_y>{YEAR4})-(?P<iso_m>0[1-9]|1[0-2])
        -(?P<iso_d>0[1-9]|[12]\d|3[01])(?!\w))
  | (?P<date_ymd>(?<![\w./])(?P<ymd_y>{YEAR4})/(?P<ymd_m>\d{1,2})/(?P<ymd_d>\d{1,2})(?![\w/]))
  | (?P<date_num>(?<![\w./])(?P<num_a>\d{1,2})(?P<num_sep>[/.])(?P<num_b>\d{1,2})(?P=num_sep)
        (?P<num_y>\d{4}|\d{2})(?![\w/]|\.\d))
  | (?P<date_my>(?<![\w./])(?P<my_m>0?[1-9]|1[0-2])/(?P<my_y4>{YEAR4})(?![\w/]|\.\d))
  | (?P<date_mdy>(?<!\w)(?P<mdy_m>{MONTH})
        (?:[ ](?P<mdy_d>{DAY})(?!\w|[.,]\d|[ ]?%|[ ]{SCALE_WORD})(?:,?[ ](?P<mdy_y>{YEAR4}))?
          |,?[ ](?:(?i:of)[ ])?(?P<my_y>{YEAR4}))
        (?!\w))
  | (?P<date_dmy>(?<![\w.])(?P<dmy_d>{DAY})[ ](?:(?i:of)[ ])?(?P<dmy_m>{MONTH})
        (?:,?[ ](?P<dmy_y>{YEAR4}))?(?!\w))
"""

_QUARTER = r"""
    (?P<quarter_q>(?<!\w)Q(?P<qq>[1-4])(?:[ ]?{QQ_YEAR}|-(?P<qqy_dash>\d{2})(?!\d))?(?!\w))
  | (?P<quarter_fy>(?<!\w)(?:FY|CY)[ ]?'?(?P<fyq_y>\d{4}|\d{2})[ ]?Q(?P<fyq>[1-4])(?!\w))
  | (?P<quarter_yq>(?<![\w.])(?P<yq_y>{YEAR4})[ ]?Q(?P<yq>[1-4])(?!\w))
  | (?P<quarter_nq>(?<![\w.])(?P<nq>[1-4])Q
        (?:[ ]?(?:FY|CY)[ ]?'?(?P<nqf_y>\d{4}|\d{2})|'?(?P<nq_y>\d{4}|\d{2})|[ ](?P<nqs_y>{YEAR4}))?
        (?!\w))
  | (?P<quarter_word>(?<!\w)(?P<qw>(?i:first|second|third|fourth|1st|2nd|3rd|4th))
        [ -](?:(?i:fiscal|calendar)[ -])?(?i:quarter)(?![A-Za-z])(?:,?[ ]{QW_YEAR})?)
  | (?P<fiscal_year>(?<!\w)
        (?:(?:FY|CY)[ ]?'?(?P<fy_y>\d{4}|\d{2})|(?i:fiscal)[ ](?:(?i:year)[ ])?(?P<fyw_y>{YEAR4}))
        (?:[-/](?P<fy_end>\d{4}|\d{2}))?(?!\w))
  | (?P<year_pair>(?<![\w.])(?P<yp_y>{YEAR4})[-/](?P<yp_n>\d{2})(?![\w/]|[.,]\d))
"""

# Currency before identifiers ("USD4bn"), identifiers before numbers ("H100"), and what is
# left starting with a digit ("5G", "1990s", "3rd") is no figure.
_AMOUNT = r"""
    (?P<currency>(?<!\w)(?P<cur_sym>{CURRENCY_SYMBOL})[ ]?(?P<cur_n>{NUM})
        (?:[ ]?(?:-|(?i:to))[ ]?{CURRENCY_SYMBOL}?[ ]?(?P<cur_n2>{NUM}))?
        (?:[ ]?(?P<cur_scale>{SCALE_WORD}|mm|MM|[kKmMbBT]))?(?![A-Za-z]))
  | (?P<identifier>(?<!\w)(?>[A-Za-z]+)\d[\w.-]*
      | (?<!\w)(?=[a-z]*[A-Z])(?>[A-Za-z]+)-\d[\w.-]*)
  | (?P<ratio>(?<![\w.,/])(?P<ra>{NUM})(?::|/|-(?i:to|for)-)(?P<rb>{NUM})(?![\w:/]|[.,]\d)
      | (?<=(?i:ratio)[ ](?i:of)[ ])(?P<rwa>{NUM})[ ](?i:to)[ ](?P<rwb>{NUM})(?!\w)
      | (?<![\w.,])(?P<rta>{NUM})[ ](?i:to)[ ](?P<rtb>{NUM})(?=[ -](?i:ratio)))
  | (?P<quantity>(?<![\w.])(?<!\d,)(?P<q_n>{NUM})(?:[ ]?(?:-|(?i:to))[ ]?(?P<q_n2>{NUM}))?
        {Q_SUFFIX})
  | (?P<spelled>(?<![\w-])(?P<s_n>(?i:{NUMBER_WORD}(?:-{NUMBER_WORD})?)){S_SUFFIX})
  | (?P<times_word>(?<![\w-])(?i:twice|doubled?|tripled?|quadrupled?)(?![A-Za-z]))
  | (?P<alnum>(?<!\w)\d[\w.]*)
"""

_PARTS = {
    "NUM": _NUM,
    "YEAR4": _YEAR4,
    "MONTH": _MONTH,
    "DAY": _DAY,
    "SCALE_WORD": _SCALE_WORD,
    "CURRENCY_SYMBOL": _CURRENCY_SYMBOL,
    "CURRENCY_WORD": _CURRENCY_WORD,
    "UNIT": _UNIT,
    "NUMBER_WORD": _NUMBER_WORD,
    "QQ_YEAR": _expand(_YEAR_PART, G="qqy"),
    "QW_YEAR": _expand(_YEAR_PART, G="qwy"),
}
_PARTS["Q_SUFFIX"] = _expand(_SUFFIX, G="q_", **_PARTS)
_PARTS["S_SUFFIX"] = _expand(_SUFFIX, G="s_", **_PARTS)

# One pass, alternatives in priority order: at any position the first that matches wins. The
# guard lets the scan pass over most positions without trying every alternative: inside words,
# spaces, and words that neither touch a digit or symbol nor can begin a figure on their own.
_START = r"""(?=[\d$€£¥₹₩\[【+(\#.]|^|(?<!\w)(?:(?>[A-Za-z]+)[\d$¥@.:&'+-]
    |(?:{MONTH}|fiscal|Fiscal|FY|CY|{CURRENCY_SYMBOL}|Russell|FTSE|Nasdaq|NASDAQ|Nikkei|Stoxx
      |STOXX|MSCI|(?i:first|second|third|fourth|version|release|build|{NUMBER_WORD}
      |twice|doubled?|tripled?|quadrupled?))
    (?![A-Za-z])))"""
_FIGURE = re.compile(
    _expand(f"{_START}(?:(?P<skip>{_NOT_A_FIGURE})|{_DATE}|{_QUARTER}|{_AMOUNT})", **_PARTS),
    re.VERBOSE | re.MULTILINE,
)

# A bare number right after a label ("tier 1", "Sec. 230") is part of a name, not a figure.
_WORD_BEFORE = re.compile(r"(?<![\w&'-])([A-Za-z][\w&'-]*)(\.?)[ ]$")
_NAME_ABBREVIATIONS = frozenset({"No", "Nos", "Inc", "Vol", "Art", "Sec", "Fig", "Ch"})
_LABEL_WORDS = frozenset(
    {
        *("tier", "phase", "level", "type", "class", "grade", "series", "stage", "step"),
        *("round", "chapter", "section", "article", "item", "page", "figure", "table", "note"),
        *("rule", "form", "model", "gen", "generation", "version", "release", "route"),
    }
)
# "two-thirds": a spelled-out number before these is a fraction's, not a figure of its own.
_FRACTION = re.compile(
    r"-(?:(?:third|quarter|fifth|sixth|seventh|eighth|ninth|tenth)s?(?![a-z])|half)"
)

_SCALES = {
    **dict.fromkeys(("thousand", "k"), Decimal("1e3")),
    "lakh": Decimal("1e5"),
    "crore": Decimal("1e7"),
    **dict.fromkeys(("million", "mn", "mln", "m", "mm"), Decimal("1e6")),
    **dict.fromkeys(("billion", "bn", "bln", "b"), Decimal("1e9")),
    **dict.fromkeys(("trillion", "tn", "trn", "t"), Decimal("1e12")),
}
_CURRENCIES = {
    **dict.fromkeys(("$", "us$", "usd", "dollar"), "USD"),
    **dict.fromkeys(("c$", "ca$", "cad"), "CAD"),
    **dict.fromkeys(("a$", "au$", "aud"), "AUD"),
    **dict.fromkeys(("hk$", "hkd"), "HKD"),
    **dict.fromkeys(("s$", "sgd"), "SGD"),
    **dict.fromkeys(("nz$", "nzd"), "NZD"),
    **dict.fromkeys(("€", "eur", "euro"), "EUR"),
    **dict.fromkeys(("£", "gbp", "pound", "pound sterling", "pounds sterling"), "GBP"),
    "¥": "¥",  # yen or yuan: either agrees with it
    **dict.fromkeys(("jp¥", "jpy", "yen"), "JPY"),
    **dict.fromkeys(("cn¥", "cny", "rmb", "yuan", "renminbi"), "CNY"),
    **dict.fromkeys(("chf", "franc"), "CHF"),
    **dict.fromkeys(("₹", "inr", "rs", "rs.", "rupee"), "INR"),
    **dict.fromkeys(("₩", "krw", "won"), "KRW"),
}
_UNITS = {
    "nanometer": "nm",
    "nanometre": "nm",
    "gigawatt": "GW",
    "megawatt": "MW",
    "tonne": "t",
    "ton": "t",
    "barrel": "bbl",
    "qubit": "qubit",
    "sqft": "sq ft",
    "square feet": "sq ft",
}
_WORD_VALUES = {
    word: n
    for n, word in enumerate(
        (
            *("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"),
            *("ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen"),
            *("seventeen", "eighteen", "nineteen", "twenty"),
        )
    )
} | {
    "thirty": 30,
    "forty": 40,
    "fifty": 50,
    "sixty": 60,
    "seventy": 70,
    "eighty": 80,
    "ninety": 90,
    "hundred": 100,
}
_ORDINALS = {"first": 1, "1st": 1, "second": 2, "2nd": 2, "third": 3, "3rd": 3}
_ORDINALS |= {"fourth": 4, "4th": 4}
_MONTHS = {
    month: n
    for n, month in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), 1
    )
}

# (kind, value, unit, precision, start, end) in the normalised text, before becoming a Figure.
_Read = tuple[str, Decimal | str, str, Decimal, int, int]
# Characters that stand for footnotes, or that mean the same as an ASCII one for figures.
_FOOTNOTE_DIGITS = frozenset("⁰¹²³⁴⁵⁶⁷⁸⁹₀₁₂₃₄₅₆₇₈₉")
_FOLDED = {"\u2212": "-", "\u2010": "-", "\u2011": "-", "\u2012": "-", "\u2013": "-"}
_FOLDED |= {"\u2018": "'", "\u2019": "'"}


@lru_cache(maxsize=1024)
def _passage_figures(text: str) -> tuple[Figure, ...]:
    """Return the figures of a passage; cached, as many claims cite the same passages."""
    return _extract(text, spelled_bare=True)


def _extract(text: str, *, spelled_bare: bool) -> tuple[Figure, ...]:
    plain, origin = _normalised(text)
    figures = []
    for match in _FIGURE.finditer(plain):
        reader = _READERS.get(match.lastgroup or "")
        if reader is None:
            continue
        for kind, value, unit, precision, start, end in reader(match, plain, spelled_bare):
            if origin is not None:
                start, end = origin[start], origin[end - 1] + 1
            figures.append(
                Figure(
                    kind=kind,  # type: ignore[arg-type]
                    value=value,
                    text=text[start:end],
                    unit=unit,
                    precision=precision,
                    start=start,
                    end=end,
                )
            )
    return tuple(figures)


def _normalised(text: str) -> tuple[str, list[int] | None]:
    """Return `text` with NFKC digits, signs and spaces, and each character's original index."""
    if text.isascii():
        return text, None
    pieces: list[str] = []
    origin: list[int] = []
    for index, char in enumerate(text):
        folded = _fold(char) if ord(char) > 127 else char
        pieces.append(folded)
        origin.extend([index] * len(folded))
    return "".join(pieces), origin


@lru_cache(maxsize=1024)
def _fold(char: str) -> str:
    if char in _FOOTNOTE_DIGITS:
        return " "
    return _FOLDED.get(char) or unicodedata.normalize("NFKC", char) or " "


def _number(text: str) -> tuple[Decimal, Decimal]:
    """Return the value of "4,100.5" and the unit of its last digit (0.1)."""
    digits = text.replace(",", "")
    _, dot, decimals = digits.partition(".")
    return Decimal(digits), _ONE.scaleb(-len(decimals) if dot else 0)


def _read_quantity(match: re.Match[str], plain: str, spelled_bare: bool) -> list[_Read]:
    kind, unit, factor = _suffix(match, "q_")
    bare = kind == "number" and not unit and factor == _ONE
    start, end = match.span()
    if bare and _after_a_label(plain, start):
        return []
    reads: list[_Read] = []
    for written in (match.group("q_n"), match.group("q_n2")):
        if written is None:
            continue
        value, unit_of_digit = _number(written)
        is_year = bare and written.isdigit() and 1900 <= value <= 2100
        reads.append(
            ("year" if is_year else kind, value * factor, unit, unit_of_digit * factor, start, end)
        )
    return reads


def _read_spelled(match: re.Match[str], plain: str, spelled_bare: bool) -> list[_Read]:
    kind, unit, factor = _suffix(match, "s_")
    words = match.group("s_n").lower().split("-")
    value = Decimal(sum(_WORD_VALUES[w] for w in words))
    bare = kind == "number" and not unit and factor == _ONE
    if bare and _FRACTION.match(plain, match.end()):
        return []
    if bare and not spelled_bare and value < 2:
        return []  # "one of the largest", "zero-based"
    return [(kind, value * factor, unit, factor, *match.span())]


def _read_times_word(match: re.Match[str], plain: str, spelled_bare: bool) -> list[_Read]:
    """Read "doubled" or "twice" as 2x in a passage ("double-digit" can only hide a flag)."""
    if not spelled_bare:
        return []
    word = match.group().lower()
    value = 2 if word.startswith(("tw", "doub")) else 3 if word.startswith("trip") else 4
    return [("multiple", Decimal(value), "", _ONE, *match.span())]


def _suffix(match: re.Match[str], g: str) -> tuple[str, str, Decimal]:
    """Return (kind, unit, factor) for what follows a number."""
    if match.group(g + "pp"):
        return "bps", "", Decimal(100)
    if match.group(g + "pct"):
        return "percent", "", _ONE
    if match.group(g + "bp"):
        return "bps", "", _ONE
    if match.group(g + "mult"):
        return "multiple", "", _ONE
    scale = match.group(g + "scale") or match.group(g + "scale1")
    if scale:
        currency = match.group(g + "curw")
        factor = _SCALES[scale.lower()]
        return ("currency", _currency(currency), factor) if currency else ("number", "", factor)
    if match.group(g + "cents"):
        return "currency", "", Decimal("0.01")
    if match.group(g + "cur"):
        return "currency", _currency(match.group(g + "cur")), _ONE
    if unit := match.group(g + "unit"):
        return "number", _unit(unit), _ONE
    return "number", "", _ONE


def _currency(written: str) -> str:
    key = written.lower()
    return _CURRENCIES.get(key) or _CURRENCIES.get(key.removesuffix("s"), key.upper())


def _unit(written: str) -> str:
    key = written.lower().removesuffix("s")
    return _UNITS.get(key, written)


def _after_a_label(plain: str, start: int) -> bool:
    """Return True if a bare number at `start` numbers a label ("tier 1", "Sec. 230")."""
    before = _WORD_BEFORE.search(plain, max(0, start - 40), start)
    if before is None:
        return False
    word, dot = before.groups()
    if dot:
        return word in _NAME_ABBREVIATIONS  # else the end of a sentence
    return word.lower() in _LABEL_WORDS


def _read_currency(match: re.Match[str], plain: str, spelled_bare: bool) -> list[_Read]:
    code = _currency(match.group("cur_sym"))
    scale = match.group("cur_scale")
    factor = _SCALES[scale.lower()] if scale else _ONE
    reads: list[_Read] = []
    for written in (match.group("cur_n"), match.group("cur_n2")):
        if written is not None:
            value, unit_of_digit = _number(written)
            reads.append(("currency", value * factor, code, unit_of_digit * factor, *match.span()))
    return reads


def _read_ratio(match: re.Match[str], plain: str, spelled_bare: bool) -> list[_Read]:
    left_group, right_group = next(
        pair for pair in (("ra", "rb"), ("rwa", "rwb"), ("rta", "rtb")) if match.group(pair[0])
    )
    left, left_digit = _number(match.group(left_group))
    right, right_digit = _number(match.group(right_group))
    if not right:
        return []
    # Whole-number ratios compare exactly; written decimals allow the claim's rounding.
    finest = min(left_digit, right_digit)
    precision = _ZERO if finest == _ONE else finest / right
    start, end = match.span(left_group)[0], match.span(right_group)[1]
    return [("ratio", left / right, "", precision, start, end)]


def _read_date(match: re.Match[str], plain: str, spelled_bare: bool) -> list[_Read]:
    name = match.lastgroup
    year: int | None = None
    day: int | None = None
    if name == "date_iso":
        year, month, day = (int(match.group(g)) for g in ("iso_y", "iso_m", "iso_d"))
    elif name == "date_ymd":
        year, month, day = (int(match.group(g)) for g in ("ymd_y", "ymd_m", "ymd_d"))
    elif name == "date_my":
        year, month = int(match.group("my_y4")), int(match.group("my_m"))
    elif name == "date_num":
        first, second = int(match.group("num_a")), int(match.group("num_b"))
        year = _full_year(match.group("num_y"))
        # "10/03/2024" is read the US way when it can be; "03.10.2024" the European way.
        if match.group("num_sep") == "/" and first <= 12:
            month, day = first, second
        else:
            day, month = first, second
    elif name == "date_mdy":
        month = _MONTHS[match.group("mdy_m")[:3].lower()]
        if match.group("mdy_d"):
            day = int(match.group("mdy_d").rstrip("stndrh"))
        written_year = match.group("mdy_y") or match.group("my_y")
        year = int(written_year) if written_year else None
    else:
        day = int(match.group("dmy_d").rstrip("stndrh"))
        month = _MONTHS[match.group("dmy_m")[:3].lower()]
        year = int(match.group("dmy_y")) if match.group("dmy_y") else None
    if not 1 <= month <= 12 or (day is not None and not 1 <= day <= 31):
        return []
    value = f"{year:04d}" if year is not None else "-"
    value += f"-{month:02d}" + (f"-{day:02d}" if day is not None else "")
    return [("date", value, "", _ZERO, *match.span())]


def _read_quarter(match: re.Match[str], plain: str, spelled_bare: bool) -> list[_Read]:
    name = match.lastgroup
    if name == "quarter_q":
        quarter = match.group("qq")
        year = match.group("qqy4") or match.group("qqy2") or match.group("qqy_dash")
    elif name == "quarter_fy":
        quarter, year = match.group("fyq"), match.group("fyq_y")
    elif name == "quarter_yq":
        quarter, year = match.group("yq"), match.group("yq_y")
    elif name == "quarter_nq":
        quarter = match.group("nq")
        year = match.group("nqf_y") or match.group("nq_y") or match.group("nqs_y")
    else:
        quarter = str(_ORDINALS[match.group("qw").lower()])
        year = match.group("qwy4") or match.group("qwy2")
    unit = str(_full_year(year)) if year else ""
    return [("quarter", Decimal(quarter), unit, _ONE, *match.span())]


def _read_fiscal_year(match: re.Match[str], plain: str, spelled_bare: bool) -> list[_Read]:
    year = _full_year(match.group("fy_y") or match.group("fyw_y"))
    if end := match.group("fy_end"):
        # "FY2023-24" is the fiscal year that ends in 2024.
        year = _full_year(end) if len(end) == 4 else year // 100 * 100 + int(end)
    return [("year", Decimal(year), "", _ONE, *match.span())]


def _read_year_pair(match: re.Match[str], plain: str, spelled_bare: bool) -> list[_Read]:
    year, tail = int(match.group("yp_y")), int(match.group("yp_n"))
    span = match.span()
    if tail == (year + 1) % 100:  # "2023-24"
        return [
            ("year", Decimal(year), "", _ONE, *span),
            ("year", Decimal(year + 1), "", _ONE, *span),
        ]
    if 1 <= tail <= 12:  # "2024-10"
        return [("date", f"{year:04d}-{tail:02d}", "", _ZERO, *span)]
    return [("year", Decimal(year), "", _ONE, *match.span("yp_y"))]


def _full_year(written: str) -> int:
    year = int(written.lstrip("'"))
    return 2000 + year if year < 100 else year


_Reader = Callable[[re.Match[str], str, bool], list[_Read]]
_READERS: dict[str, _Reader] = {
    **dict.fromkeys(
        ("date_iso", "date_ymd", "date_my", "date_num", "date_mdy", "date_dmy"), _read_date
    ),
    **dict.fromkeys(
        ("quarter_q", "quarter_fy", "quarter_yq", "quarter_nq", "quarter_word"), _read_quarter
    ),
    "fiscal_year": _read_fiscal_year,
    "year_pair": _read_year_pair,
    "currency": _read_currency,
    "ratio": _read_ratio,
    "quantity": _read_quantity,
    "spelled": _read_spelled,
    "times_word": _read_times_word,
}
