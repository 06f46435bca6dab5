"""What answers cite, from GROUNDING references to footnotes: the provider-neutral core.

`references` holds the typed inputs every adapter builds (`Citation`, `SourceDocument`,
`ToolCall`) and `sources` the rules for a source's name, link and date; `resolve` judges and
numbers references against the whole answer (pure), by the one marker rule of `markers`;
`evidence` and `claims` group claims with their passages and check their figures; `render`
writes Markdown and JSON, `render_html` (with `html_markers`) sanitised HTML; `services` stores a
turn's citations and `selectors` rebuilds them through the same resolver; `admin` and
`review_admin` show them to reviewers. It imports nothing of `chats` (its models name
"chats.Turn" as a string); a chat's export is `chats.answer.export`.
"""
