# One image for every function: FUNCTION_TARGET selects which one a container serves.
#   docker build -t edgeai .
#   docker run -e FUNCTION_TARGET=<name> -p 8080:8080 edgeai
FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# onnxruntime-node ships the CPU build we use; its install script would fetch CUDA binaries from
# outside the npm registry. ONNXRUNTIME_NODE_INSTALL=skip makes it exit at once: this image's npm
# (10, with Node 20) runs the script, as it knows nothing of package.json's allowScripts.
RUN ONNXRUNTIME_NODE_INSTALL=skip npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY bin ./bin
COPY functions ./functions
COPY shared ./shared
# One file per function and its shared chunks (esbuild): a cold start loads a handful of files
# instead of hundreds of modules. onnxruntime-node stays external (native code).
RUN npm run bundle && npm prune --omit=dev --no-audit --no-fund

FROM node:20-bookworm-slim
ENV NODE_ENV=production PORT=8080
WORKDIR /app
COPY --from=build --chown=root:root /app/package.json ./
COPY --from=build --chown=root:root /app/node_modules ./node_modules
COPY --from=build --chown=root:root /app/dist/bundle ./dist/bundle
# The trained models (npm run models); workers load them by file:// URL under /app/models.
COPY models ./models
# The ASET scenario (topologies, variants, apps) aset-scheduler reads at start-up, under
# /app/data/aset; its network's card pins these files, so they ship with the models.
COPY data/aset ./data/aset
# The code is owned by root and read-only to the user the process runs as.
USER node
EXPOSE 8080
CMD ["node", "dist/bundle/serve.mjs"]
