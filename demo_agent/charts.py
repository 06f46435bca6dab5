"""The demo agent's charts: a bar chart of the corpus figures behind an answer (docs/PROTOCOL.md,
"Events", CHART).

Asked for with `tools_configs.python_code_execution.chart_generation_enabled` (the cookbook
client's field); the real agent sends CHART events only then. The figures are the earnings
calendar's consensus revenue for the companies the answer cites (all of them when it cites none),
so the chart is built from the same fictional corpus the answer is.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Sequence
from typing import Any

from demo_agent.corpus import Corpus

_BILLIONS = re.compile(r"\$\s*([0-9]+(?:\.[0-9]+)?)\s*billion", re.IGNORECASE)


def wants_charts(body: Any) -> bool:
    """Whether the request asks for charts (`tools_configs.python_code_execution`)."""
    tools = body.get("tools_configs") if isinstance(body, dict) else None
    code = tools.get("python_code_execution") if isinstance(tools, dict) else None
    return isinstance(code, dict) and code.get("chart_generation_enabled") is True


def revenue_chart(
    corpus: Corpus, company_keys: Sequence[str], answer: str
) -> dict[str, Any] | None:
    """A CHART event for `answer`, placed after its first paragraph; None without figures."""
    wanted = [k for k in dict.fromkeys(company_keys) if corpus.calendar_entry(k)]
    keys = wanted or [entry.company for entry in corpus.calendar]
    rows = []
    for key in keys:
        entry = corpus.calendar_entry(key)
        company = corpus.company(key)
        match = _BILLIONS.search(entry.consensus_revenue) if entry else None
        if entry and company and match:
            rows.append(
                {
                    "company": company.name,
                    "period": entry.period,
                    "consensus_revenue_usd_bn": float(match.group(1)),
                }
            )
    if not rows:
        return None
    title = "Consensus revenue for the next reported quarter"
    first_paragraph = answer.find("\n\n")
    end = first_paragraph if first_paragraph > 0 else len(answer)
    return {
        "type": "CHART",
        "chart_id": f"chart-{secrets.token_hex(4)}",
        "title": title,
        "chart_type": "bar",
        "caption": "Analysts' consensus revenue estimates, in US$ billion, from the demo "
        "corpus's earnings calendar (fictional data).",
        "data_points": len(rows),
        "start": 0,
        "end": end,
        "vega_lite_spec": {
            "$schema": "https://vega.github.io/schema/vega-lite/v5.json",
            "title": title,
            "data": {"values": rows},
            "mark": {"type": "bar", "tooltip": True},
            "encoding": {
                "x": {"field": "company", "type": "nominal", "sort": "-y", "title": "Company"},
                "y": {
                    "field": "consensus_revenue_usd_bn",
                    "type": "quantitative",
                    "title": "Consensus revenue (US$ bn)",
                },
            },
            "width": 420,
            "height": 240,
        },
    }
