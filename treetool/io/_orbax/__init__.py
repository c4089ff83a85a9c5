"""orbax checkpoints: file systems, OCDBT metadata, tree building and array reads.

Modules:
    _array: `OrbaxArray`: a lazy array of an orbax checkpoint, read through tensorstore.
    _data: Reading orbax array data safely: paths kept inside the checkpoint, bounded slices, and no
    _fs: Where an orbax checkpoint's files live: a local directory, or a prefix in S3 or GCS.
    _ocdbt: The zarr metadata of every array in an orbax OCDBT database, read through tensorstore.
    _ocdbt_decode: The keys and small values of an OCDBT database, decoded here without tensorstore.
    _tree: Building an orbax item's tree from its flat `_METADATA` entries, without recursion.
"""
