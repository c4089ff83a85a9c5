"""An orbax checkpoint in S3 behind a link with a round trip: the requests whose names are
known are in flight together (the first GET of the URL beside the listing of its prefix;
`_METADATA` beside the OCDBT manifest), and their number stays what the tree needs.

Each answer waits the link's round trip before it starts, so two requests that both arrived
before either was answered were sent together, not one after the other.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from storage_servers import BUCKET, Link

import treetool as tt

pytestmark = pytest.mark.slow


def _together(a: Any, b: Any) -> bool:
    """Whether requests `a` and `b` were at the server at once (each arrived before the
    other's answer started)."""
    return a.at < b.done and b.at < a.done


@pytest.fixture
def linked(s3: Any) -> Any:
    """The S3 server behind a link of 50 ms per round trip (reset afterwards)."""
    s3.link = Link(rtt=0.05, rate=1e9)
    try:
        yield s3
    finally:
        s3.link = None


def test_the_probe_and_the_listing_go_together(linked: Any, s3_orbax: str) -> None:
    loaded = tt.io.read(f"{s3_orbax}@2")
    assert loaded.step == 2
    reqs = linked.log.requests
    probe = [r for r in reqs if r.path == f"/{BUCKET}/orbax_run"]
    listings = [r for r in reqs if r.path == f"/{BUCKET}"]
    assert len(probe) == 1 and probe[0].range == "bytes=0-65535"
    assert len(listings) == 1  # one listing: none of a data file's extension-less name
    assert _together(probe[0], listings[0])
    step = f"/{BUCKET}/orbax_run/2/default"
    meta = [r for r in reqs if r.path == f"{step}/_METADATA"]
    manifest = [r for r in reqs if r.path == f"{step}/manifest.ocdbt"]
    assert len(meta) == len(manifest) == 1
    assert _together(meta[0], manifest[0])
    nodes = [r for r in reqs if r.path.startswith(f"{step}/d/")]
    others = [r for r in reqs if r not in probe + listings + meta + manifest + nodes]
    assert [r.path for r in others] == [f"{step}/_sharding"]
    assert 1 <= len(nodes) <= 2
    assert not [r for r in reqs if "ocdbt.process_" in r.path]  # no array byte


def test_a_file_with_an_extension_is_not_listed(s3: Any, files: dict[str, Any]) -> None:
    tree = tt.load(f"s3://{BUCKET}/run/model.safetensors")
    assert sorted(tree) == sorted(files["tensors"])
    assert [r.path for r in s3.log.requests if r.path == f"/{BUCKET}"] == []


def test_a_file_without_an_extension_reads_as_before(s3: Any, files: dict[str, Any]) -> None:
    """A key that may name a prefix costs one listing beside its first GET (answered empty,
    unused): the object itself is read as it would be with an extension."""
    name = os.path.join(files["root"], "model.safetensors")
    s3.client().upload_file(name, BUCKET, "plain/model")
    s3.log.clear()
    tree = tt.load(f"s3://{BUCKET}/plain/model")
    assert sorted(tree) == sorted(files["tensors"])
    listings = [r for r in s3.log.requests if r.path == f"/{BUCKET}"]
    gets = [r for r in s3.log.requests if r.path == f"/{BUCKET}/plain/model"]
    assert len(listings) == 1 and len(gets) == 1  # the header in the first GET's 64 KiB
