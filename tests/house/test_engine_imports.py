"""The house rule "the engine never imports Django", held at run time.

A fresh interpreter imports every module of ``echomq_django.engine`` (found by walking
the package, so a new module is covered the day it is added) and reports which Django
modules that loaded: none may be. A static grep would miss an import made through
another package (an engine module importing ``echomq_django.management`` loads Django).
"""

from __future__ import annotations

import json
import subprocess
import sys

# Run in a child: this test's own process has Django loaded (pytest-django).
PROBE = """
import json, pkgutil, sys
import echomq_django.engine as engine
names = [engine.__name__] + [
    info.name for info in pkgutil.walk_packages(engine.__path__, engine.__name__ + ".")
]
for name in names:
    __import__(name)
django = sorted(m for m in sys.modules if m == "django" or m.startswith("django."))
print(json.dumps({"imported": names, "django": django}))
"""


def test_no_engine_module_imports_django_at_run_time():
    run = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, check=False
    )
    assert run.returncode == 0, run.stderr
    found = json.loads(run.stdout)
    # The walk found the engine (not an empty or wrong package): its core modules at least.
    assert {"echomq_django.engine.connector", "echomq_django.engine.script"} <= set(
        found["imported"]
    ), found["imported"]
    assert found["django"] == [], (
        f"importing the engine's {len(found['imported'])} modules loaded Django: "
        f"{found['django'][:10]}"
    )
