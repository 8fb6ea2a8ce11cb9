"""``python -m bench.startup_breakdown [--runs 5]``: bench/startup.py's stages alone.

On a fresh embedded Valkey, one no-op job waiting, EchoMQ's ``runworker`` spawned
``--runs`` times: the median seconds of each stage (spawn to first job done) and
the heaviest imports of the command (``-X importtime``).
"""

from __future__ import annotations

import argparse
import os
import statistics

from bench import common, server, startup
from bench.adapters.echomq import ADAPTER


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    opts = parser.parse_args()
    srv = server.start()
    try:
        os.environ["BENCH_URL"] = srv.url
        ADAPTER.setup(srv.url)
        argv = ADAPTER.worker_argv(0, latency=False)
        r = common.client(srv.url)
        runs = []
        for _ in range(opts.runs):
            common.reset(r)
            ADAPTER._enqueue_noop()
            runs.append(startup.one_run(srv.url, argv))
        for stage, label in (*startup.STAGES, ("total", "spawn to first job done")):
            values = [run[stage] for run in runs if stage in run]
            if values:
                print(f"{statistics.median(values) * 1000:7.1f} ms  {stage:<14} {label}")
        with common.Tally() as tally:
            env = common.worker_env(srv.url, tally)
            for name, ms in startup.heaviest_imports(argv, env):
                print(f"{ms:7.1f} ms  import {name}")
        r.close()
        ADAPTER.teardown()
    finally:
        srv.stop()


if __name__ == "__main__":
    main()
