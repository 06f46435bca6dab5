"""Charts: the spec sanitiser against hostile specs, placement, storage, live frames, export."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from chats.agent.events import ChartEvent, event_from_data
from chats.agent.transcript import Transcript
from chats.answer import chart_spec
from chats.answer.chart_spec import MAX_SPEC_BYTES, MAX_TEXT, DataCaps, UnsafeSpec
from chats.answer.charts import (
    UNSAFE,
    answer_block_at,
    chart_blocks,
    chart_for_turn,
    markdown_tables,
)
from chats.live.protocol import event_view
from chats.run.storable import storable_event
from tests.chats.answer.chart_attacks import ATTACKS, with_x

CAPS = DataCaps(rows=1_000, columns=20, cell_chars=200)


def sanitize_spec(spec: Any, caps: DataCaps = CAPS) -> dict[str, Any]:
    return chart_spec.sanitize_spec(spec, caps)


ROWS = [{"company": "NVIDIA", "revenue": 75.4}, {"company": "Apple", "revenue": 140.2}]


def bar_spec(**extra: Any) -> dict[str, Any]:
    return {
        "$schema": "https://vega.github.io/schema/vega-lite/v5.json",
        "title": "Revenue",
        "data": {"values": copy.deepcopy(ROWS)},
        "mark": "bar",
        "encoding": {
            "x": {"field": "company", "type": "nominal"},
            "y": {"field": "revenue", "type": "quantitative"},
        },
        **extra,
    }


def walk(value: Any):
    """Every (key, value) pair at every depth."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield key, item
            yield from walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from walk(item)


UNSAFE_KEYS = {"url", "href", "expr", "signal", "params", "usermeta", "config", "calculate"}


def assert_inert(spec: dict[str, Any]) -> None:
    keys = {key for key, _ in walk(spec)}
    assert not keys & UNSAFE_KEYS, keys & UNSAFE_KEYS
    assert not any(key.endswith("Expr") for key in keys)
    text = json.dumps(spec)
    assert "evil.example" not in text
    assert '"image"' not in text


# --- The sanitiser ---------------------------------------------------------------------------


def test_a_plain_bar_chart_is_kept_as_drawn_minus_its_schema_url():
    spec = sanitize_spec(bar_spec())
    assert spec["mark"] == "bar" and spec["data"] == {"values": ROWS}
    assert spec["encoding"]["y"] == {"field": "revenue", "type": "quantitative"}
    assert "$schema" not in spec


def test_remote_data_is_refused_whole():
    spec = bar_spec(data={"url": "https://evil.example/data.json"})
    with pytest.raises(UnsafeSpec, match="remote data"):
        sanitize_spec(spec)


@pytest.mark.parametrize(
    "data",
    [
        {"values": ROWS, "url": "https://evil.example/x.csv"},  # both: the url is dropped
        {"values": ROWS, "format": {"type": "csv"}, "name": "x"},
    ],
)
def test_data_keeps_inline_values_only(data):
    spec = sanitize_spec(bar_spec(data=data))
    assert spec["data"] == {"values": ROWS}


def test_url_anywhere_is_dropped():
    spec = bar_spec(
        layer=[
            {
                "data": {"values": ROWS, "url": "https://evil.example/layer.json"},
                "mark": {"type": "point", "href": "https://evil.example/mark"},
                "encoding": {
                    "href": {"field": "link"},
                    "url": {"field": "img"},
                    "x": {"field": "company", "axis": {"url": "https://evil.example/axis"}},
                },
            }
        ],
        description={"nested": [{"deeper": {"url": "https://evil.example/deep"}}]},
    )
    cleaned = sanitize_spec(spec)
    assert_inert(cleaned)
    assert cleaned["layer"][0]["encoding"] == {"x": {"field": "company", "axis": {}}}


def test_named_datasets_are_dropped_and_a_lookup_is_refused():
    cleaned = sanitize_spec(bar_spec(datasets={"remote": {"url": "https://evil.example/d.json"}}))
    assert_inert(cleaned)
    assert "datasets" not in cleaned
    lookup = {"lookup": "company", "from": {"data": {"url": "https://evil.example/l.json"}}}
    with pytest.raises(UnsafeSpec, match="expression"):
        sanitize_spec(bar_spec(transform=[lookup]))


@pytest.mark.parametrize("mark", ["image", {"type": "image", "url": "https://evil.example/i.png"}])
def test_image_marks_are_refused(mark):
    with pytest.raises(UnsafeSpec, match="mark"):
        sanitize_spec(bar_spec(mark=mark))


