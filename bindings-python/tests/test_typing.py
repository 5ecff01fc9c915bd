"""``mypy --strict`` on user programs, against the installed package's
stubs: what a typed program writes type-checks clean, and a ``str`` value
is reported as the error it is at run time."""

import sys
import textwrap
from pathlib import Path

from mypy import api as mypy_api

# Idioms a user of a typed code base writes; each line here was an error
# (or a missing return) before the stubs said otherwise.
CLEAN = """
    import asyncio
    from collections.abc import MutableMapping

    import blobcask
    from blobcask import AsyncStore, Blob, Store


    def first_byte(path: str) -> int:
        # `__exit__` returning `bool` made mypy report "Missing return".
        with Store(path) as s:
            s[b"k"] = b"v"
            blob: Blob = s.get_blob(b"k")
            view = memoryview(blob)  # a Blob is a buffer on 3.11 too
            return view[0]


    def size_of_upload(s: Store) -> int:
        with s.begin_upload("big", 4096) as up:
            up.write_part(0, bytearray(4096))
            return up.commit().size


    def as_mapping(path: str) -> MutableMapping[bytes, bytes]:
        store: MutableMapping[bytes, bytes] = Store(path)
        store[b"a"] = b"1"
        return store


    def copy_all(src: MutableMapping[bytes, bytes], dst: Store) -> int:
        for key, value in src.items():
            dst.put(key, memoryview(value), if_absent=True)
        dst.update({b"x": b"y"})
        dst.update({"b": b"2"}, c=b"3")  # str keys, as the README shows
        dst.setdefault("a", b"other")
        return len(dst)


    def entered_type(path: str) -> Store:
        with blobcask.Store(path) as s:
            return s  # `__enter__` gives the subclass, not the native class


    async def read_one(path: str) -> bytes:
        async with await AsyncStore.open(path) as s:
            await s.put("k", bytearray(b"v"))
            blob = await s.read("k")
            return bytes(memoryview(blob))


    def main() -> None:
        print(first_byte("s.bc"), asyncio.run(read_one("t.bc")))
"""

# Each line marked `# E` must be an error.
WRONG = """
    from blobcask import AsyncStore, Store


    async def wrong(s: Store, a: AsyncStore) -> None:
        s["k"] = "v"  # E
        s.put("k", "v")  # E
        s.bulk_load([("k", "v")])  # E
        s.setdefault("k", "v")  # E
        await a.put("k", "v")  # E
        with s.begin_upload("k", 4096) as up:
            up.write_part(0, "v" * 4096)  # E
"""


def mypy_strict(tmp_path: Path, source: str) -> tuple[str, int]:
    program = tmp_path / "program.py"
    program.write_text(textwrap.dedent(source))
    out, err, status = mypy_api.run(
        [
            "--strict",
            "--python-version",
            "3.11",
            "--no-incremental",
            "--cache-dir",
            str(tmp_path / ".mypy_cache"),
            "--python-executable",
            sys.executable,
            str(program),
        ]
    )
    return out + err, status


def test_mypy_strict_accepts_typed_user_code(tmp_path: Path) -> None:
    out, status = mypy_strict(tmp_path, CLEAN)
    assert status == 0, out


def test_mypy_strict_reports_a_str_value(tmp_path: Path) -> None:
    out, status = mypy_strict(tmp_path, WRONG)
    assert status == 1, out
    lines = textwrap.dedent(WRONG).splitlines()
    expected = {n for n, line in enumerate(lines, 1) if line.endswith("# E")}
    reported = {
        int(line.split(":")[1])
        for line in out.splitlines()
        if line.startswith(str(tmp_path / "program.py")) and ": error:" in line
    }
    assert reported == expected, out


def test_the_stubs_come_from_the_installed_package() -> None:
    # mypy must check against the wheel's stubs, not a source tree.
    import blobcask

    stub = Path(blobcask.__file__).with_name("_native.pyi")
    assert stub.is_file()
    assert (stub.parent / "py.typed").is_file()
