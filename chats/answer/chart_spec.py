"""The Vega-Lite a chart may use: an allow-list of what this site draws, with a bound on every
number that sets how much work drawing takes.

A CHART's `vega_lite_spec` is untrusted. Vega-Lite loads data and images from URLs, links marks
to URLs, and evaluates expressions: `expr`, signals, `calculate` and filter strings, `labelExpr`,
and the parts of a date object (`{"year": "1000 + 1000 + 24"}` is compiled into an expression,
so a backtracking regex in it keeps a tab busy). Its numbers set the work of drawing: a huge
`maxbins`, `tickCount`, `repeat`, impute key sequence or density step count, or a size of
millions of pixels (given, or a per-category `step` times many categories), freezes the tab.

`sanitize_spec` rebuilds the spec from what the allow-list below names, property by property:
  - anything not named is left out (loads, links, params, config, styling this site does not
    draw), and so is a property whose value is an expression or a signal (`{"expr": ...}`);
  - a rule broken is refused whole (`UnsafeSpec`): an expression transform or a date part that
    is not a number, a number past its bound, data that is not inline or past the row, column
    or cell caps. The chart is then shown as its data table (`chats.answer.charts`).
A drawn size that only the data's categories decide (`step`) is bounded from the data itself:
when it could pass MAX_SIZE_PX the view gets a fixed size instead, and its bands shrink to fit.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

MAX_SPEC_BYTES = 256 * 1024
MAX_DEPTH = 24  # views within views, predicates within predicates
MAX_TEXT = 1_000  # characters of a title, label or other text drawn
MAX_SIZE_PX = 2_000  # a view's width or height, however it is given
DEFAULT_STEP_PX = 20  # Vega-Lite's width of one category when no size is given
MAX_VIEWS = 100  # unit views drawn: facets x repeats x concatenated and layered views
MAX_MARKS = 5_000  # marks drawn: rows (as transforms may multiply them) x views that draw all
MAX_LIST = 100  # values listed in a scale domain, axis or legend, a sort order, a fold
MAX_TICKS = 100  # tickCount, scale.nice as a count
MAX_BINS = 200  # bin.maxbins
MAX_STEPS = 500  # density steps, impute keys, quantiles, regression order is far smaller
MAX_REPEAT = 20  # fields in one repeat direction
MAX_LAYERS = 20


class UnsafeSpec(ValueError):
    """The spec cannot be drawn safely; the message says why, in words for the reader."""


@dataclass
class DataCaps:
    """The caps on a chart's inline data (settings CHART_MAX_ROWS, _COLUMNS, _CELL_CHARS)."""

    rows: int
    columns: int
    cell_chars: int


_DROP = object()  # a property left out


def sanitize_spec(spec: Any, caps: DataCaps) -> dict[str, Any]:
    """Return a copy of `spec` that draws without loading or evaluating anything, within the
    bounds above, or raise UnsafeSpec."""
    if not isinstance(spec, dict):
        raise UnsafeSpec("The chart came without a drawable specification.")
    try:
        size = len(json.dumps(spec, ensure_ascii=False).encode())
    except (TypeError, ValueError, RecursionError) as error:
        raise UnsafeSpec("The chart's specification is not plain JSON.") from error
    if size > MAX_SPEC_BYTES:
        raise UnsafeSpec(f"The chart's specification is larger than {MAX_SPEC_BYTES // 1024} KB.")
    walk = _Walk(caps)
    cleaned = walk.view(spec, depth=0)
    if not _has_mark(cleaned):
        raise UnsafeSpec("The chart's specification has no marks to draw.")
    walk.check_marks()
    _bound_step_sizes(cleaned, walk)
    return cleaned


def _has_mark(view: dict[str, Any]) -> bool:
    if "mark" in view:
        return True
    nested = [v for key in VIEW_LISTS for v in view.get(key) or ()]
    if isinstance(view.get("spec"), dict):
        nested.append(view["spec"])
    return any(_has_mark(v) for v in nested if isinstance(v, dict))


# --- Kinds of value ---------------------------------------------------------------------------
# A kind takes a value and returns it cleaned, returns _DROP to leave the property out, or
# raises UnsafeSpec when the value breaks a rule (a number past its bound, a date part that is
# not a number).

Kind = Callable[[Any], Any]


def _words(names: str) -> tuple[str, ...]:
    return tuple(names.split())


def _is_expression(value: Any) -> bool:
    return isinstance(value, dict) and ("expr" in value or "signal" in value)


def text(value: Any) -> Any:
    """Text drawn as text (titles, labels): a string or lines of strings."""
    if isinstance(value, str):
        return value[:MAX_TEXT]
    if isinstance(value, list) and len(value) <= 10 and all(isinstance(v, str) for v in value):
        return [v[:MAX_TEXT] for v in value]
    return None if value is None else _DROP


_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,39}\Z")


