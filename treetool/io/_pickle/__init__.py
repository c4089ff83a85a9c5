"""The safe pickle reader: an opcode machine that never runs a file's code.

Modules:
    _families: The opcode families of the safe pickle reader's machine: one method per family.
    _functions: Unexecuted functions in a safely read pickle become one `OpaqueFunction` leaf each.
    _imitations: Treetool's imitations of the allow-listed reconstructors a pickle may call.
    _layers: The layers of a nested checkpoint, read in one loop by the pickle reader's opcode machine.
    _machine: The safe pickle reader's opcode machine: `_Machine`, one object per file read.
    _numpy_rebuild: The allow-listed reconstructors of pickled numpy and jax arrays, imitated by treetool.
    _ops: What the safe unpickler does besides running opcodes: the allow-list and its imitations.
    _salvage: What a partial read of a damaged or oversized pickle keeps.
    _state: The state of the safe pickle reader's opcode machine, and what its opcode families share.
"""
