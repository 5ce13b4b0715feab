# Felix. `make` lists the targets; `make test` is the whole of CI.
SHELL := /bin/bash
GO ?= go
TAGS := invariants
# Packages with goroutines sharing state; they also run under -race.
RACE_DIRS := ioruntime udp fanout commit segment broker client controlplane cluster internal auth
RACE_PKGS = $(shell $(GO) list $(addprefix ./,$(addsuffix /...,$(wildcard $(RACE_DIRS)))))
FUZZTIME ?= 10s
# Major version of the clang that built the committed cpuprofile/*_bpfel.o.
# Same clang, same bytes (bpf2go maps the source path away and drops the
# clang ident); another version emits different but equally valid code.
BPF_CLANG_MAJOR := 14

.DEFAULT_GOAL := help

.PHONY: help
help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

.PHONY: run
run: ## run a broker on localhost with the embedded defaults
	$(GO) run ./cmd/felix-broker

.PHONY: build
build: ## build every binary into bin/
	$(GO) build -o bin/ ./cmd/... ./tools/felix
	$(GO) build -o bin/felix-loadgen ./tools/loadgen
	$(GO) build -o bin/felixtrace ./tools/felixtrace

.PHONY: test
test: fmt-check vet cross tidy-check generate-check unit race fuzz-smoke bench-smoke ## everything CI runs
	@echo "make test: all checks passed"

.PHONY: fmt-check
fmt-check: ## fail if gofmt would change a file
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

.PHONY: vet
vet: ## go vet on this platform
	$(GO) vet ./...
	$(GO) vet -tags $(TAGS) ./...

.PHONY: cross
cross: ## vet for darwin and windows: Linux-only code must have honest fallbacks
	GOOS=darwin $(GO) vet ./...
	GOOS=windows $(GO) vet ./...

.PHONY: tidy-check
tidy-check: ## fail if go.mod/go.sum are not tidy
	$(GO) mod tidy -diff

.PHONY: generate
generate: ## rebuild the eBPF objects with bpf2go (needs clang)
	$(GO) generate ./cpuprofile/...

