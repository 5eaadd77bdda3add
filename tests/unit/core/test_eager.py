"""start_eagerly (framework/eager.py): a coroutine runs at once and only becomes a Task if it waits."""

from __future__ import annotations

import asyncio
import logging

import pytest

from kubesched.framework.eager import start_eagerly


async def test_a_coroutine_that_never_waits_completes_without_a_task() -> None:
    done: list[str] = []

    async def quick() -> None:
        done.append("ran")

    assert start_eagerly(quick()) is None
    assert done == ["ran"]  # before the caller yields to the loop


async def test_a_coroutine_that_waits_continues_in_a_task_with_results_and_errors() -> None:
    loop = asyncio.get_running_loop()
    first: asyncio.Future[int] = loop.create_future()
    second: asyncio.Future[int] = loop.create_future()
    seen: list[object] = []

    async def slow() -> None:
        seen.append("started")
        seen.append(await first)
        try:
            await second
        except ValueError as e:
            seen.append(f"caught {e}")
        await asyncio.sleep(0)  # a bare yield to the loop
        seen.append("finished")

    task = start_eagerly(slow())
    assert task is not None and seen == ["started"]
    first.set_result(7)
    await asyncio.sleep(0)
    second.set_exception(ValueError("boom"))
    await task
    assert seen == ["started", 7, "caught boom", "finished"]


async def test_cancelling_the_task_cancels_the_coroutine() -> None:
    cleaned: list[str] = []
    never: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def waits_forever() -> None:
        try:
            await never
        finally:
            cleaned.append("finally")

    task = start_eagerly(waits_forever())
    assert task is not None
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cleaned == ["finally"]


async def test_an_error_before_the_first_wait_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    async def broken() -> None:
        raise RuntimeError("bad plugin")

    with caplog.at_level(logging.ERROR, logger="kubesched.framework.eager"):
        assert start_eagerly(broken()) is None
    assert "bad plugin" in caplog.text
