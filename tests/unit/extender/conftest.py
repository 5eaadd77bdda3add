"""Fixtures for the extender's unit tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from kubesched.extender.service import ExtenderService
from kubesched.framework.registry import Registry
from kubesched.plugins.builtin import builtin_registry
from unit.extender.ext_helpers import ip_profile, make_client


@pytest.fixture
def registry() -> Registry:
    return builtin_registry()


@pytest.fixture
def service(registry: Registry) -> ExtenderService:
    return ExtenderService(ip_profile(registry), registry)


@pytest.fixture
async def client(service: ExtenderService) -> AsyncIterator[TestClient[Any, Any]]:
    c = await make_client(service)
    try:
        yield c
    finally:
        await c.close()
