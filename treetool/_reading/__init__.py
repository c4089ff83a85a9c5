"""Reading a file progressively: in a thread, with snapshots of the tree read so far.

The TUI opens at once on a big pickle and shows the tree as it is read; the CLI shows the
leaves read so far in its progress line. Both drive the same `ProgressiveRead`.

Modules:
    _progressive: `ProgressiveRead`: the read thread, the snapshot schedule, the progress.
    _read: `Reading` (a file and how to read it) and `Read` (what the finished read gives).
    _snapshots: Snapshots made ready off the UI thread (`prepare`), counted (`LeafCounter`).
"""
