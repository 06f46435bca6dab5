"""Chart specs as an attacker writes them: each would freeze a reader's tab if drawn as sent.

Shared by the sanitiser's tests (what is stored) and the browser's (what every page shows).
`DRAWABLE` are specs near the bounds that are drawn, sized to fit.
"""

from __future__ import annotations

from typing import Any

DATED = [{"day": "2024-01-01", "v": 1}, {"day": "2024-02-01", "v": 2}]
BACKTRACKING = "test(/(a+)+$/, 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab') ? 2024 : 2025"


def dated_spec(**extra: Any) -> dict[str, Any]:
    return {
        "data": {"values": DATED},
        "mark": "line",
        "encoding": {
            "x": {"field": "day", "type": "temporal"},
            "y": {"field": "v", "type": "quantitative"},
        },
        **extra,
    }


def with_x(**x: Any) -> dict[str, Any]:
    return dated_spec(
        encoding={"x": {"field": "day", "type": "temporal", **x}, "y": {"field": "v"}}
    )


ATTACKS = {
    "expression in a date's year (scale domain)": with_x(
        scale={"domain": [{"year": "1000 + 1000 + 24"}, {"year": 2025}]}
    ),
    "expression in a date's month (axis values)": with_x(axis={"values": [{"month": "1+1"}]}),
    "backtracking regex in a date (filter)": dated_spec(
        transform=[{"filter": {"field": "day", "equal": {"year": BACKTRACKING}}}]
    ),
    "backtracking regex in a filter string": dated_spec(
        transform=[{"filter": f"test(/(a+)+$/, datum.day) || {BACKTRACKING}"}]
    ),
    "huge impute key sequence": dated_spec(
        transform=[{"impute": "v", "key": "day", "keyvals": {"start": 0, "stop": 1e9, "step": 1}}]
    ),
    "huge impute in an encoding": with_x(impute={"keyvals": list(range(100_000))}),
    "huge maxbins": dated_spec(
        encoding={"x": {"field": "v", "bin": {"maxbins": 10**9}}, "y": {"aggregate": "count"}}
    ),
    "huge tickCount": with_x(axis={"tickCount": 10**9}),
    "huge legend tickCount": dated_spec(
        encoding={"color": {"field": "v", "legend": {"tickCount": 10**9}}}
    ),
    "huge repeat": {
        "data": {"values": DATED},
        "repeat": [f"f{i}" for i in range(10_000)],
        "spec": {"mark": "bar", "encoding": {"x": {"field": {"repeat": "repeat"}}}},
    },
    "repeat of many views": {
        "data": {"values": DATED},
        "repeat": {"row": [f"r{i}" for i in range(20)], "column": [f"c{i}" for i in range(20)]},
        "spec": {"mark": "point"},
    },
    "huge density steps": dated_spec(transform=[{"density": "v", "steps": 10**8}]),
    "huge density maxsteps": dated_spec(transform=[{"density": "v", "maxsteps": 10**8}]),
    "oversized width": dated_spec(width=50_000_000),
    "oversized step": dated_spec(width={"step": 10**7}),
    "tiny quantile step": dated_spec(transform=[{"quantile": "v", "step": 1e-9}]),
    "log base 1": with_x(scale={"type": "log", "base": 1}),
}


def categories(count: int) -> list[dict[str, Any]]:
    return [{"company": f"c{i}", "revenue": i} for i in range(count)]


DRAWABLE = {
    "900 categories at the default step (made 2,000 px wide)": {
        "data": {"values": categories(900)},
        "mark": "bar",
        "encoding": {
            "x": {"field": "company", "type": "nominal"},
            "y": {"field": "revenue", "type": "quantitative"},
        },
    },
    "100 ticks, 200 bins, 2,000 px": {
        "data": {"values": categories(900)},
        "mark": "bar",
        "width": 2000,
        "height": 400,
        "encoding": {
            "x": {"field": "revenue", "bin": {"maxbins": 200}, "axis": {"tickCount": 100}},
            "y": {"aggregate": "count"},
        },
    },
    "density of 500 steps": dated_spec(transform=[{"density": "v", "steps": 500}])
    | {"encoding": {"x": {"field": "value", "type": "quantitative"}, "y": {"field": "density"}}},
    "a repeat of four views": {
        "data": {"values": [{"a": i, "b": 2 * i, "c": i % 3, "d": -i} for i in range(10)]},
        "repeat": ["a", "b", "c", "d"],
        "spec": {
            "mark": "point",
            "encoding": {
                "x": {"field": {"repeat": "repeat"}, "type": "quantitative"},
                "y": {"field": "a", "type": "quantitative"},
            },
        },
    },
    "five views of 1,000 points": {
        "data": {"values": [{f"f{k}": (i * (k + 1)) % 97 for k in range(5)} for i in range(1_000)]},
        "repeat": [f"f{k}" for k in range(5)],
        "spec": {
            "mark": "point",
            "width": 150,
            "height": 150,
            "encoding": {
                "x": {"field": {"repeat": "repeat"}, "type": "quantitative"},
                "y": {"field": "f0", "type": "quantitative"},
            },
        },
    },
    "dates as numbers": with_x(scale={"domain": [{"year": 2024}, {"year": 2025}]}),
}
