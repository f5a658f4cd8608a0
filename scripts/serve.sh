#!/bin/sh
# Start attnviz as a server: the container's start command (the Dockerfile's CMD runs exactly this script,
# and tests/test_deploy.py runs it directly, since Docker cannot run on our machines).
#
# Environment (all optional):
#   PORT                  port to listen on (default 8501; platforms such as Cloud Run set it)
#   ATTNVIZ_ADDRESS       address to bind (default 0.0.0.0: every interface, as a container needs; this
#                         overrides .streamlit/config.toml's 127.0.0.1, and hosted mode follows it)
#   ATTNVIZ_HOSTED        hosted mode, on unless set to 0 (allow-listed models only, 256 tokens)
#   STREAMLIT_SERVER_COOKIE_SECRET  the same secret on every replica behind one load balancer (32+ characters)
#   ATTNVIZ_*             every other setting of README "Hosting" passes through unchanged
# Everything else comes from .streamlit/config.toml next to app.py (production-safe defaults).
set -eu
cd "$(dirname "$0")/.."

# A shared cookie secret must be secret: the example manifest's placeholder, or anything short enough to guess,
# is refused (deploy/k8s/secret.example.yaml says how to make one). Unset, Streamlit draws one per process.
secret="${STREAMLIT_SERVER_COOKIE_SECRET:-}"
case "$secret" in *REPLACE-ME*) secret=short ;; esac
if [ -n "$secret" ] && [ "${#secret}" -lt 32 ]; then
  echo "attnviz: STREAMLIT_SERVER_COOKIE_SECRET is the example's placeholder or shorter than 32 characters;" \
    "create one with: openssl rand -hex 32" >&2
  exit 64
fi

export ATTNVIZ_HOSTED="${ATTNVIZ_HOSTED:-1}"
# One shared process holds every session's traces: a smaller cache than a laptop's (docs/deploy.md, memory).
export ATTNVIZ_TRACE_CACHE_MB="${ATTNVIZ_TRACE_CACHE_MB:-256}"
export PYTHONUNBUFFERED=1

# The app's own modules as bytecode, once (PYTHONDONTWRITEBYTECODE, which the image sets, otherwise has every start
# compile them from source: about 0.3 s of a cold start). The image compiles them at build time; a folder this user
# cannot write is left as it is.
python -m compileall -q attnviz app_pages app.py >/dev/null 2>&1 || true

# scripts/serve.py is `streamlit run` that imports torch, transformers and Plotly and loads the model as the server
# starts, so the first visitor does not wait for them.
exec python scripts/serve.py run app.py \
  --server.address "${ATTNVIZ_ADDRESS:-0.0.0.0}" \
  --server.port "${PORT:-8501}" \
  --server.headless true \
  --browser.gatherUsageStats false
