from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("chats", "0006_library"),
    ]

    operations = [
        migrations.AddField(
            model_name="turn",
            name="charts",
            field=models.JSONField(blank=True, default=list),
        ),
    ]
