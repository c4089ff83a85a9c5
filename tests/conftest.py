"""Shared test set-up: 8 CPU devices, a deterministic hypothesis profile, no machine state."""

from __future__ import annotations

import os

# Must happen before jax is imported anywhere: the device and sharding tests use 8 CPU devices.
os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
).strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    derandomize=True,
    deadline=None,
    max_examples=60,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("ci")


import pytest  # noqa: E402

#: Test modules whose tests start subprocesses, storage servers, browsers, notebooks, type
#: checkers or the import linter, or drive the real Textual app with Pilot (`test_tui*`, but the
#: SVG snapshots and the source checks): marked `slow`, so `pytest -m "not slow"` is the fast
#: run. Single slow tests in other modules carry `@pytest.mark.slow` themselves.
_SLOW_DIRS = frozenset({"remote", "hostile"})
_FAST_TUI_MODULES = frozenset({"test_tui_snapshots.py", "test_tui_public_textual.py"})
_SLOW_MODULES = frozenset(
    {
        "test_cli.py",
        "test_cli_trace.py",
        "test_diff_cli.py",
        "test_error_policy.py",
        "test_examples.py",
        "test_fidelity_corpus.py",
        "test_fidelity_formats.py",
        "test_fuzz.py",
        "test_html_chromium.py",
        "test_import_hygiene.py",
        "test_io_cli.py",
        "test_io_malicious.py",
        "test_io_opaque_jax_hook.py",
        "test_layers.py",
        "test_listing_no_numpy.py",
        "test_notebook.py",
        "test_startup_imports.py",
        "test_typecheck.py",
        "test_devices_multihost.py",
        "test_tui_terminal_hostile.py",
    }
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the tests of the slow modules (`-m "not slow"` leaves them out)."""
    for item in items:
        path = item.path
        pilot = path.name.startswith("test_tui") and path.name not in _FAST_TUI_MODULES
        if path.name in _SLOW_MODULES or path.parent.name in _SLOW_DIRS or pilot:
            item.add_marker(pytest.mark.slow)