def word(value: Any) -> Any:
    """An enumerated name (orient, type, interpolate, ...): letters, digits, - and _."""
    return value if isinstance(value, str) and _WORD.match(value) else _DROP


_COLOR = re.compile(r"(#[0-9A-Fa-f]{3,8}|[A-Za-z]{1,30}|(rgb|rgba|hsl|hsla)\([0-9.,%\s]{1,60}\))\Z")


def color(value: Any) -> Any:
    """A CSS colour by hex, name or rgb()/hsl(): never `url(...)`, which would load."""
    return value if isinstance(value, str) and _COLOR.match(value) else _DROP


def boolean(value: Any) -> Any:
    return value if isinstance(value, bool) else _DROP


def number(low: float, high: float, *, integer: bool = False, what: str = "") -> Kind:
    """A finite number in [low, high]; past the bound the whole chart is refused."""

    def kind(value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return _DROP
        if not math.isfinite(value) or not low <= value <= high:
            name = what or "a number"
            raise UnsafeSpec(f"The chart asks for {name} of {value:g}; the limit is {high:g}.")
        return int(value) if integer else value

    return kind


def either(*kinds: Kind) -> Kind:
    def kind(value: Any) -> Any:
        for option in kinds:
            cleaned = option(value)
            if cleaned is not _DROP:
                return cleaned
        return _DROP

    return kind


def one_of(*names: Any) -> Kind:
    allowed = frozenset(names)
    return lambda value: value if isinstance(value, str | bool) and value in allowed else _DROP


def list_of(item: Kind, limit: int = MAX_LIST, *, what: str = "a list") -> Kind:
    def kind(value: Any) -> Any:
        if not isinstance(value, list):
            return _DROP
        if len(value) > limit:
            raise UnsafeSpec(f"The chart lists {len(value):,} items in {what}, past {limit}.")
        cleaned = [item(v) for v in value]
        return [v for v in cleaned if v is not _DROP]

    return kind


def scalar(value: Any) -> Any:
    if isinstance(value, str):
        return value[:MAX_TEXT]
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else _DROP
    return _DROP


_DATE_PARTS = {
    "year": number(-100_000, 100_000, what="a date's year"),
    "quarter": number(1, 4, what="a date's quarter"),
    "month": number(1, 12, what="a date's month"),
    "date": number(1, 31, what="a date's day"),
    "day": number(0, 7, what="a date's weekday"),
    "hours": number(0, 24, what="a date's hours"),
    "minutes": number(0, 60, what="a date's minutes"),
    "seconds": number(0, 60, what="a date's seconds"),
    "milliseconds": number(0, 1000, what="a date's milliseconds"),
}


def date_time(value: Any) -> Any:
    """A date object: Vega-Lite compiles its parts into an expression, so numbers only."""
    if not isinstance(value, dict):
        return _DROP
    cleaned: dict[str, Any] = {}
    for key, part in value.items():
        if key == "utc":
            if isinstance(part, bool):
                cleaned[key] = part
            continue
        check = _DATE_PARTS.get(key)
        if check is None:
            continue
        if isinstance(part, bool) or not isinstance(part, int | float):
            raise UnsafeSpec("The chart has a date whose parts are not all numbers.")
        cleaned[key] = check(part)
    return cleaned if cleaned else _DROP


value_or_date = either(scalar, date_time)


def drawn_value(value: Any) -> Any:
    """A constant a mark is drawn with: a string never holds `url(`, which an SVG would load."""
    cleaned = scalar(value)
    if isinstance(cleaned, str) and "url(" in "".join(cleaned.split()).lower():
        return _DROP
    return cleaned


def object_of(properties: dict[str, Kind]) -> Kind:
    """An object of the named properties; any other is left out, as is an expression."""

    def kind(value: Any) -> Any:
        if not isinstance(value, dict) or _is_expression(value):
            return _DROP
        cleaned = {}
        for key, item in value.items():
            check = properties.get(key)
            if check is None or _is_expression(item):
                continue
            result = check(item)
            if result is not _DROP:
                cleaned[key] = result
        return cleaned

    return kind


def nullable(kind: Kind) -> Kind:
    return lambda value: None if value is None else kind(value)


# --- Properties drawn ------------------------------------------------------------------------

px = number(-MAX_SIZE_PX, MAX_SIZE_PX, what="a size or offset in pixels")
positive_px = number(0, MAX_SIZE_PX, what="a size in pixels")
opacity = number(0, 1, what="an opacity")
angle = number(-360, 360, what="an angle")
font_weight = either(word, number(100, 900, what="a font weight"))
dash = list_of(number(0, 100, what="a dash length"), 8, what="a dash pattern")
count = number(0, MAX_TICKS, integer=True, what="a tick count")
field_name = either(lambda v: v[:200] if isinstance(v, str) else _DROP)
field_ref = either(field_name, object_of({"repeat": word}))
field_list = list_of(field_name, MAX_LIST, what="a list of fields")
format_text = lambda v: v[:100] if isinstance(v, str) else _DROP  # noqa: E731  (d3 format)

_FONT = {
    "font": text,
    "fontSize": positive_px,
    "fontStyle": word,
    "fontWeight": font_weight,
    "color": color,
    "limit": positive_px,
}

TITLE_OBJECT = object_of(
    {
        "text": text,
        "subtitle": text,
        "anchor": word,
        "orient": word,
        "align": word,
        "baseline": word,
        "offset": px,
        "angle": angle,
        "dx": px,
        "dy": px,
        "subtitleColor": color,
        "subtitleFontSize": positive_px,
        "subtitleFont": text,
        "subtitleFontWeight": font_weight,
        "subtitlePadding": px,
        "frame": word,
        **_FONT,
    }
)
TITLE = either(text, TITLE_OBJECT)

_GUIDE_TEXT = {
    "title": nullable(text),
    "titleColor": color,
    "titleFont": text,
    "titleFontSize": positive_px,
    "titleFontWeight": font_weight,
    "titleLimit": positive_px,
    "titlePadding": px,
    "titleAngle": angle,
    "titleAlign": word,
    "titleAnchor": word,
    "titleBaseline": word,
    "titleOrient": word,
    "labels": boolean,
    "labelAngle": angle,
    "labelAlign": word,
    "labelBaseline": word,
    "labelColor": color,
    "labelFont": text,
    "labelFontSize": positive_px,
    "labelFontWeight": font_weight,
    "labelLimit": positive_px,
    "labelOverlap": either(boolean, word),
    "labelPadding": px,
    "labelOffset": px,
    "labelSeparation": px,
    "labelFlush": either(boolean, px),
    "format": format_text,
    "orient": word,
    "offset": px,
    "padding": px,
    "tickCount": count,  # a number only: a time interval ("millisecond") can mean trillions
    "values": list_of(value_or_date, MAX_LIST, what="a guide's values"),
    "zindex": number(0, 100, integer=True, what="a z-index"),
}

AXIS = nullable(
    object_of(
        {
            **_GUIDE_TEXT,
            "bandPosition": opacity,
            "domain": boolean,
            "domainColor": color,
            "domainDash": dash,
            "domainOpacity": opacity,
            "domainWidth": positive_px,
            "grid": boolean,
            "gridColor": color,
            "gridDash": dash,
            "gridOpacity": opacity,
            "gridWidth": positive_px,
            "maxExtent": positive_px,
            "minExtent": positive_px,
            "position": px,
            "tickBand": word,
            "tickColor": color,
            "tickDash": dash,
            "tickExtra": boolean,
            "tickMinStep": number(0, 1e15, what="a tick step"),
            "tickOffset": px,
            "tickOpacity": opacity,
            "tickRound": boolean,
            "ticks": boolean,
            "tickSize": px,
            "tickWidth": positive_px,
            "translate": px,
        }
    )
)

LEGEND = nullable(
    object_of(
        {
            **_GUIDE_TEXT,
            "type": one_of("symbol", "gradient"),
            "direction": word,
            "columns": number(0, 20, integer=True, what="a legend's columns"),
            "columnPadding": px,
            "rowPadding": px,
            "clipHeight": positive_px,
            "fillColor": color,
            "strokeColor": color,
            "gradientLength": positive_px,
            "gradientThickness": positive_px,
            "legendX": px,
            "legendY": px,
            "symbolType": word,
            "symbolSize": number(0, 10_000, what="a legend symbol's size"),
            "symbolFillColor": color,
            "symbolStrokeColor": color,
            "symbolStrokeWidth": positive_px,
            "symbolOpacity": opacity,
            "symbolLimit": number(0, MAX_LIST, integer=True, what="a legend's symbol limit"),
        }
    )
)

SCALE = nullable(
    object_of(
        {
            "type": word,
            "domain": either(
                list_of(value_or_date, MAX_LIST, what="a scale's domain"),
                one_of("unaggregated"),
            ),
            "domainMin": value_or_date,
            "domainMax": value_or_date,
            "domainMid": number(-1e15, 1e15),
            "range": either(list_of(either(color, number(-1e6, 1e6)), MAX_LIST), word),
            "rangeMin": px,
            "rangeMax": px,
            "scheme": either(
                word,
                object_of(
                    {
                        "name": word,
                        "count": number(0, MAX_LIST, integer=True, what="a scheme's colours"),
                        "extent": list_of(opacity, 2),
                    }
                ),
            ),
            "reverse": boolean,
            "round": boolean,
            "clamp": boolean,
            "zero": boolean,
            "nice": either(boolean, number(0, MAX_TICKS, integer=True, what="a nice tick count")),
            "padding": px,
            "paddingInner": opacity,
            "paddingOuter": number(0, 10),
            "align": opacity,
            "exponent": number(-10, 10, what="a scale exponent"),
            "base": number(2, 100, what="a log scale's base"),
            "constant": number(1e-9, 1e9, what="a symlog constant"),
            "interpolate": word,
        }
    )
)

BIN_PARAMS = object_of(
    {
        # maxbins alone sets the step: a given `step` or `steps` list makes span/step bins.
        "maxbins": number(1, MAX_BINS, integer=True, what="maxbins"),
        "minstep": number(0, 1e15, what="a bin's minimum step"),
        "nice": boolean,
        "extent": list_of(number(-1e15, 1e15, what="a bin's extent"), 2),
        "anchor": number(-1e15, 1e15),
        "binned": boolean,
    }
)
BIN = either(boolean, one_of("binned"), BIN_PARAMS)

_TIME_UNIT = re.compile(
    r"(binned)?(utc)?(year|quarter|month|week|dayofyear|day|date|hours|minutes|seconds"
    r"|milliseconds)+\Z"
)


def time_unit_name(value: Any) -> Any:
    return value if isinstance(value, str) and _TIME_UNIT.match(value) else _DROP


TIME_UNIT = either(
    time_unit_name,
    object_of(
        {
            "unit": time_unit_name,
            "step": number(1, 1000, integer=True, what="a time unit's step"),
            "utc": boolean,
        }
    ),
)

_AGGREGATE_OPS = _words(
    "argmax argmin average count distinct max mean median min missing product q1 q3 ci0 "
    "ci1 stderr stdev stdevp sum valid values variance variancep exponential exponentialb"
)
AGGREGATE = either(one_of(*_AGGREGATE_OPS), object_of({"argmax": field_name, "argmin": field_name}))
ORDER = one_of("ascending", "descending")
_SORT_WORD = re.compile(r"-?[A-Za-z][A-Za-z0-9]{0,20}\Z")
SORT = nullable(
    either(
        lambda v: v if isinstance(v, str) and _SORT_WORD.match(v) else _DROP,  # "-y"
        list_of(value_or_date, MAX_LIST, what="a sort order"),
        object_of({"field": field_name, "op": one_of(*_AGGREGATE_OPS), "order": ORDER}),
        object_of({"encoding": word, "order": ORDER}),
    )
)


def impute_keyvals(value: Any) -> Any:
    """Impute keys: a list, or a sequence {start, stop, step} with at most MAX_STEPS keys."""
    if isinstance(value, list):
        return list_of(scalar, MAX_STEPS, what="impute keys")(value)
    if not isinstance(value, dict):
        return _DROP
    parts = {k: value.get(k) for k in ("start", "stop", "step")}
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in parts.values()):
        raise UnsafeSpec("The chart's impute keys are not a plain sequence of numbers.")
    start, stop, step = parts["start"], parts["stop"], parts["step"]
    keys = (stop - start) / step if step and math.isfinite(step) else math.inf
    if not math.isfinite(keys) or not 0 <= keys <= MAX_STEPS:
        raise UnsafeSpec(f"The chart imputes more than {MAX_STEPS} keys.")
    return {"start": start, "stop": stop, "step": step}


