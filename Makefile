# Everything builds from the Go module proxy; nothing is downloaded from elsewhere.

# Pinned tool versions. etcd and Kubernetes are pinned by the go.mod of their
# tools module; the variables here must agree with it (checked before building).
ETCD_VERSION                := v3.6.16
KUBERNETES_VERSION          := v1.37.2
METALLB_VERSION             := v0.15.2
HELM_VERSION                := v3.22.0
CERT_MANAGER_VERSION        := v1.21.2
PROMETHEUS_OPERATOR_VERSION := v0.85.0
CONTROLLER_GEN_VERSION      := v0.23.0
GOLANGCI_LINT_VERSION       := v2.15.0

BIN            := $(CURDIR)/bin
CONTROLLER_GEN := bin/controller-gen
GOLANGCI_LINT  := bin/golangci-lint
CONTROLPLANE   := bin/etcd bin/kube-apiserver bin/kube-controller-manager bin/metallb-controller bin/metallb-speaker bin/metallb-crds bin/helm bin/cert-manager-crds bin/cainjector bin/monitoring-crds bin/kubectl

# test/controlplane finds etcd, kube-apiserver and kube-controller-manager here.
export CONTROLPLANE_BIN := $(BIN)

TEST_TIMEOUT ?= 30m
# What each fuzz target gets from `make fuzz`: an execution count, not a
# duration. Go 1.26's fuzz coordinator can fail a duration-bounded run at its
# deadline without any failing input (go.dev/issue/75804, fixed in Go 1.27);
# a count has no deadline. 20000 executions take 1-20 s per target here.
FUZZTIME ?= 20000x
# Number of objects for `make bench`.
N ?= 1000
LARGE ?= 10000

# A 2-core machine cannot afford two Go builds of Kubernetes at once, and
# generate/lint/test must not interleave: run every recipe in order.
.NOTPARALLEL:

.DEFAULT_GOAL := build

.PHONY: help
help: ## List targets.
	@grep -E '^[a-zA-Z_/.-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | expand -t 32

##@ Control plane binaries (built once; rebuilt when the tools module changes)

bin/etcd: tools/etcd/go.mod tools/etcd/go.sum ## Build etcd from tools/etcd.
	@$(call check-pin,etcd,go.etcd.io/etcd/server/v3,ETCD_VERSION)
	cd tools/etcd && go build -o $(BIN)/etcd go.etcd.io/etcd/server/v3
	@touch $@ # go build leaves an up-to-date binary untouched; make compares mtimes

bin/kube-apiserver: tools/kube/go.mod tools/kube/go.sum ## Build kube-apiserver from tools/kube.
	@$(call check-pin,kube,k8s.io/kubernetes,KUBERNETES_VERSION)
	cd tools/kube && go build -o $(BIN)/kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
	@touch $@

bin/kubectl: tools/kube/go.mod tools/kube/go.sum ## Build kubectl from tools/kube (test/playground runs docs/playground.md and docs/walkthrough.md with it).
	@$(call check-pin,kube,k8s.io/kubernetes,KUBERNETES_VERSION)
	cd tools/kube && go build -o $(BIN)/kubectl k8s.io/kubernetes/cmd/kubectl
	@touch $@

bin/kube-controller-manager: tools/kube/go.mod tools/kube/go.sum ## Build kube-controller-manager from tools/kube.
	@$(call check-pin,kube,k8s.io/kubernetes,KUBERNETES_VERSION)
	cd tools/kube && go build -o $(BIN)/kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager
	@touch $@

bin/metallb-controller: tools/metallb/go.mod tools/metallb/go.sum ## Build MetalLB's controller from tools/metallb.
	@$(call check-pin,metallb,go.universe.tf/metallb,METALLB_VERSION)
	cd tools/metallb && go build -o $(BIN)/metallb-controller go.universe.tf/metallb/controller
	@touch $@

# The speaker announces in test/wire's network namespaces (memberlist off).
bin/metallb-speaker: tools/metallb/go.mod tools/metallb/go.sum ## Build MetalLB's speaker from tools/metallb.
	@$(call check-pin,metallb,go.universe.tf/metallb,METALLB_VERSION)
	cd tools/metallb && go build -o $(BIN)/metallb-speaker go.universe.tf/metallb/speaker
	@touch $@

