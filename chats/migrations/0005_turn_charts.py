from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("chats", "0004_ids_of_any_length_and_sanitized_events"),
    ]

    operations = [
        migrations.AddField(
            model_name="turn",
            name="charts",
            field=models.JSONField(blank=True, default=list),
        ),
    ]
