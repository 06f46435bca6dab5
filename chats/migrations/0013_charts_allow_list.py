"""Charts stored before the allow-list are put through it: a spec it refuses is shown as its
table, and every table is cut to CHART_MAX_ROWS / _COLUMNS / _CELL_CHARS. Readers of old turns
and shared links then get what a new chart gets."""

from django.db import migrations


def charts_under_the_allow_list(apps, schema_editor):
    from chats.answer.charts import stored_chart_made_safe

    Turn = apps.get_model("chats", "Turn")
    turns = Turn.objects.exclude(charts=[]).only("pk", "charts")
    for turn in turns.iterator(chunk_size=200):
        if not isinstance(turn.charts, list):
            continue
        charts = [stored_chart_made_safe(c) if isinstance(c, dict) else c for c in turn.charts]
        if charts != turn.charts:
            Turn.objects.filter(pk=turn.pk).update(charts=charts)


class Migration(migrations.Migration):
    dependencies = [
        ("chats", "0012_turn_notices"),
    ]

    operations = [
        migrations.RunPython(charts_under_the_allow_list, migrations.RunPython.noop),
    ]
