#!/usr/bin/env bash
# The Dockerfile's base image, debian:bookworm-slim, built here when it is missing: there is no image
# registry to pull it from. debootstrap (minbase) lays a bookworm root filesystem from the Debian mirror
# this machine's apt uses, trimmed the way the slim images are (no docs, man pages or locales from later
# installs), and `docker import` tags it. Cached: nothing is done when the tag exists. Needs a running
# docker daemon (scripts/docker-setup.sh) and root.
set -euo pipefail

TAG=${WORMHOLE_BASE_IMAGE:-debian:bookworm-slim}
SUITE=bookworm

say() { echo "docker-base: $*" >&2; }

if docker image inspect "$TAG" >/dev/null 2>&1; then
    say "$TAG present ($(docker image inspect --format '{{.Id}}' "$TAG")); nothing to build"
    exit 0
fi
if [ "$(id -u)" != 0 ]; then say "building $TAG needs root (debootstrap)"; exit 1; fi
command -v debootstrap >/dev/null 2>&1 || { say "debootstrap is missing: run scripts/docker-setup.sh"; exit 1; }

# The first URI apt uses for a given archive ("debian" or "debian-security"), deb822 or one-line format.
apt_uri() {
    local archive=$1 fallback=$2 uri
    uri=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list 2>/dev/null \
          | grep -v "^[[:space:]]*#" | grep -oE "https?://[^ ]+/${archive}/?( |$)" | head -n 1 | tr -d ' ' || true)
    echo "${uri:-$fallback}"
}
MIRROR=$(apt_uri debian http://deb.debian.org/debian)
SECURITY=$(apt_uri debian-security http://deb.debian.org/debian-security)

ROOTFS=$(mktemp -d /var/tmp/wormhole-rootfs.XXXXXX)
chmod 0755 "$ROOTFS"  # it becomes the image's /: mktemp made it 0700
trap 'rm -rf "$ROOTFS"' EXIT
say "debootstrap --variant=minbase $SUITE from $MIRROR into $ROOTFS"
debootstrap --variant=minbase "$SUITE" "$ROOTFS" "$MIRROR" >"$ROOTFS.log" 2>&1 || {
    tail -n 30 "$ROOTFS.log" >&2; rm -f "$ROOTFS.log"; exit 1; }
rm -f "$ROOTFS.log"

# What later `apt-get install`s in images leave out: documentation, man pages, translations.
cat >"$ROOTFS/etc/dpkg/dpkg.cfg.d/slim" <<'CFG'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
CFG
# Package lists and downloaded .debs never stay in a layer.
cat >"$ROOTFS/etc/apt/apt.conf.d/slim" <<'CFG'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/*.bin || true"; };
Acquire::GzipIndexes "true";
CFG
rm -f "$ROOTFS/etc/apt/sources.list"
cat >"$ROOTFS/etc/apt/sources.list.d/debian.sources" <<SRC
Types: deb
URIs: $MIRROR
Suites: $SUITE $SUITE-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $SECURITY
Suites: $SUITE-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
find "$ROOTFS/usr/share/doc" -mindepth 2 ! -name copyright -delete 2>/dev/null || true
rm -rf "$ROOTFS"/usr/share/man/* "$ROOTFS"/usr/share/info/* "$ROOTFS"/var/lib/apt/lists/* \
       "$ROOTFS"/var/cache/apt/*.bin "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/log/*.log
find "$ROOTFS/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} + 2>/dev/null || true

say "importing as $TAG"
tar --numeric-owner --xattrs -C "$ROOTFS" -c . | docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["bash"]' - "$TAG" >/dev/null
say "$TAG built: $(docker image inspect --format '{{.Id}} {{.Size}} bytes' "$TAG")"
