"""An LLM's ``timeout`` param changed meaning (issue #14): it was httpx's timeout (between chunks
of a streamed answer, 60 s by default) and is now the limit for the whole call. A row that set
``{"timeout": 60}`` meant "give up when the model goes quiet for 60 s"; kept as it is, it would cut
a slow local model's long answer at 60 s. Its value moves to ``first_token_timeout`` (the wait for
the model to start answering) and the whole call keeps its default (600 s).

Rows that already set ``first_token_timeout`` were written in the new meaning and stay as they are.
Reversing is a no-op: the old meaning cannot be told apart from the new once moved, and a row
with ``first_token_timeout`` works under either version of the code.
"""

from django.db import migrations


def move_timeout_to_first_token_timeout(apps, schema_editor):  # type: ignore[no-untyped-def]
    LLM = apps.get_model("agents", "LLM")
    for llm in LLM.objects.using(schema_editor.connection.alias).only("pk", "params").iterator():
        params = llm.params
        if not isinstance(params, dict) or "timeout" not in params or "first_token_timeout" in params:
            continue
        moved = dict(params)
        moved["first_token_timeout"] = moved.pop("timeout")
        LLM.objects.using(schema_editor.connection.alias).filter(pk=llm.pk).update(params=moved)


class Migration(migrations.Migration):

    dependencies = [
        ("agents", "0005_prompt_keys_for_structured_answers"),
    ]

    operations = [
        migrations.RunPython(move_timeout_to_first_token_timeout, migrations.RunPython.noop, elidable=True),
    ]
