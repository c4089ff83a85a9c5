"""What a hostile file may make a reader do: budgets, limits, hash guards, huge integers.

Modules:
    _bigint: `HugeInt`: an integer from a file too long to be shown in digits.
    _budget: What a file of N bytes may make a reader build: the one statement of the reader budgets.
    _hash_guard: `HashGuard`: dict keys and set items whose hashes a file chose to collide.
    _limits: Limits every non-pickle reader applies to what a file claims: shapes, dtypes, counts, depth.
"""
