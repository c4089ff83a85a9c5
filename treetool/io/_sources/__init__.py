"""The remote sources: S3, GCS and HTTP(S) objects (local files and the `Source` base class with
its scheme registry are `treetool._source`; each module here registers its schemes there).

Modules:
    _blocks: `BlockReader`, a seekable read-ahead file over a remote source's ranged reads.
    _http: `http://` and `https://` files read by `Range` GETs over the standard library's
    _remote: Remote `Source`s: S3 through obstore (`_s3.py`), GCS through fsspec's gcsfs, HTTP(S) through
    _s3: `s3://bucket/key` objects through obstore (Rust's `object_store`): ranged reads, sizes and
"""
