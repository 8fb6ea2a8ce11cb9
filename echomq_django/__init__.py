"""EchoMQ for Django: a leased job queue on Redis/Valkey.

Every job transition is one atomic Lua script. The engine (``echomq_django.engine``)
imports nothing from Django; the rest of this package adapts it to Django.
"""

__version__ = "0.1.0"
