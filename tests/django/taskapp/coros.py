"""Async tasks in their own module."""

from __future__ import annotations

import asyncio

from echomq_django.compat import task


@task
async def async_add(a, b):
    await asyncio.sleep(0)
    return a + b