frame = list_of(nullable(number(-(10**6), 10**6, integer=True, what="a window frame")), 2)
IMPUTE_PARAMS = object_of(
    {
        "keyvals": impute_keyvals,
        "method": word,
        "value": scalar,
        "frame": frame,
    }
)

HEADER = nullable(object_of({**_GUIDE_TEXT, "labelOrient": word, "titleOrient": word}))

_FIELD_DEF = {
    "field": field_ref,
    "type": one_of("quantitative", "temporal", "ordinal", "nominal"),
    "aggregate": AGGREGATE,
    "bin": BIN,
    "timeUnit": TIME_UNIT,
    "title": nullable(text),
    "sort": SORT,
    "scale": SCALE,
    "axis": AXIS,
    "legend": LEGEND,
    "header": HEADER,
    "stack": nullable(either(boolean, word)),
    "format": format_text,
    "impute": nullable(IMPUTE_PARAMS),
    "value": either(drawn_value, list_of(number(-1e6, 1e6), 8)),
    "datum": either(drawn_value, date_time),
    "bandPosition": opacity,
    "band": opacity,
    "spacing": positive_px,
    "columns": number(0, 20, integer=True, what="a facet's columns"),
}
FIELD_DEF = object_of(_FIELD_DEF)
TOOLTIP = nullable(either(FIELD_DEF, list_of(FIELD_DEF, 20, what="a tooltip")))
CHANNELS = frozenset(
    _words(
        "x y x2 y2 xOffset yOffset xError xError2 yError yError2 color fill stroke opacity "
        "fillOpacity strokeOpacity strokeWidth strokeDash size angle theta theta2 radius "
        "radius2 shape text detail order row column facet key"
    )
)


