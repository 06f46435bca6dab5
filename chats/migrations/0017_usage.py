"""Usage and cost: each finished turn's tokens and cost per model (`TurnUsage`), the users' and
teams' monthly limits (`UsageLimit`), the 80% warning, and why the site paused a watch.

The turns finished before keep their usage: their consumption is read and priced as a turn
finishing now would be (the price table of chats/usage/prices.py and MODEL_PRICES), dated when
each finished."""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


def usage_of_finished_turns(apps, schema_editor):
    from chats.usage.prices import price_for
    from chats.usage.records import CENT_FRACTION, per_model
    from chats.usage.tokens import turn_tokens

    Turn = apps.get_model("chats", "Turn")
    TurnUsage = apps.get_model("chats", "TurnUsage")
    turns = (
        Turn.objects.exclude(consumption=[])
        .exclude(status="streaming")
        .values_list(
            "pk", "chat_id", "chat__owner_id", "chat__provider", "consumption", "created_at",
            "finished_at",
        )
    )
    rows = []
    for pk, chat_id, owner_id, agent, consumption, created, finished in turns.iterator(2000):
        for tokens in per_model(turn_tokens(consumption)):
            price = price_for(agent, tokens.model)
            rows.append(
                TurnUsage(
                    user_id=owner_id,
                    chat_id=chat_id,
                    turn_id=pk,
                    agent=agent,
                    model=tokens.model,
                    input_tokens=tokens.input,
                    cached_tokens=tokens.cached,
                    output_tokens=tokens.output,
                    tokens=tokens.total,
                    cost=None if price is None else price.cost(tokens).quantize(CENT_FRACTION),
                    created_at=finished or created,
                )
            )
        if len(rows) >= 2000:
            TurnUsage.objects.bulk_create(rows)
            rows = []
    TurnUsage.objects.bulk_create(rows)


class Migration(migrations.Migration):

    dependencies = [
        ('chats', '0016_teams'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name='watch',
            name='paused_reason',
            field=models.CharField(blank=True, max_length=300),
        ),
        migrations.CreateModel(
            name='TurnUsage',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('agent', models.CharField(max_length=32)),
                ('model', models.CharField(help_text='As the agent reported it (its `type`).', max_length=100)),
                ('input_tokens', models.PositiveBigIntegerField(help_text='Cached ones included.')),
                ('cached_tokens', models.PositiveBigIntegerField(default=0)),
                ('output_tokens', models.PositiveBigIntegerField()),
                ('tokens', models.PositiveBigIntegerField(help_text='Input and output: what the limit counts.')),
                ('cost', models.DecimalField(blank=True, decimal_places=8, max_digits=18, null=True)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now, help_text='When the turn finished.')),
                ('chat', models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='chats.chat')),
                ('turn', models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.DO_NOTHING, related_name='usage', to='chats.turn')),
                ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='turn_usage', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['-created_at', '-id'],
                'indexes': [models.Index(fields=['user', 'created_at'], name='turn_usage_user_time')],
                'constraints': [models.UniqueConstraint(fields=('turn', 'model'), name='one_usage_per_turn_and_model')],
            },
        ),
        migrations.CreateModel(
            name='UsageLimit',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('monthly_tokens', models.PositiveBigIntegerField(blank=True, help_text='Tokens per calendar month; empty: no token limit.', null=True)),
                ('monthly_cost', models.DecimalField(blank=True, decimal_places=2, help_text='Dollars of priced usage per calendar month; empty: no cost limit.', max_digits=12, null=True)),
                ('note', models.CharField(blank=True, max_length=200)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('team', models.OneToOneField(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='usage_limit', to='chats.team')),
                ('user', models.OneToOneField(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='usage_limit', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['id'],
                'constraints': [models.CheckConstraint(condition=models.Q(models.Q(('team__isnull', True), ('user__isnull', False)), models.Q(('team__isnull', False), ('user__isnull', True)), _connector='OR'), name='usage_limit_of_a_user_or_a_team', violation_error_message='A limit is of one user or of one team: choose one.')],
            },
        ),
        migrations.CreateModel(
            name='UsageWarning',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('month', models.DateField(help_text="The month's first day.")),
                ('message', models.CharField(max_length=300)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('turn', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='chats.turn')),
                ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='usage_warnings', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('user', 'month'), name='one_usage_warning_a_month')],
            },
        ),
        migrations.RunPython(usage_of_finished_turns, migrations.RunPython.noop),
    ]
