# The README's two commands live here. `make test` works on a fresh clone with only Node, npm
# and (or the rights to install) redis-server.
.PHONY: test test-redis-cluster demo local deps redis-server kubectl typecheck lint unit integration bench build

test: deps redis-server kubectl typecheck lint unit integration

# The seed's JointInferenceService, an ML graph and a federated job on the embedded local stack
# (no cluster): docs/local-stack.md.
demo: deps redis-server
	npm run -s demo

# The embedded stack kept running until Ctrl-C (docs/local-stack.md).
local: deps redis-server
	npm run -s local

# npm ci when node_modules is missing or older than the lockfile. onnxruntime-node ships the CPU
# build we use; ONNXRUNTIME_NODE_INSTALL=skip stops its install script from fetching CUDA binaries
# from outside the npm registry, should the script run at all (package.json's allowScripts).
deps: node_modules/.installed
node_modules/.installed: package-lock.json
	ONNXRUNTIME_NODE_INSTALL=skip npm ci --no-audit --no-fund
	@touch $@

redis-server:
	@sh scripts/ensure-redis-server.sh

# Not required: without it the kubectl tests skip (the script says so).
kubectl:
	@sh scripts/ensure-kubectl.sh

typecheck: deps
	npx tsc --noEmit

lint: deps
	npx eslint .
	npx prettier --check .

# The fast lane (vitest.config.ts's `unit` project): in-process code, in-process HTTP servers
# and the run's one Redis.
unit: deps redis-server
	npx vitest run --project unit

# The rest: the local stack, child processes (redis-server, kubectl, esbuild, node), retraining.
integration: deps redis-server kubectl
	npx vitest run --project integration

build: deps
	npx tsc -p tsconfig.build.json

# Every benchmark folder under bench/ and research/bench/ (each prints tables, then a JSON line).
bench: deps redis-server
	@for b in $$( (ls bench; ls research/bench) | grep -v -e support -e '\.ts$$'); do npm run bench -- $$b || exit 1; done

# Every test file that uses the run's Redis, against a private Redis Cluster (3 masters, 3
# replicas) that test/support/global-setup.ts starts and stops; then the failover tests
# (test/failover: masters SIGKILLed under load, on Sentinel and on Cluster, figures printed as
# "failover figures {...}"). `make test` keeps one Redis and leaves both out.
test-redis-cluster: deps redis-server
	EDGEAI_TEST_REDIS=cluster npx vitest run $$(grep -rl --include='*.test.ts' -e 'support/redis.js' test)
	EDGEAI_TEST_FAILOVER=1 npx vitest run test/failover