# MetalLB's CRDs ship inside its module; copied out (the module cache is read-only).
bin/metallb-crds: tools/metallb/go.mod tools/metallb/go.sum ## Copy MetalLB's CRDs from its module.
	rm -rf $@ && mkdir -p $@
	cp "$$(cd tools/metallb && go list -m -f '{{.Dir}}' go.universe.tf/metallb)"/config/crd/bases/*.yaml $@/
	chmod -R u+w $@

bin/helm: tools/helm/go.mod tools/helm/go.sum ## Build the Helm CLI from tools/helm (for test/charts).
	@$(call check-pin,helm,helm.sh/helm/v3,HELM_VERSION)
	cd tools/helm && go build -o $(BIN)/helm helm.sh/helm/v3/cmd/helm
	@touch $@

# cert-manager's CRDs are data in its module (test/charts applies the charts'
# Issuer and Certificate); copied out of the module cache like MetalLB's.
bin/cert-manager-crds: bin/.version-cert-manager-crds-$(CERT_MANAGER_VERSION) ## Copy cert-manager's CRDs from its module.
	rm -rf $@ && mkdir -p $@
	$(call module-dir,github.com/cert-manager/cert-manager@$(CERT_MANAGER_VERSION)); \
		cp "$$dir"/deploy/crds/*.yaml $@/
	chmod -R u+w $@

# The ServiceMonitor and PrometheusRule CRDs, from prometheus-operator's module
# (test/charts applies the charts' ServiceMonitors and PrometheusRules).
bin/monitoring-crds: bin/.version-monitoring-crds-$(PROMETHEUS_OPERATOR_VERSION)-rules ## Copy the ServiceMonitor and PrometheusRule CRDs from prometheus-operator's module.
	rm -rf $@ && mkdir -p $@
	$(call module-dir,github.com/prometheus-operator/prometheus-operator@$(PROMETHEUS_OPERATOR_VERSION)); \
		cp "$$dir"/example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml \
			"$$dir"/example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml $@/
	chmod -R u+w $@

# cert-manager's CA injector, from its module's pkg/controller/cainjector
# (test/charts checks that it fills the core chart's webhook configurations).
bin/cainjector: tools/cainjector/go.mod tools/cainjector/go.sum tools/cainjector/main.go ## Build cert-manager's CA injector from tools/cainjector.
	@$(call check-pin,cainjector,github.com/cert-manager/cert-manager,CERT_MANAGER_VERSION)
	cd tools/cainjector && go build -o $(BIN)/cainjector .
	@touch $@

# $(call check-pin,<tools module>,<Go module>,<VARIABLE>): the tools module
# pins the Go module at the version the Makefile's variable names.
check-pin = grep -q '$(2) $($(3))' tools/$(1)/go.mod || \
	{ echo "tools/$(1)/go.mod does not pin $(2) $($(3)); update $(3) or the module" >&2; exit 1; }

# $(call module-dir,<module>@<version>): sets the shell variable dir to the
# module's directory in the module cache (downloaded first if need be).
module-dir = dir=$$(go mod download -json $(1) | sed -n 's/^\t"Dir": "\(.*\)",$$/\1/p'); \
	test -n "$$dir" || { echo "cannot download $(1)" >&2; exit 1; }

.PHONY: controlplane
controlplane: $(CONTROLPLANE) ## Build all control plane binaries.

##@ Tools (a version stamp makes a version bump rebuild the binary)

$(CONTROLLER_GEN): bin/.version-controller-gen-$(CONTROLLER_GEN_VERSION)
	GOBIN=$(BIN) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
	@touch $@

$(GOLANGCI_LINT): bin/.version-golangci-lint-$(GOLANGCI_LINT_VERSION)
	GOBIN=$(BIN) go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	@touch $@

bin/.version-%:
	@mkdir -p bin
	@rm -f bin/.version-$(shell echo '$*' | sed 's/-v[0-9].*//')-*
	@touch $@

##@ Development

