"""EchoMQ benchmark harness: EchoMQ against the other Django Tasks backends on
Redis/Valkey (django-vtasks, threadmill, Huey's), RQ, Dramatiq, Celery, Huey and BullMQ.

Run it with ``bash bench/run.sh`` (or ``python -m bench`` inside a venv that has
``bench/requirements.txt`` installed). See ``bench/README.md``.
"""
