# The example project in one image: `docker compose up` runs it as web, worker and reaper.
FROM python:3.13-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app

# Requirements first: the dependency layer is rebuilt only when they change.
COPY requirements.txt ./
RUN pip install -r requirements.txt

COPY . .

# Run unprivileged; var/ (SQLite database, static files) is the one writable folder,
# mounted as a named volume that web, worker and reaper share.
RUN useradd --create-home --uid 1000 app && mkdir -p var && chown app:app var
USER app

EXPOSE 8000
CMD ["python", "manage.py", "runserver", "0.0.0.0:8000"]
