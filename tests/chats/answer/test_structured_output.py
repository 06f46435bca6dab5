"""Structured output: the table under the answer, and its CSV and JSON downloads."""

from __future__ import annotations

import csv
import io
import json
from http import HTTPStatus

import pytest
from django.urls import reverse

from chats.answer.structured_output import structured_csv, structured_table
from chats.models import Chat, Turn

ROWS = [
    {"company": "NVIDIA", "revenue": 75.4, "segments": ["data center", "gaming"]},
    {"company": "Apple", "eps": 2.71, "meta": {"q": 1}},
]


def test_a_list_of_objects_is_rows_with_the_union_of_keys():
    table = structured_table(ROWS)
    assert table["columns"] == ["company", "revenue", "segments", "eps", "meta"]
    assert table["rows"] == [
        ["NVIDIA", "75.4", '["data center","gaming"]', "", ""],
        ["Apple", "", "", "2.71", '{"q":1}'],
    ]
    assert table["pairs"] is False


def test_an_object_is_key_value_pairs():
    table = structured_table({"ticker": "NVDA", "beat": True, "growth": None})
    assert table["pairs"] is True
    assert table["rows"] == [["ticker", "NVDA"], ["beat", "true"], ["growth", ""]]


@pytest.mark.parametrize("value", [None, [], {}])
def test_nothing_is_no_table(value):
    assert structured_table(value) is None


def test_scalars_and_mixed_lists_are_one_value_column():
    assert structured_table("text")["rows"] == [["text"]]
    assert structured_table([1, {"a": 1}])["rows"] == [["1"], ['{"a":1}']]


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def fields_as_read(text: str, delimiter: str) -> list[str]:
    """Every field a spreadsheet splitting lines by `delimiter` (and honouring quotes) reads, a
    lone carriage return ending a line as a line break does."""
    lines = io.StringIO(text.replace("\r\n", "\n").replace("\r", "\n"))
    return [f for row in csv.reader(lines, delimiter=delimiter) for f in row]


def is_plain_number(field: str) -> bool:
    try:
        float(field)
    except ValueError:
        return False
    return True


def test_csv_cells_cannot_run_as_spreadsheet_formulas():
    value = [
        {"=cmd": '=HYPERLINK("http://evil.example")', "b": "+A1", "c": "-2+3", "d": "@SUM(A1)"},
        {"=cmd": "plain", "b": "1", "c": "a-b", "d": "\tx"},
    ]
    rows = list(csv.reader(io.StringIO(structured_csv(value))))
    assert rows[0] == ["'=cmd", "b", "c", "d"]
    assert rows[1] == ['\'=HYPERLINK("http://evil.example")', "'+A1", "'-2+3", "'@SUM(A1)"]
    assert rows[2] == ["plain", "1", "a-b", "'\tx"]


@pytest.mark.parametrize(
    "cell",
    [
        "x;=1+1",
        "x;=1+1;y",
        "x,=1+1",
        "x|=1+1",
        "x\t=1+1",
        "a;+cmd",
        "a;-2+3",
        "a;@SUM(A1)",
        "a;\t=1",
        "a;\r=1",
        "a\n=1",
        'a";=1+1',
        'a;"=1+1"',
        "a, =1+1",
        "-1;=2",
    ],
)
@pytest.mark.parametrize("delimiter", [",", ";", "|", "\t"])
@pytest.mark.parametrize("column", [0, 1])
def test_no_separator_lets_a_cell_start_a_formula(cell, delimiter, column):
    """Wherever the cell stands in its line, a reader splitting by another separator than the
    file's (and so not seeing its quotes) reads no field that starts a formula."""
    row = {"name": cell, "n": 1} if column == 0 else {"n": 1, "name": cell}
    text = structured_csv([row, {**row, "n": 2}])
    for field in fields_as_read(text, delimiter):
        if is_plain_number(field):
            continue
        assert not field.lstrip(' "').startswith(FORMULA_STARTS), (delimiter, field)
    # Read by its own separator, the cell comes back with a ' before each formula it held.
    read = list(csv.reader(io.StringIO(text)))[1][column]
    assert read.replace("'", "") == cell.replace("'", "")
    assert read.startswith("'") or read.startswith(cell[0])


def test_a_part_that_is_a_number_is_left_alone():
    [_, row] = list(csv.reader(io.StringIO(structured_csv([{"a": "1,-2", "b": "x;-3.5"}]))))
    assert row == ["1,-2", "x;-3.5"]


def test_numbers_stay_numbers():
    value = [{"a": -3.5, "b": 42, "c": "-3.5", "d": "+7", "e": True, "f": None, "g": 1e-7}]
    text = structured_csv(value)
    assert text.splitlines()[1] == '-3.5,42,"-3.5","+7","true","",1e-07'
    assert list(csv.reader(io.StringIO(text), quoting=csv.QUOTE_NONNUMERIC))[1][:2] == [-3.5, 42]


