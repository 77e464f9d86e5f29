# The README's two commands live here. `make test` works on a fresh clone with only Node, npm
# and (or the rights to install) redis-server.
.PHONY: test demo local deps redis-server kubectl typecheck lint unit bench build

test: deps redis-server kubectl typecheck lint unit

# The seed's JointInferenceService on the embedded local stack (no cluster): see README.
demo: deps redis-server
	npm run -s demo

# The embedded stack kept running until Ctrl-C (README: "A stack that stays up").
local: deps redis-server
	npm run -s local

# npm ci when node_modules is missing or older than the lockfile.
deps: node_modules/.installed
node_modules/.installed: package-lock.json
	npm ci --no-audit --no-fund
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

unit: deps
	npx vitest run

build: deps
	npx tsc -p tsconfig.build.json

# Every benchmark folder under bench/ (each prints tables and a final JSON line).
bench: deps redis-server
	@for b in $$(ls bench | grep -v -e support -e '\.ts$$'); do npm run bench -- $$b || exit 1; done
