"""What an answer cites: sources (one row per unique document), references, and AUDIT traces."""

from django.db import models
from django.utils import timezone


class Source(models.Model):
    """A document or web result, one row per deduplication key however many answers cite it."""

    class Type(models.TextChoices):
        BIGDATA = "BIGDATA"
        EXTERNAL = "EXTERNAL"
        WEB = "WEB"
        DOCUMENT = "DOCUMENT"
        OTHER = "OTHER"

    key = models.CharField(max_length=600, unique=True, help_text="id, else URL, else headline.")
    type = models.CharField(max_length=16, choices=Type.choices, db_index=True)
    name = models.CharField(max_length=300, blank=True, db_index=True, help_text="The outlet.")
    headline = models.TextField(blank=True)
    url = models.TextField(blank=True)
    published_on = models.DateField(null=True, blank=True)
    label = models.CharField(max_length=400)
    data = models.JSONField(help_text="The source object as first seen.")
    first_seen_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["label"]

    def __str__(self) -> str:
        return self.label


class AuditTrace(models.Model):
    """One entry of an AUDIT event's audit_traces: what a tool call did."""

    turn = models.ForeignKey("chats.Turn", on_delete=models.CASCADE, related_name="audit_traces")
    position = models.PositiveIntegerField()
    tool_id = models.CharField(max_length=200, blank=True, db_index=True)
    audit_type = models.CharField(max_length=100, blank=True)
    title = models.TextField(blank=True, help_text="The search query or the trace's title.")
    results = models.JSONField(
        default=list, blank=True, help_text="The documents the call returned, cited or not."
    )
    data = models.JSONField()

    class Meta:
        ordering = ["turn", "position"]

    def __str__(self) -> str:
        return f"{self.audit_type} {self.tool_id}".strip()

    @property
    def result_headlines(self) -> list[str]:
        return [r["headline"] for r in self.results if isinstance(r, dict) and r.get("headline")]


class Reference(models.Model):
    """One GROUNDING reference: a span of the answer and what supports it."""

    turn = models.ForeignKey("chats.Turn", on_delete=models.CASCADE, related_name="references")
    position = models.PositiveIntegerField(help_text="Arrival order within the turn.")
    start = models.IntegerField(null=True, blank=True)
    end = models.IntegerField(null=True, blank=True)
    tool_name = models.CharField(max_length=200, blank=True)
    audit_id = models.CharField(max_length=200, blank=True)
    source = models.ForeignKey(
        Source, on_delete=models.PROTECT, null=True, blank=True, related_name="references"
    )
    audit_trace = models.ForeignKey(
        AuditTrace, on_delete=models.SET_NULL, null=True, blank=True, related_name="references"
    )
    is_valid = models.BooleanField(default=True, db_index=True)
    problem = models.CharField(max_length=200, blank=True, help_text="Why it is not shown.")
    footnote = models.PositiveIntegerField(null=True, blank=True)
    passages = models.JSONField(
        default=list, blank=True, help_text="What the source says in support: [{text, relevance}]."
    )
    claim_check = models.JSONField(
        null=True,
        blank=True,
        help_text="The figure check of the claim this reference supports (citations.claims).",
    )
    page = models.JSONField(
        null=True,
        blank=True,
        help_text="What the site made of the cited page when the citation carried no passage: "
        "{url, final_url, fetched_on, problem, pending} (citations.pages).",
    )
    data = models.JSONField(help_text="The reference as received.")

    class Meta:
        ordering = ["turn", "position"]

    def __str__(self) -> str:
        return f"[{self.start}:{self.end}] {self.tool_name}"


class SourcePage(models.Model):
    """A cited web page as the site last fetched it, one row per URL (`chats/verify/`).

    Many turns cite the same page: it is fetched again only once its row is older than
    SOURCE_FETCH_MAX_AGE_HOURS. A page that could not be read keeps why (`problem`), so a dead
    link is not asked for by every turn either.
    """

    url_sha256 = models.CharField(max_length=64, unique=True, help_text="Of `url`: the lookup.")
    url = models.TextField(help_text="The URL as cited.")
    final_url = models.TextField(blank=True, help_text="Where its redirects ended.")
    fetched_at = models.DateTimeField(db_index=True)
    status_code = models.PositiveIntegerField(null=True, blank=True)
    content_type = models.CharField(max_length=200, blank=True)
    problem = models.CharField(
        max_length=200, blank=True, help_text="Why it could not be read; empty when it was."
    )
    text = models.TextField(blank=True, help_text="Its main text, as the extractor read it.")

    class Meta:
        ordering = ["-fetched_at"]

    def __str__(self) -> str:
        return self.url
