#!/usr/bin/env bash
# One command for the whole benchmark:   bash bench/run.sh [--quick] [--libs rq,huey] [--reps N]
#
# Makes (once) a separate venv in bench/.work/venv with bench/requirements.txt
# (the peers: django-vtasks, threadmill, RQ, Dramatiq, Celery, Huey; never runtime
# deps of the project),
# installs BullMQ with npm into bench/node/ (skipped with a note without Node),
# starts its own embedded Valkey (persistence off), runs everything and writes
# the Markdown table to stdout and bench/RESULTS.md. Progress goes to stderr.
# PYTHON=python3.11 bash bench/run.sh  picks another interpreter for the venv.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
venv="${BENCH_VENV:-$here/.work/venv}"
# The interpreter the project itself would choose (3.13/3.12 with Django 6), unless PYTHON says.
py="${PYTHON:-$(bash "$root/scripts/bootstrap" --find 2>/dev/null | cut -d' ' -f1)}"
py="${py:-python3}"
stamp="$venv/.requirements.sha"
want="$( (cat "$here/requirements.txt" "$root/requirements.txt"; "$py" --version) | sha1sum | cut -d' ' -f1)"
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "[bench] installing bench/requirements.txt into $venv" >&2
  "$py" -m venv --clear "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$here/requirements.txt" >&2
  echo "$want" > "$stamp"
fi
cd "$root"
exec "$venv/bin/python" -m bench "$@"
