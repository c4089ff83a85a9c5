"""orbax's missing `s3://` branch, applied for the duration of one save.

orbax-checkpoint 0.12.8 writes a checkpoint's small files through etils' `epath` (fsspec's
s3fs for `s3://`), which works, but fails twice on the way to a run in an S3 bucket:

1. The arrays. `orbax/checkpoint/_src/serialization/tensorstore_utils.py` builds their
   tensorstore kvstore from a path that only knows `gs://`: `_normalize_path` (:218-222) is
   `os.path.normpath(path).replace('gs:/', 'gs://')`, so `s3://ckpts/run` becomes
   `s3:/ckpts/run`, and `_use_gcs_driver` (:211-215) is true for `gs://` only, so
   `_build_ocdbt_kvstore_tspec` (:352-370) and `_build_non_ocdbt_kvstore_tspec` (:461-470)
   give every other path the `file` driver, after `os.path.isabs` refuses `s3:/ckpts/run`
   ("Checkpoint path should be absolute"). Yet orbax half-knows S3 already:
   `_REMOTE_URL_PREFIXES = ['gs://', 's3://']` and the `{'driver': 's3'}` validations
   (:98-103) treat an `s3` kvstore as remote storage (read coalescing on).
2. The commit. Off GCS, orbax commits a step by renaming `N.orbax-checkpoint-tmp` to `N`
   (`AtomicRenameTemporaryPath.finalize`, `_src/path/atomicity.py:552`, through
   `async_path.rename`, `_src/path/async_path.py:116-117`), and etils renames with fsspec's
   `mv(recursive=True)` (`etils/epath/backend.py:548`), which copies every path its listing
   holds, including the "directories" S3 infers from the keys (`.../d`, no objects), with
   `on_error="raise"` (`fsspec/spec.py:1299`): the first CopyObject of one fails with
   NoSuchKey (fsspec/s3fs#394), on moto as on AWS.

`orbax_s3_writes()` replaces four names, and nothing else, while it is open:

- `tensorstore_utils._normalize_path`: keeps `s3://` as it keeps `gs://`;
- `tensorstore_utils._use_gcs_driver`: true for `s3://` too ("a bucket, not a local path");
- `gcs_utils.get_kvstore_for_gcs` (`_src/path/gcs_utils.py:111`): for an `s3://` path,
  tensorstore's `s3` kvstore of that bucket and key, with the endpoint and region of
  `AWS_ENDPOINT_URL` / `AWS_DEFAULT_REGION` (tensorstore's `s3` driver reads no endpoint from
  the environment); a `gs://` path goes to orbax's own function unchanged;
- `async_path.rename`: for an `s3://` source, s3fs copies each object of the listing (only
  objects) server-side, then deletes them; any other path goes to orbax's own function.

Every byte is still written by orbax's own code through the real clients: tensorstore (the
OCDBT databases, through its `s3` kvstore; their manifests are committed by conditional PUTs,
`If-None-Match: *` then `If-Match: ETAG`, which moto honours) and etils/s3fs (the metadata
files, and the commit's copies and deletes). The replaced functions are checked first: if
orbax's are not the ones this module expects, the save fails with an AssertionError naming
the function, and never writes the run some other way.

The upstream fix, in one sentence: `_normalize_path` should keep every scheme of
`_REMOTE_URL_PREFIXES` and the base kvstore of an `s3://` path should be tensorstore's
`{'driver': 's3', 'bucket', 'path'}` as it is `get_kvstore_for_gcs(...)` for `gs://` (and
fsspec's `mv` should skip the directories an object store only infers).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
from collections.abc import Callable, Iterator
from typing import Any

#: the source lines each replaced orbax function must still hold (0.12.8), or no patch applies
_EXPECTED = {
    "tensorstore_utils._normalize_path": "return os.path.normpath(path).replace('gs:/', 'gs://')",
    "tensorstore_utils._use_gcs_driver": "if directory.startswith('gs://'):",
    "gcs_utils.get_kvstore_for_gcs": "gcs_bucket, path_without_bucket = parse_gcs_path(",
    "async_path.rename": "return await asyncio.to_thread(src.rename, dst)",
}
#: the callers that must still reach the replaced functions through their module's globals
_CALLERS = ("_build_ocdbt_kvstore_tspec", "_build_non_ocdbt_kvstore_tspec")


def _check(name: str, fn: Callable[..., Any]) -> None:
    source = inspect.getsource(fn)
    assert _EXPECTED[name] in source, (
        f"orbax's {name} is not the 0.12.8 function this patch replaces: "
        f"expected {_EXPECTED[name]!r} in its source"
    )


def _rename_s3(src: str, dst: str) -> None:
    """`src/**` moved to `dst/**` by s3fs: a server-side copy of each object, then a delete.

    Only the objects are copied: fsspec's `mv(recursive=True)` (etils' `rename`) also copies
    the "directories" its listing infers (`.../d`), which are no objects, and stops at the
    first with NoSuchKey (fsspec/s3fs#394). As etils' rename, an existing `dst` is refused.
    """
    import fsspec

    fs, src_key = fsspec.core.url_to_fs(src)
    dst_key = fs._strip_protocol(dst)
    fs.invalidate_cache(src_key)  # tensorstore wrote objects s3fs has not listed
    fs.invalidate_cache(dst_key)
    if fs.exists(dst_key):  # as etils' rename
        raise FileExistsError(f"{dst} already exists. Cannot rename {src}.")
    objects = sorted(fs.find(src_key))
    assert objects, f"orbax's commit: nothing to rename under {src}"
    fs.copy(objects, [dst_key + o[len(src_key) :] for o in objects], on_error="raise")
    fs.rm(objects)
    fs.invalidate_cache(src_key)
    fs.invalidate_cache(dst_key)


def s3_kvstore(path: str) -> dict[str, Any]:
    """tensorstore's `s3` kvstore spec of `s3://bucket/key`, with the endpoint and region of
    the standard AWS environment.

    Example:
        >>> s3_kvstore("s3://ckpts/run/1")["path"]
        'run/1'
    """
    bucket, _, key = path[len("s3://") :].partition("/")
    spec: dict[str, Any] = {"driver": "s3", "bucket": bucket, "path": key}
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    if endpoint:
        spec["endpoint"] = endpoint
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if region:
        spec["aws_region"] = region
    if os.environ.get("AWS_ACCESS_KEY_ID") and os.environ.get("AWS_SECRET_ACCESS_KEY"):
        spec["aws_credentials"] = {"type": "environment"}
    return spec


@contextlib.contextmanager
def orbax_s3_writes() -> Iterator[None]:
    """orbax saves to `s3://` through tensorstore's `s3` kvstore while this is open.

    Example (as the `s3_orbax` fixture uses it, with the AWS environment pointing at a server)::

        with orbax_s3_writes():
            ocp.CheckpointManager(epath.Path("s3://ckpts/run")).save(1, args=...)
    """
    from orbax.checkpoint._src.path import async_path, atomicity, gcs_utils
    from orbax.checkpoint._src.serialization import tensorstore_utils as tsu

    normalize, use_gcs = tsu._normalize_path, tsu._use_gcs_driver
    gcs_kvstore = gcs_utils.get_kvstore_for_gcs
    _check("tensorstore_utils._normalize_path", normalize)
    _check("tensorstore_utils._use_gcs_driver", use_gcs)
    _check("gcs_utils.get_kvstore_for_gcs", gcs_kvstore)
    rename = async_path.rename
    _check("async_path.rename", rename)
    finalize = atomicity.AtomicRenameTemporaryPath.finalize.__code__
    assert {"async_path", "rename"} <= set(finalize.co_names), (
        "orbax's atomicity.AtomicRenameTemporaryPath.finalize no longer calls async_path.rename"
    )
    assert "s3://" in tsu._REMOTE_URL_PREFIXES, "orbax's _REMOTE_URL_PREFIXES has no s3://"
    for caller in _CALLERS:
        names = getattr(tsu, caller).__code__.co_names
        assert {"_normalize_path", "_use_gcs_driver", "gcs_utils"} <= set(names), (
            f"orbax's tensorstore_utils.{caller} no longer calls _normalize_path, "
            "_use_gcs_driver and gcs_utils.get_kvstore_for_gcs"
        )

    def normalize_path(path: str) -> str:
        if str(path).startswith("s3://"):
            return "s3://" + os.path.normpath(str(path)[len("s3://") :])
        return normalize(path)

    def use_bucket_driver(directory: str) -> bool:
        return str(directory).startswith("s3://") or use_gcs(directory)

    def kvstore_for(path: str) -> dict[str, Any]:
        if str(path).startswith("s3://"):
            return s3_kvstore(str(path))
        return gcs_kvstore(path)

    async def rename_objects(src: Any, dst: Any) -> None:
        if str(src).startswith("s3://"):
            await asyncio.to_thread(_rename_s3, str(src), str(dst))
            return
        await rename(src, dst)

    tsu._normalize_path = normalize_path
    tsu._use_gcs_driver = use_bucket_driver
    gcs_utils.get_kvstore_for_gcs = kvstore_for
    async_path.rename = rename_objects
    try:
        yield
    finally:
        tsu._normalize_path = normalize
        tsu._use_gcs_driver = use_gcs
        gcs_utils.get_kvstore_for_gcs = gcs_kvstore
        async_path.rename = rename