def encoding(value: Any) -> Any:
    if not isinstance(value, dict):
        return _DROP
    cleaned = {}
    for channel, definition in value.items():
        if channel == "tooltip":
            result = TOOLTIP(definition)
        elif channel in ("detail", "order") and isinstance(definition, list):
            result = list_of(FIELD_DEF, 20, what="a channel")(definition)
        elif channel in CHANNELS:
            result = FIELD_DEF(definition)
        else:
            continue
        if result is not _DROP:
            cleaned[channel] = result
    return cleaned


_MARK_TYPES = _words(
    "arc area bar boxplot circle errorband errorbar line point rect rule square text tick trail"
)
_MARK_STYLE = {
    "color": color,
    "fill": color,
    "stroke": color,
    "opacity": opacity,
    "fillOpacity": opacity,
    "strokeOpacity": opacity,
    "strokeWidth": positive_px,
    "strokeDash": dash,
    "strokeCap": word,
    "strokeJoin": word,
    "filled": boolean,
    "size": number(0, 100_000, what="a mark's size"),
}
MARK_PART = either(boolean, one_of("transparent"), object_of(_MARK_STYLE))
MARK_PROPERTIES = {
    **_MARK_STYLE,
    **_FONT,
    "type": one_of(*_MARK_TYPES),
    "orient": word,
    "align": word,
    "baseline": word,
    "interpolate": word,
    "tension": opacity,
    "point": MARK_PART,
    "line": MARK_PART,
    "dx": px,
    "dy": px,
    "text": text,
    "angle": angle,
    "radius": positive_px,
    "radius2": positive_px,
    "innerRadius": positive_px,
    "outerRadius": positive_px,
    "padAngle": number(0, 10),
    "cornerRadius": positive_px,
    "cornerRadiusEnd": positive_px,
    "thickness": positive_px,
    "binSpacing": positive_px,
    "width": either(positive_px, object_of({"band": opacity})),
    "height": either(positive_px, object_of({"band": opacity})),
    "clip": boolean,
    "tooltip": either(boolean, object_of({"content": one_of("data", "encoding")})),
    "invalid": nullable(word),
    "extent": either(one_of("min-max"), number(0, 100, what="a box plot's extent")),
    "median": MARK_PART,
    "box": MARK_PART,
    "rule": MARK_PART,
    "ticks": MARK_PART,
    "outliers": MARK_PART,
    "borders": MARK_PART,
    "band": MARK_PART,
    "shape": word,
    "ellipsis": text,
    "minBandSize": positive_px,
}
_MARK_OBJECT = object_of(MARK_PROPERTIES)


