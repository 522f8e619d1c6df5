#!/usr/bin/env bash
# Docker for `make docker` and the docker tests: Debian's docker.io and debootstrap, installed when missing
# (root with apt-get), and a dockerd started in the background when none answers. This machine runs no
# init system and no image registry: dockerd runs without iptables or a bridge, so containers use
# --network host, and on overlay2 when overlayfs mounts here (else vfs, which copies the whole image for
# every container and every build step: a 1.2 GB copy each). Idempotent: a running daemon is left alone. Exit 0 once `docker info`
# answers; otherwise non-zero with the reason on stderr (the tests turn that into a skip or a failure).
set -euo pipefail

DOCKERD_LOG=${DOCKERD_LOG:-/var/log/wormhole-dockerd.log}
WAIT_S=${DOCKER_WAIT_S:-60}

say() { echo "docker-setup: $*" >&2; }

daemon_up() { docker info >/dev/null 2>&1; }

install_packages() {
    local missing=()
    command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
    command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
    command -v docker >/dev/null 2>&1 || missing+=(docker.io)
    [ ${#missing[@]} -eq 0 ] && return 0
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
        say "missing ${missing[*]} and cannot install them (needs root with apt-get)"
        return 1
    fi
    say "installing ${missing[*]} (Debian packages)"
    export DEBIAN_FRONTEND=noninteractive
    # A stale package list fails the install: refresh once and try again.
    apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null 2>&1 || {
        apt-get update -q >/dev/null
        apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
    }
}

# overlay2 when an overlayfs mount works in Docker's root (the probe leaves nothing behind), else vfs.
storage_driver() {
    local root=/var/lib/docker probe driver=vfs
    mkdir -p -m 0711 "$root"
    probe=$(mktemp -d "$root/.overlay-probe.XXXXXX")
    mkdir "$probe/lower" "$probe/upper" "$probe/work" "$probe/merged"
    if mount -t overlay overlay -o "lowerdir=$probe/lower,upperdir=$probe/upper,workdir=$probe/work" \
            "$probe/merged" 2>/dev/null; then
        umount "$probe/merged"
        driver=overlay2
    fi
    rm -rf "$probe"
    echo "$driver"
}

start_daemon() {
    local driver
    driver=$(storage_driver)
    say "starting dockerd ($driver, no iptables, no bridge); log in $DOCKERD_LOG"
    # setsid: the daemon outlives the shell (and the test session) that started it.
    setsid dockerd --storage-driver="$driver" --iptables=false --bridge=none >>"$DOCKERD_LOG" 2>&1 </dev/null &
    local waited=0
    until daemon_up; do
        if [ "$waited" -ge "$WAIT_S" ]; then
            say "dockerd did not answer within ${WAIT_S}s; last lines of $DOCKERD_LOG:"
            tail -n 20 "$DOCKERD_LOG" >&2 || true
            return 1
        fi
        sleep 1
        waited=$((waited + 1))
    done
}

if daemon_up; then exit 0; fi
install_packages
if ! daemon_up; then
    if [ "$(id -u)" != 0 ]; then say "no docker daemon answers and only root can start one"; exit 1; fi
    start_daemon
fi
say "docker daemon ready ($(docker version --format '{{.Server.Version}}' 2>/dev/null || echo '?'))"
