# The memsys app for docker-compose.yml. The database is a separate pgvector/pgvector service.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
# Point this at a CPU-only torch wheel index to keep the image small (a default PyPI
# torch on Linux is the large CUDA build).
ARG TORCH_INDEX_URL=""

WORKDIR /app
COPY pyproject.toml README.md alembic.ini ./
COPY memsys ./memsys
COPY migrations ./migrations
RUN pip install --no-cache-dir ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"} torch==2.13.0 \
 && pip install --no-cache-dir .
# The model as ONNX, once, where memsys looks for it (as `make install` does): served with
# onnxruntime, without importing torch; the user below could not write it there.
RUN memsys model export

RUN useradd --create-home memsys
USER memsys
EXPOSE 8700
CMD ["memsys", "serve", "--host", "0.0.0.0", "--port", "8700"]
