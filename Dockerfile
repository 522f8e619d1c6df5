# wormhole in a container: `docker run --rm --network host wormhole --task-id N --task-db mysql://...`.
# Built by `make docker` on debian:bookworm-slim (scripts/docker-base.sh makes it when no registry has it).
# Layers from the slowest-changing: system packages, then the Python dependencies read from setup.cfg,
# then the code, so a code change reinstalls only the last small layer.
FROM debian:bookworm-slim AS system

ARG DEBIAN_FRONTEND=noninteractive
# Java 17 runs Spark; Debian's python3 is 3.11; libmariadb-java (Connector/J) and libpostgresql-jdbc-java
# (pgjdbc) are the JDBC drivers wormhole/spark/session.py puts on Spark's classpath (/usr/share/java/...).
RUN mkdir -p /usr/share/man/man1 \
    && apt-get update -q \
    && apt-get install -y -q --no-install-recommends \
        openjdk-17-jre-headless python3 python3-venv libmariadb-java libpostgresql-jdbc-java ca-certificates \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/log/apt /var/log/dpkg.log \
    && java -version 2>&1 | head -n 1 && python3 --version \
    && test -f /usr/share/java/mariadb-java-client.jar && test -f /usr/share/java/postgresql.jar

ENV VIRTUAL_ENV=/opt/wormhole \
    PATH=/opt/wormhole/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# A non-root user; UID 1000 so a bind-mounted directory of a typical host user is writable as it is.
# The working directory holds var/ (the default SQLite task DB, dirty rows, Spark's metastore). Set up
# here, before the big layers: with the vfs storage driver every later step copies the whole tree.
RUN useradd --uid 1000 --user-group --create-home --home-dir /home/wormhole --shell /usr/sbin/nologin wormhole \
    && install -d -o wormhole -g wormhole /srv/wormhole /srv/wormhole/var
WORKDIR /srv/wormhole
ENTRYPOINT ["wormhole"]
CMD ["--help"]

# The dependency list (install_requires and the spark extra) read from setup.cfg in a stage of its
# own: the next stage copies only the list, so editing anything else in setup.cfg reinstalls nothing.
FROM system AS requirements
COPY setup.cfg /tmp/setup.cfg
RUN python3 -c "import configparser; p = configparser.ConfigParser(); p.read('/tmp/setup.cfg'); \
reqs = p['options']['install_requires'] + p['options.extras_require']['spark']; \
print('\\n'.join(r.strip() for r in reqs.splitlines() if r.strip()))" > /tmp/requirements.txt

# The dependencies: rebuilt only when their list changes, never for a code change. ca.crt is the build
# host's CA bundle (scripts/docker-build.sh), for pip behind a TLS-inspecting proxy; empty means pip's own.
FROM system
COPY --from=requirements /tmp/requirements.txt /tmp/build/requirements.txt
COPY build/docker/ca.crt /tmp/build/ca.crt
RUN python3 -m venv "$VIRTUAL_ENV" \
    && if [ -s /tmp/build/ca.crt ]; then export PIP_CERT=/tmp/build/ca.crt; fi \
    && pip install --no-cache-dir -q -r /tmp/build/requirements.txt \
    && pip install --no-cache-dir -q "setuptools>=61" wheel \
    && rm -rf /tmp/build

# The code (the whole context: .dockerignore lets only the package and its metadata in): a plain,
# non-editable install, offline (the build backend is installed above), leaving the dependencies alone.
COPY . /tmp/build/
RUN pip install --no-cache-dir -q --no-deps --no-build-isolation /tmp/build && rm -rf /tmp/build \
    && wormhole --version

# Last, so that everything above is installed by root and read-only to the user who runs it.
USER wormhole