def test_an_image_mark_hidden_in_a_layer_is_refused_too():
    layer = {"mark": "image", "encoding": {"url": {"field": "u"}}}
    with pytest.raises(UnsafeSpec):
        sanitize_spec(bar_spec(layer=[layer]))


def test_expressions_that_only_style_are_removed_and_the_chart_drawn():
    spec = bar_spec(
        params=[{"name": "p", "expr": "alert(1)", "bind": {"input": "range"}}],
        transform=[
            {"filter": {"field": "revenue", "gt": 0}},
            {"aggregate": [{"op": "sum", "field": "revenue", "as": "total"}]},
        ],
        encoding={
            "x": {"field": "company", "type": "nominal", "axis": {"labelExpr": "alert(1)"}},
            "y": {"field": "revenue", "type": "quantitative"},
            "color": {"condition": {"test": "alert(1)", "value": "red"}, "value": "blue"},
            "opacity": {"value": {"expr": "alert(1)"}},
            "size": {"signal": "alert(1)"},
        },
        width={"signal": "alert(1)"},
        usermeta={"embedOptions": {"loader": {"baseURL": "https://evil.example/"}}},
        config={"loader": {"baseURL": "https://evil.example/"}},
    )
    cleaned = sanitize_spec(spec)
    assert_inert(cleaned)
    assert "alert" not in json.dumps(cleaned)
    assert cleaned["transform"] == [
        {"filter": {"field": "revenue", "gt": 0}},
        {"aggregate": [{"op": "sum", "field": "revenue", "as": "total"}]},
    ]
    assert cleaned["encoding"]["color"] == {"value": "blue"}


@pytest.mark.parametrize(
    "transform",
    [
        {"calculate": "alert(document.cookie)", "as": "x"},
        {"filter": "datum.revenue > 0 || alert(1)"},
        {"filter": {"and": ["alert(1)"]}},
        {"filter": {"field": "revenue", "equal": {"expr": "alert(1)"}}},
        {"extent": "revenue", "param": "e"},
        {"sequence": {"start": 0, "stop": 1e9}},
    ],
)
def test_transforms_that_compute_with_expressions_refuse_the_chart(transform):
    with pytest.raises(UnsafeSpec):
        sanitize_spec(bar_spec(transform=[transform]))


def test_top_level_keys_are_allow_listed():
    spec = bar_spec(signals=[{"name": "s", "update": "alert(1)"}], marks=[], scales=[])
    cleaned = sanitize_spec(spec)
    assert set(cleaned) == {"title", "data", "mark", "encoding"}


def test_more_rows_than_the_cap_are_refused():
    rows = [{"company": f"c{i}", "revenue": i} for i in range(CAPS.rows + 1)]
    with pytest.raises(UnsafeSpec, match="rows of data"):
        sanitize_spec(bar_spec(data={"values": rows}))


