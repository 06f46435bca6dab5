"""What answers cite, from GROUNDING references to footnotes.

`resolve` judges and numbers references against the whole answer (pure); `render` writes
Markdown and JSON, `render_html` sanitised HTML; `services` stores a turn's citations and
`selectors` rebuilds them through the same resolver; `export` writes answers as one document.
"""
