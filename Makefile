SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help
.DELETE_ON_ERROR:

GO ?= go
LISTEN ?= 127.0.0.1:9083

.PHONY: help image run test prefetch unit lint tidy-check bench bench-go bench-e2e fuzz e2e twin build bench-tool deps deploy-check fleet-check chaos chaos-short kafka-outage

# A bare `make` prints this list and installs nothing; `make test` installs
# what the tests need.
help: ## List the targets (this text)
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-13s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null)
# The commit, stamped here rather than left to -buildvcs, which GOFLAGS
# may turn off.
REVISION ?= $(shell r=$$(git rev-parse HEAD 2>/dev/null) && { git diff --quiet HEAD 2>/dev/null || r=$$r-dirty; echo $$r; })

build: ## Build the binaries into bin/ (hmsproxy, hmscli, hmsbench); VERSION (default git describe) and REVISION are what hmsproxy --version says
	$(GO) build -ldflags "-X main.version=$(VERSION) -X main.revision=$(REVISION)" -o bin/ ./cmd/...

# The image is tagged with the Helm chart's appVersion, the tag the chart
# pulls when image.tag is empty.
IMAGE ?= hmsproxy:$(shell sed -n 's/^appVersion: *"*\([^"]*\)"*/\1/p' deploy/helm/hmsproxy/Chart.yaml)
image: ## Build the container image, tagged as the Helm chart expects (IMAGE=hmsproxy:<chart appVersion>)
	docker build -t $(IMAGE) .

run: ## The proxy in front of an embedded demo metastore, ready for a client
	$(GO) run ./cmd/hmsproxy --demo --listen $(LISTEN)

lint: tidy-check ## gofmt and go vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

tidy-check: ## Fails when go.mod/go.sum drift from the code
	$(GO) mod tidy -diff

deps: ## Install what the tests need (redis-server, headless Chromium), idempotently
	bash scripts/deps.sh
	bash scripts/browser-deps.sh

unit: deps ## Unit tests, all under the race detector (most packages run goroutines)
	GO=$(GO) bash scripts/unit.sh

e2e: ## Real Hive Metastores 2.3, 3.1, 4.0 with real clients, through the proxy
	bash scripts/e2e.sh

twin: ## The twin: random call sequences through the proxy and straight to real metastores, replies compared (TWIN_SECONDS=600 per version, TWIN_VERSIONS=2.3,3.1,4.0, TWIN_NODES=1, TWIN_SEED replays)
	GO=$(GO) bash scripts/twin.sh

deploy-check: ## Helm chart, alert rules, systemd unit, Dockerfile build (installs helm and promtool into .cache/tools once)
	GO=$(GO) bash scripts/deploy-check.sh

fleet-check: ## Three nodes behind a real HAProxy (SIGTERM and SIGKILL under load) scraped by a real Prometheus (installs both into .cache/tools once)
	GO=$(GO) bash scripts/fleet-check.sh

CHAOS_SECONDS ?= 120
chaos: ## Hostile clients against a proxy process while a well-behaved client measures; fails on a p99 over 2x quiet, a call over 1 s, any error, RSS past the in-flight budget + 64 MiB or a dead process (CHAOS_SECONDS=120, CHAOS_SEED replays, CHAOS_ONLY=slowloris,..., CHAOS_PROXY_BIN=another build)
	HMSPROXY_CHAOS=1 CHAOS_SECONDS=$(CHAOS_SECONDS) GO=$(GO) $(GO) test -count=1 -v -timeout 30m -run '^TestChaos$$' ./e2e/chaos

chaos-short: ## The chaos suite for 20 s, as make test runs it (under a minute); its p99 bound is 3x, as its few hundred slower calls make p99 their third slowest
	CHAOS_P99_RATIO=3 $(MAKE) --no-print-directory chaos CHAOS_SECONDS=20

test: prefetch lint unit chaos-short deploy-check fleet-check e2e ## Everything CI runs

KAFKA_OUTAGE_SECONDS ?= 30
kafka-outage: ## The change feed's e2e (HMS 3.1, a real Kafka broker) with a 30 s broker outage: clients' p99 unmoved, the feed catches up (make test runs it with a 5 s outage)
	bash testbed/kafka.sh fetch && bash testbed/clients/atlas_reader.sh --build
	KAFKA_OUTAGE_SECONDS=$(KAFKA_OUTAGE_SECONDS) HMSPROXY_E2E=3.1 $(GO) test -count=1 -v -timeout 15m -run '^TestKafkaChangeFeedE2E$$' ./e2e | grep -E '^(e2e:|ok|FAIL|---|\s+\S+_test\.go:)'

prefetch: ## Fetch the e2e test bed in the background while the other checks run
	GO=$(GO) bash scripts/prefetch.sh start

bench: bench-tool bench-go bench-e2e ## The demo comparison table, the Go benchmarks, then the real-metastore ones (ratios measured side by side)

bench-go: ## Go benchmarks next to the code they measure
	$(GO) test -run='^$$' -bench=. -benchtime=2000x ./...

bench-e2e: ## Write throughput through one node with and without the Redis bus, against a real HMS 3.1 (about 2 minutes)
	bash testbed/hms.sh fetch 3.1
	HMSPROXY_E2E=3.1 HMSPROXY_E2E_BENCH=1 $(GO) test -count=1 -v -timeout 15m -run='^TestWriteThroughputReal$$' ./e2e | grep -E '^(e2e:|ok|FAIL|---|\s+\S+_test\.go:)'

FUZZTIME ?= 10m
fuzz: ## Fuzz the message reader (FUZZTIME=10m)
	$(GO) test -run='^$$' -fuzz=FuzzReader -fuzztime=$(FUZZTIME) ./thrift/wire

bench-tool: ## Latency of the demo metastore, direct vs through the proxy, cold and warm (under 3 minutes)
	$(GO) run ./cmd/hmsbench --demo --phases cold,warm --duration 6s