def mark(value: Any) -> Any:
    kind = value.get("type") if isinstance(value, dict) else value
    if kind not in _MARK_TYPES:
        raise UnsafeSpec(f"The chart uses a mark this site does not draw ({str(kind)[:40]}).")
    return _MARK_OBJECT(value) if isinstance(value, dict) else kind


# --- Transforms ------------------------------------------------------------------------------

_as = either(field_name, list_of(field_name, 2))
_groupby = field_list
_agg_op = object_of({"op": one_of(*_AGGREGATE_OPS), "field": field_name, "as": field_name})
_window_op = object_of(
    {
        "op": word,
        "field": field_name,
        "param": number(0, 10**6, integer=True, what="a window parameter"),
        "as": field_name,
    }
)
_sort_fields = list_of(object_of({"field": field_name, "order": ORDER}), 10)
_FIELD_PREDICATE = {
    "field": field_name,
    "timeUnit": TIME_UNIT,
    "equal": value_or_date,
    "lt": value_or_date,
    "lte": value_or_date,
    "gt": value_or_date,
    "gte": value_or_date,
    "range": list_of(nullable(value_or_date), 2),
    "oneOf": list_of(value_or_date, MAX_STEPS, what="a filter's values"),
    "valid": boolean,
}

# Each transform this site draws, by the key that names it: the properties it may have.
TRANSFORMS: dict[str, dict[str, Kind]] = {
    "aggregate": {
        "aggregate": list_of(_agg_op, 20, what="an aggregate"),
        "groupby": _groupby,
    },
    "joinaggregate": {
        "joinaggregate": list_of(_agg_op, 20, what="a join aggregate"),
        "groupby": _groupby,
    },
    "bin": {"bin": BIN, "field": field_name, "as": _as},
    "timeUnit": {"timeUnit": TIME_UNIT, "field": field_name, "as": field_name},
    "fold": {"fold": list_of(field_name, 50, what="a fold"), "as": _as},
    "stack": {
        "stack": field_name,
        "groupby": _groupby,
        "offset": word,
        "sort": _sort_fields,
        "as": _as,
    },
    "window": {
        "window": list_of(_window_op, 20, what="a window"),
        "frame": frame,
        "ignorePeers": boolean,
        "groupby": _groupby,
        "sort": _sort_fields,
    },
    "impute": {
        "impute": field_name,
        "key": field_name,
        "keyvals": impute_keyvals,
        "groupby": _groupby,
        "method": word,
        "value": scalar,
        "frame": frame,
    },
    "density": {
        "density": field_name,
        "groupby": _groupby,
        "cumulative": boolean,
        "counts": boolean,
        "bandwidth": number(0, 1e15, what="a density bandwidth"),
        "extent": list_of(number(-1e15, 1e15), 2),
        "steps": number(1, MAX_STEPS, integer=True, what="density steps"),
        "minsteps": number(1, MAX_STEPS, integer=True, what="density steps"),
        "maxsteps": number(1, MAX_STEPS, integer=True, what="density steps"),
        "as": _as,
    },
    "loess": {
        "loess": field_name,
        "on": field_name,
        "groupby": _groupby,
        "bandwidth": opacity,
        "as": _as,
    },
    "regression": {
        "regression": field_name,
        "on": field_name,
        "groupby": _groupby,
        "method": one_of("linear", "log", "exp", "pow", "quad", "poly"),
        "order": number(1, 10, integer=True, what="a regression's order"),
        "extent": list_of(number(-1e15, 1e15), 2),
        "as": _as,
    },
    "quantile": {
        "quantile": field_name,
        "groupby": _groupby,
        "probs": list_of(opacity, MAX_LIST, what="quantiles"),
        "step": number(1 / MAX_STEPS, 1, what="a quantile step"),  # 1/step quantiles
        "as": _as,
    },
    "sample": {"sample": number(0, 10**6, integer=True, what="a sample")},
    "pivot": {
        "pivot": field_name,
        "value": field_name,
        "groupby": _groupby,
        "limit": number(0, MAX_LIST, integer=True, what="a pivot's limit"),
        "op": one_of(*_AGGREGATE_OPS),
    },
    "flatten": {"flatten": field_list, "as": field_list},
}
# Transforms that compute with expressions or reach other data: refused, not dropped, since
# the chart would otherwise draw different data from what its author meant.
EXPRESSION_TRANSFORMS = frozenset({"calculate", "lookup", "extent", "filter"})


