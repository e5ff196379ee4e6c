"""An export's zip is written to a temporary file and streamed from it, a block at a time, in the
page's download and through the API (issue #19: with knowledge sources it reaches 100 MB)."""

from __future__ import annotations

import asyncio
import base64
import io
import random
import tempfile
import tracemalloc
import warnings
import zipfile
from typing import Any

import pytest

from crews.interop import exporting
from crews.models import Crew
from knowledge.models import KnowledgeSource

SOURCES, SOURCE_BYTES = 10, 500_000
exporting_crew_export = exporting.crew_export


@pytest.fixture
def crew(builder: Any) -> Crew:
    """A crew with 5 MB of knowledge that barely compresses (base64 of random bytes)."""
    crew = Crew.objects.create(owner=builder, name="Archive")
    rng = random.Random(19)
    for i in range(SOURCES):
        text = base64.b64encode(rng.randbytes(SOURCE_BYTES * 3 // 4))
        KnowledgeSource.objects.create(crew=crew, title=f"Log {i}", kind="text", filename=f"log{i}.txt",
                                       content=text, status="indexed")
    return crew


def peak_bytes(call: Any) -> tuple[Any, int]:
    tracemalloc.start()
    try:
        return call(), tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def knowledge_of(archive: zipfile.ZipFile) -> dict[str, bytes]:
    return {n: archive.read(n) for n in archive.namelist() if n.startswith("knowledge/")}


@pytest.mark.parametrize("url", ["/api/crews/{id}/export?format=crew-jsonc", "/crews/{id}/export/?format=crew-jsonc"])
def test_the_export_is_streamed_from_a_temporary_file_not_held_in_memory(builder_client, crew, url, monkeypatch):
    made = []

    def crew_export(**kwargs: Any) -> Any:
        made.append(exporting_crew_export(**kwargs))
        return made[-1]

    monkeypatch.setattr(exporting, "crew_export", crew_export)
    builder_client.get(url.format(id=crew.pk)).getvalue()  # the first request's imports are not the export's
    made.clear()
    response, building = peak_bytes(lambda: builder_client.get(url.format(id=crew.pk)))
    assert response.status_code == 200
    ((_name, spooled),) = made
    assert response.streaming and not isinstance(spooled, io.BytesIO)
    assert response["Content-Type"] == "application/zip"
    assert response["Content-Disposition"] == 'attachment; filename="archive.crew-jsonc.zip"'
    size = int(response["Content-Length"])

    # As the ASGI handler serves it (daphne): ``aiter(response)``, block by block, to a file here.
    async def serve(into: Any) -> list[int]:
        blocks = []
        async for block in aiter(response):
            into.write(block)
            blocks.append(len(block))
        return blocks

    with tempfile.TemporaryFile() as received, warnings.catch_warnings():
        warnings.simplefilter("error")  # Django warns when it reads a synchronous file whole first
        # Once the last block is read the response is closed (here by the test client, as the ASGI
        # handler does once it is sent).
        blocks, serving = peak_bytes(lambda: asyncio.run(serve(received)))
        received.seek(0)
        with zipfile.ZipFile(received) as archive:
            files = knowledge_of(archive)

    assert spooled.closed  # closing the response removed the file
    assert sum(blocks) == size > SOURCES * SOURCE_BYTES * 0.7
    assert max(blocks) <= 64 * 1024
    assert len(files) == SOURCES and all(len(c) == SOURCE_BYTES for c in files.values())
    # The zip is never whole in memory: one source at a time, besides zlib's and the spool's
    # buffers (~0.7 MB). Built in memory, it took more than the whole archive and every source.
    assert building < size / 2, (building, size)
    assert serving < size / 10, (serving, size)