# Each binary's ClusterRole is generated from the RBAC markers of its own wing.

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Regenerate deepcopy code, CRDs (config/crd), RBAC (config/rbac), webhook configurations (config/webhook), docs/api.md and the vendored cert-manager chart.
	$(CONTROLLER_GEN) object paths=./api/...
	@# Remove earlier output first so a deleted type does not leave a stale CRD behind.
	@rm -f config/crd/local.sdn.cozystack.io_*.yaml config/rbac/role.yaml config/rbac/metallb-iad/role.yaml config/webhook/manifests.yaml
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd
	$(CONTROLLER_GEN) rbac:roleName=address-controller paths=./internal/core/... output:rbac:artifacts:config=config/rbac
	$(CONTROLLER_GEN) rbac:roleName=metallb-iad paths=./internal/driver/... output:rbac:artifacts:config=config/rbac/metallb-iad
	$(CONTROLLER_GEN) webhook paths=./internal/core/webhook/... output:webhook:artifacts:config=config/webhook
	go run ./test/apidocs config/crd docs/api.md
	@# The core chart ships the CRDs as they are generated (test/charts checks it).
	cp config/crd/*.yaml charts/address-controller/crds/
	$(MAKE) --no-print-directory $(CERT_MANAGER_CHART)

# The core chart's optional cert-manager dependency (certManager.install),
# vendored from cert-manager's module: its chart source there carries v0.0.0
# placeholders that cert-manager's release tool stamps, and so does this.
# Committed, so `helm install` from a checkout needs no chart repository.
CERT_MANAGER_CHART := charts/address-controller/charts/cert-manager
.PHONY: $(CERT_MANAGER_CHART)
$(CERT_MANAGER_CHART):
	rm -rf $@ && mkdir -p $@
	$(call module-dir,github.com/cert-manager/cert-manager@$(CERT_MANAGER_VERSION)); \
		cp -r "$$dir"/deploy/charts/cert-manager/templates "$$dir"/deploy/charts/cert-manager/values.yaml "$$dir"/deploy/charts/cert-manager/values.schema.json "$$dir"/LICENSE $@/ && \
		sed 's/^\(version\|appVersion\): v0\.0\.0$$/\1: $(CERT_MANAGER_VERSION)/' "$$dir"/deploy/charts/cert-manager/Chart.yaml >$@/Chart.yaml
	chmod -R u+w $@
	@grep -q '^appVersion: $(CERT_MANAGER_VERSION)$$' $@/Chart.yaml || { echo "$@/Chart.yaml: no version placeholder stamped" >&2; exit 1; }

# Runs `generate` in a scratch copy of the working tree and compares its
# output with the tree: any difference means the generated files do not
# match their sources. The tree itself is never written, so a verify that
# finds nothing stale leaves every file (and its mtime) as it was; comparing
# with the working tree rather than git's index keeps this usable while
# sources are still uncommitted.
GENERATED := api config docs/api.md charts/address-controller/crds $(CERT_MANAGER_CHART)
.PHONY: verify
verify: $(CONTROLLER_GEN) ## Fail if generated files are stale, go.mod/go.sum are not tidy, or a file over 1 MiB (a built binary) is tracked.
	@scratch=$$(mktemp -d); trap 'chmod -R u+w $$scratch; rm -rf $$scratch' EXIT; \
	tar --exclude=./bin --exclude=./.git --exclude=./.playground -cf - . | tar -C $$scratch -xf - && ln -s $(BIN) $$scratch/bin && \
	$(MAKE) --no-print-directory -C $$scratch generate >$$scratch/.generate.log 2>&1 || { cat $$scratch/.generate.log >&2; exit 1; }; \
	stale=$$(for f in $(GENERATED); do diff -rq $$f $$scratch/$$f 2>&1; done); \
	if [ -n "$$stale" ]; then \
		echo "Generated files are stale (make generate changes them):" >&2; \
		echo "$$stale" | sed 's/^/  /' >&2; \
		echo "Run 'make generate' and commit the result." >&2; \
		exit 1; \
	fi
	@go mod tidy -diff || { echo "go.mod/go.sum are not tidy: run 'go mod tidy' and commit the result." >&2; exit 1; }
	@big=$$(git ls-files -z 2>/dev/null | xargs -0 -r stat -c '%s %n' 2>/dev/null | awk '$$1 > 1048576 { print $$2 }'); \
	if [ -n "$$big" ]; then \
		echo "Files over 1 MiB are tracked (a built binary?): git rm --cached them:" >&2; \
		echo "$$big" | sed 's/^/  /' >&2; \
		exit 1; \
	fi

.PHONY: lint
lint: $(GOLANGCI_LINT) ## Run golangci-lint (config: .golangci.yml).
	$(GOLANGCI_LINT) run ./...

.PHONY: build
build: ## Build bin/manager and bin/metallb-iad.
	go build -o bin/manager ./cmd/manager
	go build -o bin/metallb-iad ./cmd/metallb-iad

.PHONY: unit
unit: ## Pure tests only: no control plane, seconds.
	go test ./api/... ./cmd/... ./internal/... -count=1

.PHONY: test
test: verify lint $(CONTROLPLANE) ## verify + lint + all tests against a real control plane + the wire + bounded fuzzing.
	go test $$(go list ./... | grep -v '/test/wire$$') -count=1 -timeout $(TEST_TIMEOUT)
	@$(MAKE) --no-print-directory wire
	@$(MAKE) --no-print-directory fuzz

# The wire tests (test/wire) alone, verbose: their log is the figures.
.PHONY: wire
wire: $(CONTROLPLANE) ## Run the wire tests (MetalLB's speaker in network namespaces; root) and print what the wire saw.
	go test ./test/wire/ -count=1 -v -timeout 10m

# Runs every Fuzz* function found in *_test.go for FUZZTIME (executions) each (go test
# fuzzes one target of one package per invocation).
.PHONY: fuzz
fuzz: ## Run each fuzz target for FUZZTIME.
	@targets=$$(grep -rEo --include='*_test.go' --exclude-dir=tools --exclude-dir=bin '^func Fuzz[A-Za-z0-9_]*' . | sed 's/:func /:/'); \
	if [ -z "$$targets" ]; then echo "fuzz: no fuzz targets"; exit 0; fi; \
	for t in $$targets; do \
		dir=$$(dirname $${t%%:*}); name=$${t##*:}; \
		echo "fuzz: $$dir $$name for $(FUZZTIME)"; \
		go test $$dir -run='^$$' -fuzz="^$$name\$$" -fuzztime=$(FUZZTIME) || exit 1; \
	done

# The chaos run (test/chaos): the shipped binaries under churn and faults,
# every invariant counted. make test runs a bounded one (two minutes, at
# least eight faults); this is the full one.
CHAOS_DURATION ?= 5m
CHAOS_FAULT_EVERY ?= 5s
CHAOS_MIN_FAULTS ?= 20
.PHONY: chaos
chaos: $(CONTROLPLANE) ## Run the chaos harness for CHAOS_DURATION and at least CHAOS_MIN_FAULTS faults (CHAOS_SEED replays a run's workload and faults).
	CHAOS_DURATION=$(CHAOS_DURATION) CHAOS_FAULT_EVERY=$(CHAOS_FAULT_EVERY) CHAOS_MIN_FAULTS=$(CHAOS_MIN_FAULTS) \
		go test ./test/chaos/ -run '^TestChaos$$' -count=1 -v -timeout 60m

.PHONY: run
# SKIP=manager leaves the manager out, e.g. to run it from a debugger instead.
# WIRE=1 adds test/wire's bed: MetalLB's speaker on two node namespaces (root).
run: build $(CONTROLPLANE) ## Run a local control plane, MetalLB's controller, the manager (webhooks) and metallb-iad (policy) in the foreground (Ctrl-C stops all).
	go build -o bin/playground ./test/playground
	bin/playground$(if $(SKIP), -skip=$(SKIP))$(if $(WIRE), -wire)

.PHONY: bench
bench: build $(CONTROLPLANE) ## Run the benchmark against a local control plane with the charts' configuration (N claims, then LARGE; BENCH_ARGS=-unthrottled for the old lab setting).
	go test ./internal/... -run='^$$' -bench=. -benchtime=2000x
	go run ./test/bench -n=$(N) -large=$(LARGE) $(BENCH_ARGS)

.PHONY: bench-scale
bench-scale: build $(CONTROLPLANE) ## A /16 on one manager: N static claims, then 65,536 more, 10,000 LoadBalancer Services, 10,000 claims of a MetalLB class with 5,000 attached; memory after each phase (takes about two hours here).
	go test ./internal/allocator/ -run='^$$' -bench=FirstFree -benchtime=2000x
	go run ./test/bench -scale -n=$(N) -timeout=60m $(BENCH_ARGS)

.PHONY: clean
clean: ## Remove built product binaries and playground state (keeps the control plane and tools).
	rm -rf bin/manager bin/metallb-iad bin/playground .playground
