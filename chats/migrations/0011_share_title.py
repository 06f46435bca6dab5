from django.db import migrations, models
from django.db.models import OuterRef, Subquery


def snapshot_titles(apps, schema_editor):
    """Existing shares keep the title their chat has now: the closest to what was shared."""
    ChatShare = apps.get_model("chats", "ChatShare")
    Chat = apps.get_model("chats", "Chat")
    ChatShare.objects.update(
        title=Subquery(Chat.objects.filter(pk=OuterRef("chat_id")).values("title")[:1])
    )


class Migration(migrations.Migration):
    dependencies = [
        ("chats", "0010_search_document_chat_updated_at"),
    ]

    operations = [
        migrations.AddField(
            model_name="chatshare",
            name="title",
            field=models.CharField(blank=True, default="", max_length=200),
        ),
        migrations.RunPython(snapshot_titles, migrations.RunPython.noop, elidable=True),
    ]
