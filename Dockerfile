# modelrelay images: one Dockerfile, three targets.
#
#   docker build --target server -t modelrelay-server .
#   docker build --target worker -t modelrelay-worker .
#   docker build --target mock   -t modelrelay-mock .     # demo backend, optional
#
# Multi-stage: `build` resolves and type-checks the dependencies once (npm
# packages pinned by deno.lock); the final stages copy the app and the filled
# Deno cache and run as the image's unprivileged `deno` user, offline
# (--cached-only), with the same explicit permissions as the deno.json tasks.
# Not built in this repository's CI: its machines have no Docker engine.

ARG DENO_VERSION=2.9.6

FROM denoland/deno:debian-${DENO_VERSION} AS build
ENV DENO_DIR=/deno-dir DENO_NO_UPDATE_CHECK=1
WORKDIR /app
COPY deno.json deno.lock ./
COPY core/ core/
COPY shell/ shell/
COPY mock/ mock/
RUN deno install --frozen --entrypoint \
      shell/server/main.ts shell/worker/main.ts mock/main.ts \
 && deno check shell/server/main.ts shell/worker/main.ts mock/main.ts

FROM denoland/deno:debian-${DENO_VERSION} AS runtime
ENV DENO_DIR=/deno-dir DENO_NO_UPDATE_CHECK=1 NO_COLOR=1
WORKDIR /app
# The cache belongs to `deno` (Deno writes its code cache there); the app stays
# root-owned and read-only to the process.
COPY --from=build --chown=deno:deno /deno-dir /deno-dir
COPY --from=build --chown=root:root /app /app
RUN mkdir -p /data && chown deno:deno /data
USER deno

FROM runtime AS server
# Listen on every interface inside the container; publish the port to choose
# who can reach it. API keys live in /data (mount a volume to keep them).
ENV LISTEN_ADDR=0.0.0.0:8080 MODELRELAY_DB_PATH=/data/modelrelay.db
VOLUME /data
EXPOSE 8080
ENTRYPOINT ["deno", "run", "--cached-only", "--allow-net", "--allow-env", \
  "--allow-read", "--allow-write=/data", "shell/server/main.ts"]

FROM runtime AS worker
ENTRYPOINT ["deno", "run", "--cached-only", "--allow-net", "--allow-env", \
  "--allow-read", "--allow-sys=hostname", "shell/worker/main.ts"]

FROM runtime AS mock
EXPOSE 8000
ENTRYPOINT ["deno", "run", "--cached-only", "--allow-net", "mock/main.ts", \
  "--hostname", "0.0.0.0", "--port", "8000", "--delay-ms", "40"]
