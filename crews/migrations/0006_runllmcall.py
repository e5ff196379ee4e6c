# What each LLM call of a run sent and got back (RunLLMCall), read from the run page.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('crews', '0005_plan_steps_outlive_their_tasks'),
    ]

    operations = [
        migrations.CreateModel(
            name='RunLLMCall',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('seq', models.PositiveIntegerField(verbose_name='sequence number')),
                ('purpose', models.CharField(blank=True, max_length=50, verbose_name='purpose')),
                ('model', models.CharField(blank=True, max_length=200, verbose_name='model')),
                ('messages', models.JSONField(blank=True, default=list, verbose_name='messages')),
                ('tools', models.JSONField(blank=True, default=list, verbose_name='tools')),
                ('response_format', models.CharField(blank=True, max_length=200, verbose_name='response format')),
                ('reply', models.JSONField(blank=True, null=True, verbose_name='reply')),
                ('error', models.TextField(blank=True, verbose_name='error')),
                ('run', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='llm_call_records', to='crews.run', verbose_name='run')),
            ],
            options={
                'verbose_name': 'LLM call',
                'verbose_name_plural': 'LLM calls',
                'ordering': ['run', 'seq'],
                'constraints': [models.UniqueConstraint(fields=('run', 'seq'), name='unique_llm_call_seq')],
            },
        ),
    ]
