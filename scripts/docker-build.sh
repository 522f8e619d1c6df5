#!/usr/bin/env bash
# `docker build -t wormhole .` the way `make docker` runs it: on the host's network (apt and pip reach
# Debian's mirror and PyPI from inside the build) and trusting the certificate authorities this machine
# trusts (a TLS-inspecting egress proxy has its own CA), which the Dockerfile uses for pip only, at build
# time: the file is staged in build/docker/ (git-ignored) with the dependency list, and never left in the
# final filesystem.
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE=${WORMHOLE_IMAGE:-wormhole}
BUNDLE=${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}

mkdir -p build/docker
if [ -s "$BUNDLE" ]; then
    # Copied only when it changed: the layers after it stay cached.
    cmp -s "$BUNDLE" build/docker/ca.crt 2>/dev/null || cp "$BUNDLE" build/docker/ca.crt
else
    : >build/docker/ca.crt  # empty: pip keeps its own CA bundle
fi
# The image's Python dependencies, install_requires and the spark extra of setup.cfg, one a line: staged
# here (rewritten only when the list changes) so the Dockerfile needs no build stage to read them, and
# editing anything else in setup.cfg reinstalls nothing.
python3 - >build/docker/requirements.new <<'PY'
import configparser
p = configparser.ConfigParser()
p.read("setup.cfg")
reqs = p["options"]["install_requires"] + p["options.extras_require"]["spark"]
print("\n".join(r.strip() for r in reqs.splitlines() if r.strip()))
PY
if cmp -s build/docker/requirements.new build/docker/requirements.txt; then
    rm build/docker/requirements.new
else
    mv build/docker/requirements.new build/docker/requirements.txt
fi
previous=$(docker image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null || true)
docker build --network host -t "$IMAGE" "$@" .
# The image the tag left, untagged now: removed with its own layers (each a whole copy of the tree under
# the vfs driver), so rebuilds do not fill the disk. Layers the new image shares stay.
current=$(docker image inspect --format '{{.Id}}' "$IMAGE")
if [ -n "$previous" ] && [ "$previous" != "$current" ]; then
    docker image rm "$previous" >/dev/null 2>&1 || true
fi
