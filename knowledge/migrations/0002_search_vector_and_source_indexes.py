"""PostgreSQL: each chunk's and memory's ``tsvector`` stored in a generated column with a GIN
index, instead of the expression index of 0001 (ranking recomputed ``to_tsvector`` for every
match: bench/knowledge.py, 10,000 chunks, 2.6 s a search). Both databases: indexes on the
sources' owner and status, what every task's search filters by first.

The models do not declare ``search_vector``: SQLite has none (its FTS5 tables are 0001's), and
only ``knowledge.search.postgresql`` reads it. PostgreSQL fills it on every INSERT and UPDATE of
``text``; a later migration changing ``text``'s type must drop the column first."""

from django.db import migrations, models

SEARCH_TABLES = ("knowledge_knowledgechunk", "knowledge_memory")


def add_search_vectors(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for table in SEARCH_TABLES:
        schema_editor.execute(
            f"ALTER TABLE {table} ADD COLUMN search_vector tsvector "
            "GENERATED ALWAYS AS (to_tsvector('simple', text)) STORED"
        )
        schema_editor.execute(f"CREATE INDEX {table}_search_vector ON {table} USING gin (search_vector)")
    schema_editor.execute("DROP INDEX IF EXISTS knowledge_chunk_search")


def drop_search_vectors(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for table in SEARCH_TABLES:
        schema_editor.execute(f"ALTER TABLE {table} DROP COLUMN IF EXISTS search_vector")  # and its index
    from django.contrib.postgres.indexes import GinIndex
    from django.contrib.postgres.search import SearchVector

    # 0001's expression index, as 0001 made it.
    chunk = apps.get_model("knowledge", "KnowledgeChunk")
    schema_editor.add_index(chunk, GinIndex(SearchVector("text", config="simple"), name="knowledge_chunk_search"))


class Migration(migrations.Migration):

    dependencies = [
        ("knowledge", "0001_initial"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="knowledgesource",
            index=models.Index(fields=["crew", "status"], name="knowledge_source_crew_status"),
        ),
        migrations.AddIndex(
            model_name="knowledgesource",
            index=models.Index(fields=["agent", "status"], name="knowledge_source_agent_status"),
        ),
        migrations.RunPython(add_search_vectors, drop_search_vectors),
    ]
