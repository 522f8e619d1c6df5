#!/usr/bin/env bash
# Chromium and its WebDriver for the console's browser tests (tests/web/): Debian's chromium and
# chromium-driver (/usr/bin/chromium, /usr/bin/chromedriver). Installed when missing and the machine can
# (root with apt-get); otherwise says what to do (the browser tests then skip, or fail under CI=true).
set -euo pipefail
if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then exit 0; fi
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q --no-install-recommends chromium chromium-driver >/dev/null 2>&1 || {
        apt-get update -q >/dev/null 2>&1 && apt-get install -y -q --no-install-recommends chromium chromium-driver >/dev/null
    }
    echo "installed /usr/bin/chromium and /usr/bin/chromedriver (Debian chromium, chromium-driver)"
else
    echo "note: /usr/bin/chromium or /usr/bin/chromedriver is missing; install Debian's chromium and" \
         "chromium-driver for the console's browser tests (they skip without them)" >&2
fi
