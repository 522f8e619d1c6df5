# wormhole in a container: `docker run --rm --network host wormhole --task-id N --task-db mysql://...`.
# Built by `make docker` on debian:bookworm-slim (scripts/docker-base.sh makes it when no registry has it).
# Layers from the slowest-changing: system packages, then the Python dependencies (their list read from
# setup.cfg by scripts/docker-build.sh), then the code, so a code change reinstalls only the last small layer.
# Few instructions, metadata first: the classic builder commits every instruction through a container, and
# with the vfs storage driver each of those copies the whole tree (a 1 GB copy per step once pyspark is in).
FROM debian:bookworm-slim

ENV VIRTUAL_ENV=/opt/wormhole \
    PATH=/opt/wormhole/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /srv/wormhole
ENTRYPOINT ["wormhole"]
CMD ["--help"]

# Java 17 runs Spark; Debian's python3 is 3.11; libmariadb-java (Connector/J) and libpostgresql-jdbc-java
# (pgjdbc) are the JDBC drivers wormhole/spark/session.py puts on Spark's classpath (/usr/share/java/...).
# A non-root user; UID 1000 so a bind-mounted directory of a typical host user is writable as it is. The
# working directory holds var/ (the default SQLite task DB, dirty rows, Spark's metastore).
RUN mkdir -p /usr/share/man/man1 \
    && apt-get update -q \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        openjdk-17-jre-headless python3 python3-venv libmariadb-java libpostgresql-jdbc-java ca-certificates \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/log/apt /var/log/dpkg.log \
    && java -version 2>&1 | head -n 1 && python3 --version \
    && test -f /usr/share/java/mariadb-java-client.jar && test -f /usr/share/java/postgresql.jar \
    && useradd --uid 1000 --user-group --create-home --home-dir /home/wormhole --shell /usr/sbin/nologin wormhole \
    && install -d -o wormhole -g wormhole /srv/wormhole /srv/wormhole/var \
    && chown wormhole:wormhole /srv/wormhole

# The dependencies: rebuilt only when their list changes, never for a code change. build/docker/ holds
# what scripts/docker-build.sh staged: requirements.txt (install_requires and the spark extra of setup.cfg)
# and ca.crt, the build host's CA bundle for pip behind a TLS-inspecting proxy (empty means pip's own).
COPY build/docker/ /tmp/build/
RUN python3 -m venv "$VIRTUAL_ENV" \
    && if [ -s /tmp/build/ca.crt ]; then export PIP_CERT=/tmp/build/ca.crt; fi \
    && pip install --no-cache-dir -q -r /tmp/build/requirements.txt "setuptools>=61" wheel \
    && rm -rf /tmp/build

# The code (the whole context: .dockerignore lets only the package and its metadata in): a plain,
# non-editable install, offline (the build backend is installed above), leaving the dependencies alone.
COPY . /tmp/build/
RUN pip install --no-cache-dir -q --no-deps --no-build-isolation /tmp/build && rm -rf /tmp/build \
    && wormhole --version

# Last, so that everything above is installed by root and read-only to the user who runs it.
USER wormhole
