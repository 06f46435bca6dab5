import django.db.models.deletion
from django.db import migrations, models

# The index Django made for the foreign key (the same name on SQLite and PostgreSQL). Dropped
# by name: an AlterField would rebuild the table on SQLite and, on PostgreSQL, re-add the foreign
# key, which scans every event while it locks both tables.
INDEX = "chats_turnevent_turn_id_0e281704"


class Migration(migrations.Migration):
    dependencies = [
        ("chats", "0008_chat_options"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="turnevent",
                    name="turn",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="events",
                        to="chats.turn",
                    ),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    f'DROP INDEX IF EXISTS "{INDEX}"',
                    reverse_sql=f'CREATE INDEX "{INDEX}" ON "chats_turnevent" ("turn_id")',
                ),
            ],
        ),
    ]