def filter_predicate(value: Any, depth: int) -> Any:
    """A field predicate, or and/or/not of them: a string would be an expression."""
    if depth > MAX_DEPTH:
        raise UnsafeSpec("The chart's filter is nested too deeply.")
    if isinstance(value, dict) and len(value) == 1:
        ((op, inner),) = value.items()
        if op in ("and", "or") and isinstance(inner, list) and 0 < len(inner) <= 20:
            return {op: [filter_predicate(p, depth + 1) for p in inner]}
        if op == "not":
            return {"not": filter_predicate(inner, depth + 1)}
    if (
        isinstance(value, dict)
        and isinstance(value.get("field"), str)
        and set(value) <= set(_FIELD_PREDICATE)
        and not any(map(_is_expression, value.values()))
    ):
        cleaned = object_of(_FIELD_PREDICATE)(value)
        if set(cleaned) == set(value):
            return cleaned
    raise UnsafeSpec("The chart filters its data with an expression.")


def transforms(value: Any) -> Any:
    if not isinstance(value, list):
        return _DROP
    if len(value) > 50:
        raise UnsafeSpec("The chart has more than 50 transforms.")
    kept = []
    for step in value:
        if not isinstance(step, dict):
            raise UnsafeSpec("The chart has a transform this site does not draw.")
        names = set(step) & (set(TRANSFORMS) | EXPRESSION_TRANSFORMS)
        if len(names) != 1:
            raise UnsafeSpec("The chart has a transform this site does not draw.")
        (name,) = names
        if name == "filter":
            kept.append({"filter": filter_predicate(step["filter"], 0)})
            continue
        if name in EXPRESSION_TRANSFORMS:
            raise UnsafeSpec(f"The chart computes its data with an expression ({name}).")
        cleaned = object_of(TRANSFORMS[name])(step)
        if name not in cleaned:
            raise UnsafeSpec(f"The chart has a {name} transform it does not fill in.")
        kept.append(cleaned)
    return kept


# --- Views -----------------------------------------------------------------------------------

VIEW_LISTS = ("layer", "hconcat", "vconcat", "concat")
_VIEW_STYLE = {
    "title": TITLE,
    "description": text,
    "name": word,
    "background": color,
    "padding": either(px, object_of({s: px for s in ("top", "bottom", "left", "right")})),
    "spacing": either(positive_px, object_of({"row": positive_px, "column": positive_px})),
    "columns": number(0, 20, integer=True, what="a layout's columns"),
    "align": either(word, object_of({"row": word, "column": word})),
    "bounds": word,
    "center": boolean,
    "resolve": object_of(
        {
            part: object_of({c: word for c in ("x", "y", "color", "size", "shape", "opacity")})
            for part in ("scale", "axis", "legend")
        }
    ),
    "view": object_of(
        {
            "fill": color,
            "stroke": nullable(color),
            "strokeWidth": positive_px,
            "cornerRadius": positive_px,
            "opacity": opacity,
        }
    ),
    "autosize": either(word, object_of({"type": word, "contains": word, "resize": boolean})),
}


