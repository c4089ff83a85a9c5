"""Credentials never reach an output (issue 26): every command, on success and on each kind of
failure, against URLs carrying a canary `user:password@` and `?token=`, and against S3 with
canary `AWS_*` keys in the environment. `assert_contained` greps stdout and stderr for every
secret (`harness.secrets_of`) and checks that only the server on the command line was reached.
"""

from __future__ import annotations

import base64
import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _servers import Listener, LyingServer
from cli_runner import together
from harness import CANARY_ENV, Run, assert_contained, run_cli

import treetool as tt

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning"),
]

USER, PASSWORD, TOKEN = "canaryUser01", "Pa55w0rdCanary01", "T0kenCanary0001"


def _files() -> dict[str, bytes]:
    from safetensors.numpy import save

    a = {"w": np.arange(6, dtype=np.float32).reshape(2, 3), "big": np.zeros(40_000, np.float32)}
    b = {**a, "w": a["w"] + 1}
    return {"a.safetensors": save(a), "b.safetensors": save(b)}


@pytest.fixture(scope="module")
def other() -> Iterator[Listener]:
    listener = Listener()
    yield listener
    listener.stop()


@pytest.fixture(scope="module")
def server(other: Listener) -> Iterator[LyingServer]:
    srv = LyingServer(_files(), other_port=other.port)
    yield srv
    srv.stop()


def _url(server: LyingServer, path: str) -> str:
    return f"http://{USER}:{PASSWORD}@127.0.0.1:{server.port}/{path}?token={TOKEN}&v=2"


#: (arguments with {a} and {b} for the URLs, the exit code)
COMMANDS = [
    (["ls", "{a}"], 0),
    (["ls", "--json", "{a}"], 0),
    (["inspect", "--no-tui", "{a}"], 0),
    (["inspect", "--json", "{a}"], 0),
    (["get", "{a}", "w"], 0),
    (["get", "--json", "{a}", "w"], 0),
    (["summary", "{a}"], 0),
    (["summary", "--json", "{a}"], 0),
    (["diff", "{a}", "{b}"], 1),
    (["diff", "--json", "{a}", "{b}"], 1),
]

#: paths of the server that fail, each in its own way
FAILURES = [
    "f/missing.safetensors",
    "500/a.safetensors",
    "403/a.safetensors",
    "redirect/port/a.safetensors",
    "redirect/loop/a.safetensors",
    "slowbody/a.safetensors",
    "manyheaders/a.safetensors",
]


@pytest.mark.parametrize(
    ("args", "rc"), COMMANDS, ids=lambda x: " ".join(x) if isinstance(x, list) else str(x)
)
def test_no_secret_in_any_command_output(
    server: LyingServer, tmp_path: Any, args: list[str], rc: int
) -> None:
    server.auth.clear()
    a, b = _url(server, "f/a.safetensors"), _url(server, "f/b.safetensors")
    run = run_cli(*(x.format(a=a, b=b) for x in args), cwd=tmp_path)
    # greps both streams for the password, token and AWS canaries
    assert_contained(run, rc=rc, ls_fields=args == ["ls", "{a}"])
    # the user info was used (basic authentication to that server), never shown
    basic = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    assert server.auth and set(server.auth) == {basic}


def _error_run(server: LyingServer, command: str, path: str, cwd: Path) -> Run:
    url = _url(server, path)
    extra = {"get": ["w"], "diff": [_url(server, "f/b.safetensors")]}.get(command, [])
    flags = ["--no-tui"] if command == "inspect" else []
    return run_cli(command, *flags, "--timeout", "1", url, *extra, cwd=cwd)


@pytest.fixture(scope="module")
def error_runs(
    request: pytest.FixtureRequest,
    server: LyingServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[tuple[str, str], Run]:
    """(command, path) -> its run, for each case of `test_no_secret_in_any_error` this session
    selected: each its own subprocess in its own folder as before, run side by side (as many
    at once as there are cores) when the first case asks; the `slowbody` ones mostly wait."""
    wanted = sorted(
        {
            (item.callspec.params["command"], item.callspec.params["path"])
            for item in request.session.items
            if item.path == request.path
            and getattr(item, "originalname", "") == "test_no_secret_in_any_error"
        }
    )
    calls = [
        functools.partial(_error_run, server, command, path, tmp_path_factory.mktemp("err"))
        for command, path in wanted
    ]
    return dict(zip(wanted, together(*calls)))


@pytest.mark.parametrize("path", FAILURES)
@pytest.mark.parametrize("command", ["ls", "inspect", "get", "summary", "diff"])
def test_no_secret_in_any_error(
    server: LyingServer,
    other: Listener,
    error_runs: dict[tuple[str, str], Run],
    path: str,
    command: str,
) -> None:
    run = error_runs[command, path]
    assert_contained(run)
    shown = f"http://***@127.0.0.1:{server.port}/{path}?token=***&v=***: "
    assert shown in run.stderr
    assert other.accepted == 0


def test_the_api_error_and_repr_hide_them_too(server: LyingServer) -> None:
    url = _url(server, "f/missing.safetensors")
    with pytest.raises(tt.LoadError) as info:
        tt.load(url)
    assert PASSWORD not in str(info.value) and TOKEN not in str(info.value)
    assert str(info.value).startswith(f"http://***@127.0.0.1:{server.port}/f/missing.safetensors")


def test_no_aws_canary_in_s3_outputs(tmp_path: Any) -> None:
    """moto accepts any keys: the canaries are the credentials of these requests."""
    import storage_servers  # beside the remote tests; _servers put it on the path

    s3 = storage_servers.S3Server()
    try:
        client = s3.client()
        client.create_bucket(Bucket="ckpts")
        client.put_object(Bucket="ckpts", Key="a.safetensors", Body=_files()["a.safetensors"])
        env = {**CANARY_ENV, "AWS_ENDPOINT_URL": s3.endpoint, "AWS_DEFAULT_REGION": "us-east-1"}
        for args, rc in [
            (["ls", "s3://ckpts/a.safetensors"], 0),
            (["ls", "--json", "s3://ckpts/a.safetensors"], 0),
            (["get", "s3://ckpts/a.safetensors", "w"], 0),
            (["ls", "s3://ckpts/missing.safetensors"], 2),
            (["ls", "s3://no-such-bucket/x.safetensors"], 2),
            (["summary", "s3://ckpts/a.safetensors?token=" + TOKEN], 2),
        ]:
            run = run_cli(*args, cwd=tmp_path, env=env)
            assert_contained(
                run, rc=rc, ls_fields=args[0] == "ls" and args[1] != "--json" and rc == 0
            )
            assert CANARY_ENV["AWS_SECRET_ACCESS_KEY"] not in run.stdout + run.stderr
        assert s3.log.count > 0  # the reads did reach the S3 server
    finally:
        s3.stop()


def test_the_tui_shows_no_secret(server: LyingServer) -> None:
    """The terminal UI's header (the URL) and the details of a leaf read from it."""
    import asyncio

    from treetool.tui import TreetoolApp

    url = _url(server, "f/a.safetensors")
    tree = tt.load(url)
    app = TreetoolApp(tree, title=url)

    async def drive() -> str:
        async with app.run_test(size=(160, 40)) as pilot:
            await pilot.pause()
            await pilot.press("down")
            await pilot.pause()
            await app.workers.wait_for_complete()
            await pilot.pause(0.1)
            screen = app.export_screenshot()
            await pilot.press("q")
            return screen

    screen = asyncio.run(drive())
    assert "127.0.0.1" in screen  # the URL is shown...
    assert PASSWORD not in screen and TOKEN not in screen and USER not in screen  # ...redacted
