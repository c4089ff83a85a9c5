"""Where a checkpoint's bytes live: local files and S3, GCS and HTTP(S) objects.

Modules:
    _http: `http://` and `https://` files read by `Range` GETs over the standard library's
    _remote: Remote `Source`s: S3 through obstore (`_s3.py`), GCS through fsspec's gcsfs, HTTP(S) through
    _s3: `s3://bucket/key` objects through obstore (Rust's `object_store`): ranged reads, sizes and
    _source: Where a checkpoint's bytes live: one small `Source` abstraction for local and remote files.
"""