@dataclass
class _Walk:
    caps: DataCaps
    rows: int = 0  # data rows seen, across every view
    views: int = 0
    distinct: dict[str, set[Any]] = field(default_factory=dict)  # values of each data field
    derived: set[str] = field(default_factory=set)  # fields a transform writes
    growth: int = 1  # how many rows the transforms may make of one (fold, grouped impute...)
    extra: int = 0  # rows they may add whatever the data (an ungrouped density's steps)
    draws: int = 0  # unit views that each draw all their rows (facet cells split them)

    def view(self, spec: Any, depth: int, multiplier: int = 1) -> dict[str, Any]:
        if depth > MAX_DEPTH:
            raise UnsafeSpec("The chart's specification is nested too deeply.")
        if not isinstance(spec, dict):
            raise UnsafeSpec("The chart's specification is malformed.")
        view: dict[str, Any] = {}
        for key, check in _VIEW_STYLE.items():
            if key in spec and not _is_expression(spec[key]):
                result = check(spec[key])
                if result is not _DROP:
                    view[key] = result
        for key in ("width", "height"):
            if key in spec:
                size = _size(spec[key], key)
                if size is not _DROP:
                    view[key] = size
        if "data" in spec:
            view["data"] = self.data(spec["data"])
        if "transform" in spec:
            cleaned = transforms(spec["transform"])
            if cleaned is not _DROP:
                self.note_transforms(cleaned)
                view["transform"] = cleaned
        if "mark" in spec:
            view["mark"] = mark(spec["mark"])
        if "encoding" in spec:
            cleaned = encoding(spec["encoding"])
            if cleaned is not _DROP:
                view["encoding"] = cleaned
        multiplier *= self.repeats(spec, view)
        if isinstance(spec.get("facet"), dict):
            view["facet"] = self.facet(spec["facet"])
            multiplier *= self.cells(view["facet"])
        if "mark" in view:
            self.count_views(multiplier, self.cells(view.get("encoding") or {}))
        for key in VIEW_LISTS:
            items = spec.get(key)
            if items is None:
                continue
            limit = MAX_LAYERS if key == "layer" else MAX_VIEWS
            if not isinstance(items, list) or len(items) > limit:
                raise UnsafeSpec(f"The chart's {key} has more than {limit} views.")
            view[key] = [self.view(item, depth + 1, multiplier) for item in items]
        if "spec" in spec:
            view["spec"] = self.view(spec["spec"], depth + 1, multiplier)
        return view

    def count_views(self, multiplier: int, cells: int) -> None:
        self.views += multiplier * cells
        self.draws += multiplier
        if self.views > MAX_VIEWS:
            raise UnsafeSpec(f"The chart would draw more than {MAX_VIEWS} views.")

    def check_marks(self) -> None:
        marks = self.draws * self.row_bound()
        if marks > MAX_MARKS:
            raise UnsafeSpec(f"The chart would draw about {marks:,} marks, past {MAX_MARKS:,}.")

    def row_bound(self) -> int:
        """An upper bound on the rows a view draws, after the transforms."""
        return max(self.rows, 1) * self.growth + self.extra

    def repeats(self, spec: dict[str, Any], view: dict[str, Any]) -> int:
        """Keep `repeat` (fields to repeat a view over); return how many views it makes."""
        repeat = spec.get("repeat")
        if repeat is None:
            return 1
        if isinstance(repeat, list):
            repeat = {"repeat": repeat}
        if not isinstance(repeat, dict):
            raise UnsafeSpec("The chart's repeat is malformed.")
        cleaned, views = {}, 1
        for direction in ("repeat", "row", "column", "layer"):
            fields = repeat.get(direction)
            if fields is None:
                continue
            fields = list_of(field_name, MAX_REPEAT, what="a repeat")(fields)
            if fields is _DROP:
                raise UnsafeSpec("The chart's repeat is malformed.")
            cleaned[direction] = fields
            views *= max(len(fields), 1)
        view["repeat"] = cleaned["repeat"] if list(cleaned) == ["repeat"] else cleaned
        return views

    def cells(self, facets: dict[str, Any]) -> int:
        """How many views faceting by these channels (row, column, facet) can make."""
        cells = 1
        for channel in ("row", "column", "facet"):
            if isinstance(facets.get(channel), dict):
                cells *= self.categories(facets[channel])
        if isinstance(facets.get("field"), str):  # a facet operator of one field, wrapped
            cells *= self.categories(facets)
        return cells

    def facet(self, value: dict[str, Any]) -> Any:
        if "field" in value:
            return FIELD_DEF(value)
        return object_of({"row": FIELD_DEF, "column": FIELD_DEF})(value)

    def data(self, value: Any) -> Any:
        """Inline values only: no URL, no generator, no named dataset to look up."""
        if value is None:
            return None  # a layer's "no data of its own"
        if not isinstance(value, dict) or not isinstance(value.get("values"), list):
            raise UnsafeSpec("The chart's data is not included in it (remote data is not loaded).")
        rows = value["values"]
        self.rows += len(rows)
        if self.rows > self.caps.rows:
            raise UnsafeSpec(f"The chart has more than {self.caps.rows:,} rows of data.")
        return {"values": [self.row(row) for row in rows]}

    def row(self, row: Any) -> Any:
        if not isinstance(row, dict):
            return self.cell(row)
        if len(row) > self.caps.columns:
            raise UnsafeSpec(f"The chart's data has more than {self.caps.columns} columns.")
        cleaned = {}
        for key, value in row.items():
            name = str(key)[: self.caps.cell_chars]
            cleaned[name] = value = self.cell(value)
            values = self.distinct.setdefault(name, set())
            if len(values) <= MAX_SIZE_PX:  # enough to tell a step size's bound
                values.add(value)
        return cleaned

    def cell(self, value: Any) -> Any:
        if isinstance(value, str):
            return value[: self.caps.cell_chars]
        if isinstance(value, float) and not math.isfinite(value):
            return None
        if value is None or isinstance(value, bool | int | float):
            return value
        return None  # nested values: Vega-Lite draws scalars; the table shows the original

    def note_transforms(self, steps: list[dict[str, Any]]) -> None:
        """Remember which fields the transforms write, and how many rows they may make of one
        (fold: one per folded field; impute, density, quantile: one per key, step or quantile)."""
        for step in steps:
            for key in ("as", "impute", "key"):
                written = step.get(key)
                for name in written if isinstance(written, list) else [written]:
                    if isinstance(name, str):
                        self.derived.add(name)
            grouped = bool(step.get("groupby"))
            if "fold" in step:
                self.derived.update(("key", "value"))
                self.growth *= max(len(step["fold"]), 1)
                continue
            if "impute" in step:
                keyvals = step.get("keyvals")
                added = len(keyvals) if isinstance(keyvals, list) else MAX_STEPS
            elif "density" in step:
                self.derived.update(("value", "density"))
                added = step.get("steps") or step.get("maxsteps") or 200
            elif "quantile" in step:
                self.derived.update(("prob", "value"))
                probs = step.get("probs")
                added = len(probs) if isinstance(probs, list) else MAX_STEPS
            else:
                continue
            if grouped:  # as many again for every group, and a group may be a single row
                self.growth *= added + 1
            else:
                self.extra += added

    def categories(self, channel: Any) -> int:
        """An upper bound on the categories a discrete channel's field can take."""
        name = channel.get("field") if isinstance(channel, dict) else None
        if isinstance(name, str) and name in self.distinct and name not in self.derived:
            return max(len(self.distinct[name]), 1)
        return self.row_bound()


