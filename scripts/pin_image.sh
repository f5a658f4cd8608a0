#!/bin/sh
# Name the pushed image by digest in deploy/k8s: run after `docker push`, then review and commit the change.
#
#   docker build -t ghcr.io/you/attnviz:0.2.0 . && docker push ghcr.io/you/attnviz:0.2.0
#   scripts/pin_image.sh ghcr.io/you/attnviz:0.2.0                 # deployment.yaml
#   scripts/pin_image.sh ghcr.io/you/attnviz:0.2.0-gpu gpu         # deployment-gpu.yaml
#
# The digest is the registry's (RepoDigests, known only after a push), so a manifest can never name an image that a
# later push to the same tag replaced. The tag must be the package's version (attnviz.__version__), with -gpu for
# the GPU image; tests/test_deploy.py checks both and refuses a bare tag.
set -eu
cd "$(dirname "$0")/.."
image="$1"
file="deploy/k8s/deployment${2:+-$2}.yaml"
version="$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' attnviz/__init__.py)"
case "${image##*:}" in
  "$version" | "$version-gpu") ;;
  *) echo "pin_image: the tag of $image is not the package version $version" >&2; exit 64 ;;
esac
digest="$(docker inspect --format '{{range .RepoDigests}}{{println .}}{{end}}' "$image" | sed -n 's/.*@\(sha256:[0-9a-f]\{64\}\)$/\1/p' | head -n 1)"
[ -n "$digest" ] || { echo "pin_image: $image has no registry digest: push it first" >&2; exit 65; }
sed -i "s|^\(\s*image: \).*|\1$image@$digest|" "$file"
echo "$file: image: $image@$digest"
