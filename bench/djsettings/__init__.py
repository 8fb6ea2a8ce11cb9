"""Django settings for the django.tasks backends the harness compares (not EchoMQ's).

One module per backend for its worker processes (``vtasks``, ``threadmill``,
``djhuey``: only that backend's app, as a project using it would have), and
``harness`` for the harness process, which enqueues to all of them from one
Django set-up: every backend under the alias named after its adapter key, EchoMQ
as ``default`` exactly as ``bench/echomq_settings.py`` configures it.
"""