def _size(value: Any, key: str) -> Any:
    if value == "container":
        return value
    if isinstance(value, dict):
        if _is_expression(value) or "step" not in value:
            return _DROP
        return {"step": number(1, MAX_SIZE_PX, what=f"a {key} step")(value["step"])}
    return number(0, MAX_SIZE_PX, what=f"a {key}")(value)


_DISCRETE = frozenset({"nominal", "ordinal"})


def _is_discrete(definition: Any) -> bool:
    """Nominal or ordinal, given or as Vega-Lite infers it (a plain field is nominal)."""
    if not isinstance(definition, dict):
        return False
    if "type" in definition:
        return definition["type"] in _DISCRETE
    plain = not any(k in definition for k in ("bin", "timeUnit", "aggregate"))
    return plain and "field" in definition


def _channels(view: dict[str, Any], channel: str) -> list[Any]:
    """The definitions of `channel` in a view and in its layers (which share its size)."""
    found = [(view.get("encoding") or {}).get(channel)]
    for layer in view.get("layer") or ():
        found.extend(_channels(layer, channel))
    return [d for d in found if d is not None]


def _bound_step_sizes(view: dict[str, Any], walk: _Walk) -> None:
    """Give each view whose size is counted in steps (one per category: Vega-Lite's default
    for a discrete axis) a fixed size when its categories could make it larger than
    MAX_SIZE_PX: a bar chart of 1,000 companies is then 2,000 px wide, not 20,000."""
    if "mark" in view or "layer" in view:
        for key, channel in (("width", "x"), ("height", "y")):
            size = view.get(key)
            if isinstance(size, int | float) or size == "container":
                continue
            discrete = [d for d in _channels(view, channel) if _is_discrete(d)]
            if not discrete:
                continue  # a continuous axis: Vega-Lite's fixed default size
            step = size["step"] if isinstance(size, dict) else DEFAULT_STEP_PX
            if step * max(walk.categories(d) for d in discrete) > MAX_SIZE_PX:
                view[key] = MAX_SIZE_PX
    for name in ("hconcat", "vconcat", "concat"):
        for item in view.get(name) or ():
            _bound_step_sizes(item, walk)
    if isinstance(view.get("spec"), dict):
        _bound_step_sizes(view["spec"], walk)
