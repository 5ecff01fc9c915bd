"""blobcask from Python: store, read a range, list, upload in parts, asyncio.

    python3 -m venv .venv && .venv/bin/pip install ./bindings-python
    .venv/bin/python examples/python/quickstart.py
"""

import asyncio
import os
import tempfile

import blobcask

path = os.path.join(tempfile.mkdtemp(), "demo.blobcask")

with blobcask.Store(path, capacity=64 << 20) as store:  # default index: hash
    store["thumbs/cat.jpg"] = os.urandom(20_000)          # durable on return
    head = store.read("thumbs/cat.jpg", 0, 4096)            # any byte range
    print("first 4 KiB:", len(head), "bytes;", store.stat("thumbs/cat.jpg"))

    with store.begin_upload("videos/clip.mp4", 3 * 4096 + 10) as up:
        up.write_part(8192, b"c" * 4106)                    # parts in any order
        up.write_part(0, b"a" * 8192)
        up.commit()

    print("keys under thumbs/:", list(store.list("thumbs/")))  # byte order, any index
    try:
        store["missing"]
    except KeyError as e:                                   # NotFoundError is a KeyError
        print("missing ->", type(e).__name__)
    print(store.stats())


async def main() -> None:
    async with await blobcask.AsyncStore.open(path) as store:
        data = await store.get("videos/clip.mp4")
        print("async get:", len(data), "bytes")


asyncio.run(main())
os.remove(path)