def test_the_page_table_is_cut_to_its_caps_and_says_so(settings):
    settings.STRUCTURED_OUTPUT_MAX_ROWS = 500
    settings.STRUCTURED_OUTPUT_MAX_COLUMNS = 20
    settings.STRUCTURED_OUTPUT_MAX_CELL_CHARS = 50
    rows = [{f"k{i}": "x" * 80, "n": i} for i in range(12_000)]  # 12,001 distinct keys
    table = structured_table(rows)
    assert len(table["rows"]) == 500 and len(table["columns"]) == 20
    assert (table["total_rows"], table["total_columns"]) == (12_000, 12_001)
    assert table["rows"][0][0] == "x" * 49 + "…"
    from chats.templatetags.chats_charts import table_cut

    assert table_cut(table, True) == (
        "Showing 500 of 12,000 rows and 20 of 12,001 columns; download the CSV for all."
    )
    assert table_cut(structured_table(ROWS)) == ""
    pairs = structured_table({f"k{i}": i for i in range(600)})
    assert len(pairs["rows"]) == 500 and pairs["total_rows"] == 600


@pytest.mark.django_db
class TestDownloads:
    @pytest.fixture
    def turn(self, chat):
        return Turn.objects.create(
            chat=chat, question="q", status="complete", answer_text="a", structured_output=ROWS
        )

    def url(self, turn, fmt):
        return reverse("turn_structured_output", args=[turn.chat_id, turn.pk, fmt])

    def test_the_owner_downloads_csv_and_json(self, client, user, turn):
        client.force_login(user)
        response = client.get(self.url(turn, "csv"))
        assert response.status_code == HTTPStatus.OK
        assert response["Content-Type"].startswith("text/csv")
        assert "attachment" in response["Content-Disposition"]
        assert response.content.decode().splitlines()[0] == (
            '"company","revenue","segments","eps","meta"'
        )
        response = client.get(self.url(turn, "json"))
        assert response["Content-Type"] == "application/json"
        assert json.loads(response.content) == ROWS

    def test_anyone_else_gets_404(self, client, other_user, turn):
        client.force_login(other_user)
        for fmt in ("csv", "json"):
            assert client.get(self.url(turn, fmt)).status_code == HTTPStatus.NOT_FOUND

    def test_a_turn_of_another_chat_or_format_is_404(self, client, user, turn):
        client.force_login(user)
        other_chat = Chat.objects.create(owner=user)
        url = reverse("turn_structured_output", args=[other_chat.pk, turn.pk, "csv"])
        assert client.get(url).status_code == HTTPStatus.NOT_FOUND
        assert client.get(self.url(turn, "xml")).status_code == HTTPStatus.NOT_FOUND
        empty = Turn.objects.create(chat=turn.chat, question="q2", status="complete")
        assert client.get(self.url(empty, "csv")).status_code == HTTPStatus.NOT_FOUND

    def test_logged_out_is_sent_to_login(self, client, turn):
        response = client.get(self.url(turn, "csv"))
        assert response.status_code == HTTPStatus.FOUND

    def test_the_chat_page_shows_the_table_charts_and_usage(self, client, user, turn):
        from chats.agent.events import event_from_data
        from chats.answer.charts import chart_for_turn

        chart = event_from_data(
            {
                "type": "CHART",
                "title": "Rev <b>",
                "vega_lite_spec": {"data": {"values": [{"a": 1}]}, "mark": "bar"},
            }
        )
        turn.charts = [chart_for_turn(chart, "a")]
        turn.consumption = [
            {"type": "base", "input_tokens": 1234, "output_tokens": 567, "cached_tokens": 0},
            {"type": "pro", "input_tokens": 0, "output_tokens": 0},
        ]
        turn.answer_html = "<p>a</p>"
        turn.save()
        client.force_login(user)
        html = client.get(reverse("chat_detail", args=[turn.chat_id])).content.decode()
        assert '<th scope="col">segments</th>' in html
        assert self.url(turn, "csv") in html and self.url(turn, "json") in html
        assert "Tokens: base 1,234 in / 567 out" in html and "pro 0" not in html
        assert "Rev &lt;b&gt;" in html and "data-chart" in html

    def test_the_export_has_the_table(self, client, user, turn):
        client.force_login(user)
        body = client.get(reverse("chat_export", args=[turn.chat_id])).content.decode()
        assert "**Structured output**" in body
        assert "| company | revenue | segments | eps | meta |" in body

    def test_a_34_kb_output_of_distinct_keys_makes_a_small_page_and_a_full_csv(
        self, client, user, turn
    ):
        rows = [{f"k{i}": i} for i in range(2_200)]  # ~34 KB of JSON, 2,200 columns
        assert 30_000 < len(json.dumps(rows)) < 40_000
        turn.structured_output = rows
        turn.save()
        client.force_login(user)
        page = client.get(reverse("chat_detail", args=[turn.chat_id])).content.decode()
        assert len(page) < 200_000  # was 36 MB: 2,500 rows x 2,500 columns of cells
        assert "Showing 500 of 2,200 rows and 20 of 2,200 columns; download the CSV for all." in (
            page
        )
        lines = client.get(self.url(turn, "csv")).content.decode().splitlines()
        assert len(lines) == 2_201 and lines[0].count(",") == 2_199
        assert lines[-1].endswith(",2199")
        assert json.loads(client.get(self.url(turn, "json")).content) == rows
