"""What the tests share, and nothing else: no test module lives here.

servers            the suite's real servers (Valkey, Redis, cluster, TLS, ACL): start helpers
proxy              the one TCP proxy: faults mid-command, cut or frozen connections
procs              worker / reaper / runworker / runreaper subprocesses, and their logs
engine_proc        the process ``procs`` starts for "worker" / "reaper": the engine alone
deployed_settings  Django settings whose ECHOMQ comes whole from the environment
cluster            the cluster helpers: queues spread over the masters, slots, resharding
running            an engine Worker running in a thread
waiting            ``wait_until``: the one way a test awaits a condition
fixtures           fixtures used by several folders (a plugin of tests/conftest.py)
"""