def test_rows_are_counted_across_layers():
    half = [{"a": i} for i in range(CAPS.rows // 2 + 1)]
    layers = [{"data": {"values": half}, "mark": "bar"}, {"data": {"values": half}, "mark": "bar"}]
    with pytest.raises(UnsafeSpec, match="rows of data"):
        sanitize_spec({"layer": layers})


def test_more_columns_than_the_cap_are_refused_and_cells_are_cut():
    wide = [{f"k{i}": i for i in range(CAPS.columns + 1)}]
    with pytest.raises(UnsafeSpec, match="columns"):
        sanitize_spec(bar_spec(data={"values": wide}))
    cleaned = sanitize_spec(bar_spec(data={"values": [{"company": "x" * 5000, "revenue": 1}]}))
    assert len(cleaned["data"]["values"][0]["company"]) == CAPS.cell_chars


def test_a_huge_spec_is_refused_before_it_is_walked():
    spec = bar_spec(description="x" * (MAX_SPEC_BYTES + 1))
    with pytest.raises(UnsafeSpec, match="KB"):
        sanitize_spec(spec)


def test_strings_are_capped_and_script_stays_text():
    title = "<script>alert(1)</script>" + "x" * (MAX_TEXT * 2)
    cleaned = sanitize_spec(bar_spec(title=title))
    assert len(cleaned["title"]) == MAX_TEXT
    assert cleaned["title"].startswith("<script>")  # inert: drawn as SVG text, escaped in HTML


@pytest.mark.parametrize(
    "extra", [{"width": 10**9}, {"height": {"step": 10**9}}, {"padding": 10**7}]
)
def test_absurd_sizes_are_refused(extra):
    with pytest.raises(UnsafeSpec, match="limit"):
        sanitize_spec(bar_spec(**extra))
    assert sanitize_spec(bar_spec(width=400, padding=5))["width"] == 400


@pytest.mark.parametrize("spec", [None, "bar", [], {"title": "no marks"}, {"mark": 3}])
def test_what_is_not_a_drawable_spec_is_refused(spec):
    with pytest.raises(UnsafeSpec):
        sanitize_spec(spec)


def test_nesting_too_deep_is_refused():
    deep: dict[str, Any] = bar_spec()
    for _ in range(100):
        deep = {"layer": [deep]}
    with pytest.raises(UnsafeSpec, match="deeply"):
        sanitize_spec(deep)


def test_the_input_is_not_modified():
    spec = bar_spec(params=[{"name": "p"}])
    before = copy.deepcopy(spec)
    sanitize_spec(spec)
    assert spec == before


# --- What a turn stores ------------------------------------------------------------------------


def chart_event(**fields: Any) -> ChartEvent:
    data = {
        "type": "CHART",
        "chart_id": "c1",
        "title": "Revenue",
        "chart_type": "bar",
        "caption": "In US$ billion.",
        "vega_lite_spec": bar_spec(),
        "data_points": 2,
        "start": 0,
        "end": 5,
        **fields,
    }
    event = event_from_data(data)
    assert isinstance(event, ChartEvent)
    return event


def test_chart_events_round_trip_through_the_stored_schema():
    event = chart_event()
    assert event.data["vega_lite_spec"] == bar_spec() and event.data["end"] == 5
    assert event_from_data(event.data) == event


def test_bad_offsets_read_as_none():
    event = chart_event(start="0", end=-4)
    assert event.start is None and event.end is None


def test_the_transcript_collects_charts_in_order():
    transcript = Transcript.from_log(
        [chart_event(chart_id="a").data, {"type": "ANSWER", "content": "x"}, chart_event().data]
    )
    assert [c.chart_id for c in transcript.charts] == ["a", "c1"]


def test_a_safe_chart_keeps_its_spec_table_and_place():
    answer = "First paragraph.\n\nSecond paragraph."
    stored = chart_for_turn(chart_event(end=len("First paragraph.")), answer)
    assert stored["spec"]["mark"] == "bar" and stored["note"] == ""
    assert stored["table"] == {
        "columns": ["company", "revenue"],
        "rows": [["NVIDIA", "75.4"], ["Apple", "140.2"]],
        "total_rows": 2,
        "total_columns": 2,
    }
    assert stored["block"] == 0
    json.dumps(stored)  # JSON-safe for Turn.charts


def test_an_unsafe_chart_keeps_its_table_and_says_why():
    spec = bar_spec(data={"url": "https://evil.example/d.json"})
    points = [{"company": "NVIDIA", "revenue": 1}]
    stored = chart_for_turn(chart_event(vega_lite_spec=spec, data_points=points), "Answer.")
    assert stored["spec"] is None
    assert stored["note"].startswith(UNSAFE)
    assert "remote data" in stored["note"] and "table" in stored["note"]
    assert stored["table"]["rows"] == [["NVIDIA", "1"]]
    assert "evil.example" not in json.dumps(stored)


@pytest.mark.parametrize(
    ("end", "block"),
    [
        (None, None),
        (0, None),
        (999, None),
        (1, 0),  # "A"
        (len("A\n\nB"), 1),
        (len("A\n\nB\n\n"), 1),  # ends in the blank line after B: after B
        (len("A\n\nB\n\n| x |\n| - |\n| 1 |"), 2),  # inside the table: after the table
        (len("A\n\nB\n\n| x |\n| - |\n| 1 |\n\n- one\n- two"), 3),  # the list, whole
    ],
)
def test_a_chart_goes_after_the_block_holding_its_end(end, block):
    answer = "A\n\nB\n\n| x |\n| - |\n| 1 |\n\n- one\n- two"
    assert answer_block_at(answer, end) == block


def test_the_live_frame_carries_the_chart_escaped():
    event = chart_event(title="<img src=x onerror=alert(1)>", caption="<script>x()</script>")
    view = event_view(7, event)
    html = view["chart_html"]
    assert "<img src=x" not in html and "&lt;img src=x" in html
    assert "<script>" not in html
    assert "data-chart" in html and "data-spec=" in html


def test_the_export_shows_each_chart_as_a_data_table():
    stored = chart_for_turn(chart_event(title="Rev | 2027"), "Answer.")
    text = markdown_tables([stored])
    assert text.splitlines() == [
        "**Chart: Rev \\| 2027**",
        "",
        "In US$ billion.",
        "",
        "| company | revenue |",
        "| --- | --- |",
        "| NVIDIA | 75.4 |",
        "| Apple | 140.2 |",
    ]


# --- Attacks: what the event log stores as each arrives -------------------------------------


@pytest.mark.parametrize("spec", ATTACKS.values(), ids=ATTACKS.keys())
def test_each_attack_is_stored_as_its_table_not_its_spec(spec):
    event = chart_event(vega_lite_spec=spec, data_points=None)
    stored = storable_event(event)  # what the run stores and relays as the event arrives
    sanitized = stored.data["sanitized"]
    assert sanitized["spec"] is None
    assert sanitized["note"].startswith("This chart could not be drawn safely.")
    assert sanitized["table"]["rows"] == [["2024-01-01", "1"], ["2024-02-01", "2"]]
    assert "vega_lite_spec" not in stored.data or stored.data["vega_lite_spec"] is None
    # Read back from the log, it is shown as stored: nothing sanitises it again.
    assert chart_for_turn(event_from_data(stored.data), "Answer.")["spec"] is None


def test_a_safe_chart_is_stored_sanitised_and_an_agents_own_sanitized_is_replaced():
    forged = {"spec": {"mark": "bar", "data": {"url": "https://evil.example/"}}, "note": ""}
    stored = storable_event(chart_event(sanitized=forged)).data
    assert stored["sanitized"]["spec"] == sanitize_spec(bar_spec())
    assert "evil.example" not in json.dumps(stored)


def test_a_time_interval_tick_count_is_left_out_not_drawn():
    # "millisecond" ticks over a domain of centuries would be trillions of ticks.
    cleaned = sanitize_spec(with_x(axis={"tickCount": "millisecond", "title": "Day"}))
    assert cleaned["encoding"]["x"]["axis"] == {"title": "Day"}


def test_date_objects_of_numbers_are_kept():
    cleaned = sanitize_spec(with_x(scale={"domain": [{"year": 2024, "month": 1}, {"year": 2025}]}))
    assert cleaned["encoding"]["x"]["scale"]["domain"] == [
        {"year": 2024, "month": 1},
        {"year": 2025},
    ]


def test_a_colour_cannot_load_a_url():
    spec = bar_spec(mark={"type": "bar", "fill": "url(https://evil.example/x)"})
    spec["encoding"]["color"] = {"value": "URL( https://evil.example/y)"}
    cleaned = sanitize_spec(spec)
    assert cleaned["mark"] == {"type": "bar"}
    assert "color" not in cleaned["encoding"] or "value" not in cleaned["encoding"]["color"]


# --- Sizes counted in steps ---------------------------------------------------------------------


def categories(count: int) -> list[dict[str, Any]]:
    return [{"company": f"c{i}", "revenue": i} for i in range(count)]


def test_a_step_sized_view_of_many_categories_gets_a_fixed_width():
    many = sanitize_spec(bar_spec(data={"values": categories(900)}))
    assert many["width"] == chart_spec.MAX_SIZE_PX  # 900 x 20 px would be 18,000 px
    stepped = sanitize_spec(bar_spec(data={"values": categories(900)}, width={"step": 50}))
    assert stepped["width"] == chart_spec.MAX_SIZE_PX


def test_a_step_sized_view_of_few_categories_keeps_its_steps():
    few = sanitize_spec(bar_spec(data={"values": categories(30)}, width={"step": 30}))
    assert few["width"] == {"step": 30}
    assert "width" not in sanitize_spec(bar_spec())
    # 900 rows, but only three companies: the field's own values bound the width.
    rows = [{"company": f"c{i % 3}", "revenue": i} for i in range(900)]
    assert "width" not in sanitize_spec(bar_spec(data={"values": rows}))


def test_a_layer_shares_its_step_sized_width():
    layered = {
        "data": {"values": categories(900)},
        "layer": [{"mark": "bar", "encoding": {"x": {"field": "company", "type": "nominal"}}}],
    }
    assert sanitize_spec(layered)["width"] == chart_spec.MAX_SIZE_PX


def test_faceting_into_too_many_views_is_refused():
    spec = bar_spec(data={"values": categories(500)})
    spec["encoding"]["row"] = {"field": "company", "type": "nominal"}
    with pytest.raises(UnsafeSpec, match="views"):
        sanitize_spec(spec)


# --- Placement of many charts -----------------------------------------------------------------


def test_every_chart_is_placed_from_one_parse(monkeypatch):
    from chats.answer import charts

    answer = "\n\n".join(f"Paragraph {i}." for i in range(300))
    ends = [answer.index(f"Paragraph {i}.") + 3 for i in range(300)]
    parses = []
    real = charts._BLOCKS.parse
    monkeypatch.setattr(charts._BLOCKS, "parse", lambda text: parses.append(1) or real(text))
    assert chart_blocks(answer, ends) == list(range(300))
    assert chart_blocks(answer, [*ends, None, 0, len(answer) + 1])[-3:] == [None, None, None]
    assert len(parses) == 2


def test_a_small_event_of_many_keys_stores_a_table_within_the_caps(settings):
    # ~43 KB on the wire: 1,500 rows of two keys each, all different. Without a column cap the
    # table was 1,500 rows x 3,000 columns: millions of cells on every view.
    settings.CHART_MAX_ROWS, settings.CHART_MAX_COLUMNS = 1_000, 20
    rows = [{f"a{i}": i, f"b{i}": -i} for i in range(1_500)]
    event = chart_event(vega_lite_spec={"data": {"values": rows}, "mark": "point"})
    sanitized = storable_event(event).data["sanitized"]
    assert sanitized["spec"] is None and sanitized["note"].startswith(UNSAFE)
    table = sanitized["table"]
    assert len(table["columns"]) == 20 and len(table["rows"]) == 1_000
    assert (table["total_rows"], table["total_columns"]) == (1_500, 3_000)
    assert len(json.dumps(table)) < 200_000
    html = event_view(1, event_from_data(storable_event(event).data))["chart_html"]
    assert "Showing 1,000 of 1,500 rows and 20 of 3,000 columns." in html


@pytest.mark.parametrize(
    "spec",
    [
        {  # 20 views, each drawing all 1,000 rows
            "data": {"values": categories(1_000)},
            "repeat": [f"f{i}" for i in range(20)],
            "spec": {"mark": "point", "encoding": {"x": {"field": {"repeat": "repeat"}}}},
        },
        bar_spec(  # folded into 50 rows for each of 1,000
            data={"values": categories(1_000)},
            transform=[{"fold": [f"f{i}" for i in range(50)]}],
        ),
        bar_spec(  # a density of 500 steps for every company
            data={"values": categories(1_000)},
            transform=[{"density": "revenue", "groupby": ["company"], "steps": 500}],
        ),
    ],
    ids=["repeat", "fold", "grouped density"],
)
def test_transforms_and_views_that_would_draw_too_many_marks_are_refused(spec):
    with pytest.raises(UnsafeSpec, match="marks"):
        sanitize_spec(spec)


def test_an_ungrouped_density_of_many_steps_is_drawn():
    spec = bar_spec(data={"values": categories(1_000)}, transform=[{"density": "revenue"}])
    assert sanitize_spec(spec)["transform"] == [{"density": "revenue"}]


@pytest.mark.django_db
def test_charts_stored_under_older_rules_are_put_through_the_allow_list(user):
    import importlib

    from django.apps import apps

    from chats.models import Chat, Turn

    migration = importlib.import_module("chats.migrations.0013_charts_allow_list")
    old_table = {
        "columns": [f"k{i}" for i in range(3_000)],
        "rows": [[str(i)] * 3_000 for i in range(2)],
        "total": 2,
    }
    drawn = {"title": "Fine", "spec": bar_spec(), "note": "", "table": old_table, "block": 0}
    dated = {**drawn, "title": "Dated", "spec": with_x(scale={"domain": [{"year": "1+1"}]})}
    turn = Turn.objects.create(
        chat=Chat.objects.create(owner=user), question="q", status="complete", charts=[drawn, dated]
    )
    migration.charts_under_the_allow_list(apps, None)
    fine, refused = Turn.objects.get(pk=turn.pk).charts
    assert fine["spec"] == sanitize_spec(bar_spec()) and fine["block"] == 0
    assert refused["spec"] is None and refused["note"].startswith(UNSAFE)
    for chart in (fine, refused):
        assert len(chart["table"]["columns"]) == 20 and len(chart["table"]["rows"][0]) == 20
        assert (chart["table"]["total_rows"], chart["table"]["total_columns"]) == (2, 3_000)
