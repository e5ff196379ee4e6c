"""A file streamed as a response a block at a time, under ASGI too.

Django's ``FileResponse`` reads its file a block at a time only when served synchronously: under
ASGI (daphne, how the site is served) ``StreamingHttpResponse.__aiter__`` first reads a synchronous
file whole into a list, so an export of 100 MB would sit in memory anyway. Here the ASGI handler's
``aiter(response)`` reads one block at a time in a worker thread instead.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from asgiref.sync import sync_to_async
from django.http import FileResponse


class StreamedFileResponse(FileResponse):
    block_size = 64 * 1024  # what the ASGI handler sends at most per message

    async def __aiter__(self) -> AsyncIterator[bytes]:
        # The same blocks a synchronous server gets (whatever wraps them, as the test client
        # does), each read in a worker thread: not thread-sensitive, as reading a file needs no
        # request thread.
        blocks = iter(self.streaming_content)
        read = sync_to_async(next, thread_sensitive=False)
        while (block := await read(blocks, None)) is not None:
            yield block
