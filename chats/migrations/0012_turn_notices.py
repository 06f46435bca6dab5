from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("chats", "0011_share_title"),
    ]

    operations = [
        migrations.AddField(
            model_name="turn",
            name="notices",
            field=models.JSONField(
                blank=True,
                default=list,
                help_text="What of the agent's stream could not be shown, in words "
                "(chats.answer.display.turn_notices).",
            ),
        ),
    ]