# Regenerates into a copy of the module, so the tree is never touched, and
# compares every generated file. The Go bindings are compared always; the
# objects byte for byte only under the clang major version that built them.
.PHONY: generate-check
generate-check: ## fail if the committed eBPF objects or bindings are stale (skipped without clang)
	@if ! command -v clang >/dev/null; then echo "generate-check: clang not found, skipped"; exit 0; fi; \
	tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	cp go.mod go.sum "$$tmp/" && mkdir "$$tmp/cpuprofile" && \
	cp -r cpuprofile/bpf cpuprofile/*.go "$$tmp/cpuprofile/" && rm -f "$$tmp"/cpuprofile/*_bpfel.* && \
	(cd "$$tmp" && $(GO) generate ./cpuprofile/...) || exit 1; \
	major=$$(clang -dumpversion | cut -d. -f1); objs=1; \
	if [ "$$major" != "$(BPF_CLANG_MAJOR)" ]; then objs=0; \
		echo "generate-check: clang $$major is not clang $(BPF_CLANG_MAJOR), which built the objects: comparing the Go bindings only"; fi; \
	status=0; \
	for f in $$( (cd cpuprofile && ls *_bpfel.go *_bpfel.o; cd "$$tmp/cpuprofile" && ls *_bpfel.go *_bpfel.o) 2>/dev/null | sort -u); do \
		case "$$f" in *.o) [ "$$objs" = 1 ] || continue;; esac; \
		if ! cmp -s "cpuprofile/$$f" "$$tmp/cpuprofile/$$f"; then echo "generate-check: cpuprofile/$$f is stale or missing: run make generate"; status=1; fi; \
	done; \
	[ "$$status" = 0 ] && echo "generate-check: cpuprofile eBPF objects and bindings up to date"; exit $$status

.PHONY: unit
unit: ## go test ./... with invariant checks on (includes the layering check)
	$(GO) test -tags $(TAGS) -count=1 ./...

.PHONY: race
race: ## go test -race -short on the concurrency packages (long e2e runs stay in unit)
	$(GO) test -race -short -tags $(TAGS) -count=1 $(RACE_PKGS)

.PHONY: fuzz-smoke
fuzz-smoke: ## run every fuzz target briefly (FUZZTIME, default 10s)
	scripts/fuzz.sh $(FUZZTIME)

.PHONY: fuzz
fuzz: ## run every fuzz target for 10 minutes
	scripts/fuzz.sh 10m

.PHONY: bench
bench: ## run every benchmark (see docs/BENCHMARKS.md for the recorded runs)
	$(GO) test -run='^$$' -bench=. -benchmem ./...

.PHONY: reliability
reliability: ## long fault scenarios (kill -9 x50 under load, under mixed load and with idempotent publishers; hostile swarm at 4x; hostile peers 8 s each; the CLI pairs 20 and 10 times; cache_put_if read-modify-write 10 s; 200 faults on a replicated stream; 10 rounds of rolling restarts; a lost broker replaced with 100000 records; short versions run in make test)
	FELIX_KILL_ROUNDS=50 FELIX_HOSTILE_SCALE=4 FELIX_CLI_PAIR_RUNS=20 FELIX_CAS_SECONDS=10 FELIX_REPLICATION_FAULTS=200 FELIX_ROLLING_ROUNDS=10 FELIX_REPLACE_RECORDS=100000 $(GO) test -count=1 -v -timeout 90m \
		-run 'TestKill9|TestHostileClientsAreContained|TestHostilePeers|TestCLISubscriberLosesNothingOnADefaultBroker|TestCacheConditionalNoLostUpdate|TestGroupPoisonRecordSurvivesKill9|TestReplicationFaultsLoseNothingAcked|TestRollingRestartLosesNoPublish|TestReplaceLostBroker|TestGrowBalancesReplicas' ./cmd/felix-broker

.PHONY: soak
soak: ## mixed workload against the real binary for DURATION (default 30m); make test runs 2m
	FELIX_SOAK_DURATION=$(or $(DURATION),30m) $(GO) test -count=1 -v -timeout 0 -run '^TestSoak$$' ./cmd/felix-broker

.PHONY: bench-matrix
bench-matrix: ## the loadgen matrix against fresh brokers: JSON, traces and SVG charts into out/bench/<date> (~15 min)
	scripts/bench-matrix.sh
.PHONY: bench-floor
bench-floor: ## docs/BENCHMARKS.md, the floor: acked and on_commit publishes next to bare quic-go and a raw fdatasync, two processes, 5 rounds (~3 min)
	scripts/bench-go.sh 5 tools/loadgen/floor '^BenchmarkFloor$$'

.PHONY: bench-codec
bench-codec: ## docs/BENCHMARKS.md, codec: wire encode/decode, 5 fresh processes (~1 min)
	scripts/bench-go.sh 5 wire '64x4K$$|JSON' 2s

.PHONY: bench-pubsub
bench-pubsub: ## docs/BENCHMARKS.md, pub/sub: latency, throughput vs the relay, fanout, isolation (~6 min)
	scripts/bench-broker.sh 5

.PHONY: bench-delivery
bench-delivery: ## docs/BENCHMARKS.md, delivery: catch-up vs block, a paused and slow subscribers, 500 subscribers (~25 min)
	scripts/bench-delivery.sh 5

.PHONY: bench-durable
bench-durable: ## docs/BENCHMARKS.md, durable storage: device, append matrix, durable vs ephemeral, recovery (~15 min)
	scripts/bench-durable.sh 3

.PHONY: bench-semantics
bench-semantics: ## docs/BENCHMARKS.md, caches and consumer groups: durable cache scaling, group drain (~4 min)
	FELIX_BENCH_CASE_TIME=6s scripts/bench-go.sh 10 broker '^BenchmarkDurableCachePutScaling$$'
	scripts/bench-go.sh 3 broker '^BenchmarkGroupDrain$$' 20000x

.PHONY: bench-udp
bench-udp: ## docs/BENCHMARKS.md, packet path: stock vs udp conn vs pinned, bimodality (~12 min)
	scripts/bench-udp.sh 5 20

.PHONY: bench-cluster
bench-cluster: ## docs/BENCHMARKS.md, cluster: forwarding cost; two brokers vs one in network namespaces (root)
	scripts/bench-go.sh 5 broker '^BenchmarkClusterForward4KiBx64$$'
	scripts/bench-cluster.sh 3

.PHONY: bench-replication
bench-replication: ## docs/BENCHMARKS.md, replication: RF=1 vs RF=3 quorum / leader on three local brokers, latency, throughput, CPU/GB, raft batching (~12 min)
	scripts/bench-replication.sh 5

.PHONY: bench-controlplane
bench-controlplane: ## docs/BENCHMARKS.md, control plane and auth: create, changes page, exchange, token checks
	scripts/bench-go.sh 3 controlplane '^Benchmark(CreateStream|ChangesPage)$$' 2s
	scripts/bench-go.sh 3 auth '^Benchmark(FelixVerify|IdPVerify|Mint|Check)$$' 1s

.PHONY: bench-smoke
bench-smoke: ## run each benchmark once so they keep compiling and working
	$(GO) test -run='^$$' -bench=. -benchtime=1x ./... > /dev/null

.PHONY: knobs-readme
knobs-readme: ## regenerate the README knob table from the registry
	$(GO) test ./cmd/felix-broker -run TestREADMEKnobTable -update
	$(GO) test ./cmd/felix-controlplane -run TestREADMEKnobTable -update

.PHONY: clean
clean: ## remove build output
	rm -rf bin/
