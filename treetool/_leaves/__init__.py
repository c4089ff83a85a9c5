"""Leaves: array facts without jax, `LazyArray`, dtypes, PRNG keys, functions, stats, read-ahead.

Modules:
    _arrays: Leaf facts: shape, dtype, bytes, devices, keys, stats, and file-backed `LazyArray` leaves.
    _corners: An array's corners printed as numpy prints the whole array summarised: `...` at each gap.
    _callables: Functions as leaves: `OpaqueFunction` (a function read from a file, not executed) and the
    _dtypes: dtypes in words and values in their own digits: `f32`, `bf16`, `key<fry>`, `-0.079747714`.
    _facts: Leaf facts from metadata only: is it an array, a PRNG key; shape, dtype, bytes, device.
    _lazy_array: `LazyArray`: an array leaf whose bytes stay in its file until they are read.
    _prng: Typed PRNG key arrays read from a file, without jax: `KeyArray` and its dtype `KeyDtype`.
    _read_ahead: `ReadAhead`: parts of many remote `LazyArray`s read ahead of their use, in the order they
    _stats: Summary statistics of an array leaf, read in chunks: min/max/mean/std, NaN/Inf/zero counts,
    _streams: The byte stream type that file-backed leaves read from.
"""
