"""The benchmark's own server: a fresh embedded Valkey, persistence off."""

from __future__ import annotations

import shutil

from bench import common


def start():
    """Start an EmbeddedServer in bench/.work/valkey and return it (started)."""
    from echomq_django.devserver import EmbeddedServer

    d = common.WORK_DIR / "valkey"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    srv = EmbeddedServer(dir=d, appendonly=False).start()
    r = common.client(srv.url)
    # Belt and braces: no RDB snapshots, no AOF, whatever the launcher's defaults.
    r.config_set("save", "")
    r.config_set("appendonly", "no")
    r.close()
    return srv


def describe(url: str) -> str:
    r = common.client(url)
    info = r.info("server")
    r.close()
    if "valkey_version" in info:
        return f"Valkey {info['valkey_version']}"
    return f"Redis {info.get('redis_version')}"
