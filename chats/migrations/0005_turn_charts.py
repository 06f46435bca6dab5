from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("chats", "0003_open_socket"),
    ]

    operations = [
        migrations.AddField(
            model_name="turn",
            name="charts",
            field=models.JSONField(blank=True, default=list),
        ),
    ]
