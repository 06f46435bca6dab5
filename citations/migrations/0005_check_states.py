"""Stored figure checks take the four state names (citations.claims.CheckStatus).

Each reference's `claim_check` JSON is rewritten in place: "figure_not_found" becomes "figure
not found", "no_figures" "no figure to check" (without a message), and "no_passage" "not read",
its message the reason: the cited page's problem when the site could not read it, else that the
source sent no passage. The turns' stored HTML is left as it was rendered.
"""

from django.db import migrations

STATES = {
    "figure_not_found": "figure not found",
    "no_figures": "no figure to check",
    "no_passage": "not read",
}
NAMES = {new: old for old, new in STATES.items()}
BATCH = 2000


def _rewrite(apps, names, message):
    Reference = apps.get_model("citations", "Reference")
    changed = []
    rows = Reference.objects.filter(claim_check__isnull=False).only("id", "claim_check", "page")
    for reference in rows.iterator(chunk_size=BATCH):
        check = reference.claim_check
        if not isinstance(check, dict) or check.get("status") not in names:
            continue
        check["status"] = names[check["status"]]
        check["message"] = message(check, reference.page)
        changed.append(reference)
        if len(changed) == BATCH:
            Reference.objects.bulk_update(changed, ["claim_check"])
            changed = []
    Reference.objects.bulk_update(changed, ["claim_check"])


def _new_message(check, page):
    if check["status"] == "no figure to check":
        return ""
    if check["status"] == "not read":
        problem = page.get("problem") if isinstance(page, dict) else ""
        return problem or "its source sent no passage"
    return check.get("message", "")


def _old_message(check, page):
    return {
        "no_figures": "no figures to check",
        "no_passage": "no passage to check",
    }.get(check["status"], check.get("message", ""))


def forwards(apps, schema_editor):
    _rewrite(apps, STATES, _new_message)


def backwards(apps, schema_editor):
    _rewrite(apps, NAMES, _old_message)


class Migration(migrations.Migration):
    dependencies = [
        ("citations", "0004_source_pages"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
