"""Same code, S3: one application routine, written against fsspec, runs
unchanged on a blobcask store and on S3 (s3fs against a moto server on
127.0.0.1), and observes the same things on both. The only difference
between the two runs is the line that builds the file system."""

from __future__ import annotations

import hashlib

import pytest
import s3fs
from moto.server import ThreadedMotoServer

from blobcask.fsspec import BlobcaskFileSystem
from conftest import pattern

MiB = 1 << 20
VIDEO = pattern(9, 12 * MiB + 12345)  # written in 1 MiB pieces through 5 MiB blocks


def application(fs, root: str) -> dict:
    """Stores, lists, range-reads, conditionally creates and deletes
    objects under ``root``; returns what it saw."""
    seen: dict = {}

    def rel(path: str) -> str:
        return path[len(root) + 1 :]

    fs.makedirs(root, exist_ok=True)  # S3: the bucket; blobcask: nothing to do

    # objects
    for day in ("2026-11-20", "2026-11-21", "2026-11-22"):
        fs.pipe_file(f"{root}/logs/{day}.log", f"log of {day}\n".encode() * 100)
    fs.pipe_file(f"{root}/thumbs/cat.jpg", b"\xff\xd8 not really a jpeg")

    # a multi-block write (S3: a multipart upload)
    video = f"{root}/media/video.mp4"
    with fs.open(video, "wb", block_size=5 * MiB) as f:
        for at in range(0, len(VIDEO), MiB):
            f.write(VIDEO[at : at + MiB])
    seen["video"] = (fs.size(video), hashlib.sha256(fs.cat_file(video)).hexdigest())

    # listing by prefix (portable code sorts, and passes detail: the order
    # and ls's default detail differ between backends)
    logs = fs.ls(f"{root}/logs", detail=True)
    seen["ls logs"] = sorted((rel(e["name"]), e["type"], e["size"]) for e in logs)
    seen["ls root"] = sorted(rel(p) for p in fs.ls(root, detail=False))
    seen["find"] = sorted(rel(p) for p in fs.find(root))
    seen["glob"] = sorted(rel(p) for p in fs.glob(f"{root}/logs/*-2[12].log"))
    seen["isdir"] = (fs.isdir(f"{root}/media"), fs.isfile(video), fs.exists(f"{root}/nothing"))

    # ranged reads, across a block boundary and from the end (start/end by
    # keyword: s3fs's cat_file takes version_id as its second argument)
    edge = 5 * MiB
    seen["range"] = fs.cat_file(video, start=edge - 8, end=edge + 8) == VIDEO[edge - 8 : edge + 8]
    seen["tail"] = fs.cat_file(video, start=-100) == VIDEO[-100:]
    with fs.open(video, "rb", block_size=MiB) as f:
        f.seek(7 * MiB + 3)
        seen["seek"] = f.read(1000) == VIDEO[7 * MiB + 3 : 7 * MiB + 1003]

    # conditional create: exactly one of two writers owns the lock
    lock = f"{root}/locks/job-42"
    fs.pipe_file(lock, b"owner=1", mode="create")
    try:
        fs.pipe_file(lock, b"owner=2", mode="create")
        seen["second create"] = "overwrote"
    except FileExistsError:
        seen["second create"] = "refused"
    try:  # open(..., "xb"): the check may come at open or at close
        with fs.open(lock, "xb") as f:
            f.write(b"owner=3")
        seen["xb"] = "overwrote"
    except FileExistsError:
        seen["xb"] = "refused"
    seen["lock"] = fs.cat_file(lock)

    # deletes
    fs.rm_file(f"{root}/thumbs/cat.jpg")
    fs.rm(f"{root}/logs", recursive=True)
    seen["after delete"] = sorted(rel(p) for p in fs.find(root))
    seen["gone"] = (fs.exists(f"{root}/logs"), fs.exists(f"{root}/thumbs/cat.jpg"))
    return seen


EXPECTED = {
    "video": (len(VIDEO), hashlib.sha256(VIDEO).hexdigest()),
    "ls logs": [(f"logs/2026-11-2{d}.log", "file", 1800) for d in (0, 1, 2)],
    "ls root": ["logs", "media", "thumbs"],
    "find": [
        "logs/2026-11-20.log",
        "logs/2026-11-21.log",
        "logs/2026-11-22.log",
        "media/video.mp4",
        "thumbs/cat.jpg",
    ],
    "glob": ["logs/2026-11-21.log", "logs/2026-11-22.log"],
    "isdir": (True, True, False),
    "range": True,
    "tail": True,
    "seek": True,
    "second create": "refused",
    "xb": "refused",
    "lock": b"owner=1",
    "after delete": ["locks/job-42", "media/video.mp4"],
    "gone": (False, False),
}


@pytest.fixture(scope="module")
def s3_endpoint():
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def aws_env(monkeypatch):
    """Dummy credentials, and nothing from a real AWS configuration."""
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")


def test_same_code_on_blobcask(tmp_path):
    fs = BlobcaskFileSystem(path=tmp_path / "app.blobcask", capacity=32 * MiB)
    try:
        assert application(fs, "appdata") == EXPECTED
    finally:
        fs.close()


def test_same_code_on_s3(s3_endpoint, aws_env):
    fs = s3fs.S3FileSystem(endpoint_url=s3_endpoint, skip_instance_cache=True)
    assert application(fs, "appdata") == EXPECTED
