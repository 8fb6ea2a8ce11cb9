"""docker-compose.yml, Dockerfile and .dockerignore, checked without a Docker engine.

The compose file is validated against the Compose Specification JSON schema
(``compose_spec.json`` beside this file: the copy shipped by docker-compose
1.29.2, Apache-2.0), then read for what the example needs: the services, the
healthchecks and the start order. Where a compose CLI is installed, its own
``config`` validation runs too.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import jsonschema
import pytest
import yaml
from django.core.management import get_commands
from django.urls import resolve

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
APP_SERVICES = ("web", "worker", "reaper")


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())  # resolves the x-app / x-env anchors


@pytest.fixture(scope="module")
def services(compose) -> dict:
    return compose["services"]


def test_the_file_follows_the_compose_specification(compose):
    schema = json.loads((Path(__file__).with_name("compose_spec.json")).read_text())
    validator = jsonschema.Draft201909Validator(schema)
    errors = [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
        for e in validator.iter_errors(compose)
    ]
    assert errors == []


def test_the_schema_check_is_strict_enough_to_fail(compose):
    schema = json.loads((Path(__file__).with_name("compose_spec.json")).read_text())
    broken = {
        **compose,
        "services": {
            **compose["services"],
            "web": {**compose["services"]["web"], "helthcheck": {}},
        },
    }
    with pytest.raises(jsonschema.ValidationError, match="helthcheck"):
        jsonschema.validate(broken, schema, cls=jsonschema.Draft201909Validator)


def test_the_services_of_the_example(services):
    assert sorted(services) == ["reaper", "valkey", "web", "worker"]


def test_valkey_8_with_aof_noeviction_a_volume_and_a_healthcheck(services):
    valkey = services["valkey"]
    assert valkey["image"] == "valkey/valkey:8"
    command = valkey["command"]
    assert command[0] == "valkey-server"
    options = dict(zip(command[1::2], command[2::2]))
    assert options == {
        "--appendonly": "yes",
        "--appendfsync": "everysec",
        "--maxmemory-policy": "noeviction",
    }
    assert any(v.endswith(":/data") for v in valkey["volumes"])
    check = valkey["healthcheck"]
    assert check["test"][0] == "CMD-SHELL" and "valkey-cli ping" in check["test"][1]
    assert "PONG" in check["test"][1]  # a LOADING server answers PING with an error


def test_one_image_for_web_worker_and_reaper(services):
    images = {(services[s]["build"], services[s]["image"]) for s in APP_SERVICES}
    assert images == {(".", "echomq-django-example")}
    for name in APP_SERVICES:
        env = services[name]["environment"]
        assert env["ECHOMQ_URL"] == "redis://valkey:6379/0", name
        assert "app-data:/app/var" in services[name]["volumes"], name


def test_every_app_service_waits_for_a_healthy_valkey(services):
    for name in APP_SERVICES:
        assert services[name]["depends_on"]["valkey"] == {"condition": "service_healthy"}, name


def test_the_worker_waits_for_the_migrations(services):
    assert services["worker"]["depends_on"]["web"] == {"condition": "service_healthy"}
    probe = services["web"]["healthcheck"]["test"]
    assert probe[0] == "CMD" and "http://127.0.0.1:8000/admin/login/" in probe[-1]
    resolve("/admin/login/")  # the probed page exists in the example project


def test_web_migrates_makes_the_demo_superuser_then_serves(services):
    web = services["web"]
    script = web["command"][-1]
    steps = [s.strip() for s in script.split("&&")]
    assert steps[0] == "python manage.py migrate --noinput"
    assert steps[1].startswith("(python manage.py createsuperuser --noinput ||")
    assert steps[2] == "exec python manage.py runserver 0.0.0.0:8000"
    assert web["environment"]["DJANGO_SUPERUSER_USERNAME"] == "admin"
    assert web["environment"]["DJANGO_SUPERUSER_PASSWORD"] == "${ECHOMQ_ADMIN_PASSWORD:-admin}"
    assert web["ports"] == ["127.0.0.1:8000:8000"]


def test_worker_and_reaper_run_the_real_commands(services):
    from project import settings as example

    assert services["worker"]["command"] == [
        "python",
        "manage.py",
        "runworker",
        "default",
        "emails",
        "slow",
    ]
    assert services["reaper"]["command"] == ["python", "manage.py", "runreaper"]
    assert {"runworker", "runreaper"} <= set(get_commands())
    assert set(services["worker"]["command"][3:]) <= set(example.ECHOMQ["QUEUES"])
    grace = services["worker"]["stop_grace_period"]
    assert int(grace.removesuffix("s")) > 30  # runworker's default grace


def test_the_dockerfile_builds_the_example_from_requirements():
    lines = [
        line.strip()
        for line in (ROOT / "Dockerfile").read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    assert lines[0] == "FROM python:3.13-slim"
    assert "COPY requirements.txt ./" in lines
    assert "RUN pip install -r requirements.txt" in lines
    assert lines.index("COPY requirements.txt ./") < lines.index("COPY . .")
    assert "USER app" in lines
    assert lines[-1] == 'CMD ["python", "manage.py", "runserver", "0.0.0.0:8000"]'


def test_the_build_context_leaves_out_local_state_and_secrets():
    ignored = set((ROOT / ".dockerignore").read_text().split())
    assert {".git", ".env", ".venv*", "var", "**/__pycache__"} <= ignored


def _compose_cli() -> list[str] | None:
    docker = shutil.which("docker")
    if (
        docker
        and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0
    ):
        return [docker, "compose"]
    legacy = shutil.which("docker-compose")
    return [legacy] if legacy else None


def test_the_compose_cli_accepts_the_file():
    cli = _compose_cli()
    if cli is None:
        pytest.skip("no docker compose / docker-compose CLI here (the schema test still ran)")
    result = subprocess.run(
        [*cli, "-f", str(COMPOSE), "config", "-q"], capture_output=True, text=True, cwd=ROOT
    )
    assert result.returncode == 0, result.stderr
