# syntax=docker/dockerfile:1
# Clarion's image: one image for every role (CLARION_ROLE=all, api or worker).
# Build: docker build -t clarion .   Run: docker run -p 3000:3000 -v clarion-data:/data clarion
ARG NODE_VERSION=20.20

# Build stage: the whole toolchain, compiled TypeScript, then only production dependencies kept.
FROM node:${NODE_VERSION}-bookworm-slim AS build
WORKDIR /app
# better-sqlite3 compiles itself when no prebuilt binary matches the platform.
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*
COPY package.json package-lock.json tsconfig.json tsconfig.build.json ./
COPY src ./src
# npm ci runs the package's prepare step, which compiles src/ into dist/.
RUN npm ci --no-audit --no-fund && npm prune --omit=dev --no-audit --no-fund

# Runtime stage: node, the compiled code and production dependencies, run as the unprivileged user.
FROM node:${NODE_VERSION}-bookworm-slim
# MALLOC_ARENA_MAX: glibc reads it only at start; 2 arenas instead of one per thread (up to 8 per
# CPU) keep the threads' malloc memory together (docs/memory.md).
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=3000 \
    CLARION_DATA_DIR=/data \
    MALLOC_ARENA_MAX=2
WORKDIR /app
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json LICENSE ./
RUN mkdir -p /data && chown node:node /data
USER node
VOLUME ["/data"]
# 3000: the HTTP API. 2525: inbound SMTP (CLARION_INBOUND_SMTP_PORT).
EXPOSE 3000 2525
# node's own fetch: the slim image has no curl. A worker-only container has no HTTP port: its
# compose service turns this check off.
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 3000) + '/status').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# --max-semi-space-size: the main thread's young generation bounded (src/heap-settings.ts,
# MAIN_SEMI_SPACE_MB; docs/memory.md). V8 reads it only at start, so it is given here.
CMD ["node", "--max-semi-space-size=8", "dist/main.js", "serve"]
