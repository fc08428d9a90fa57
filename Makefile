# Slow-to-build outputs (control-plane binaries, Cargo target directory) live in a
# cache outside the checkout, keyed by version, so a fresh clone reuses them. Its
# default is written once, in scripts/cache-root.sh.
ifeq ($(strip $(CAMELK_CACHE)),)
CAMELK_CACHE := $(shell bash scripts/cache-root.sh)
endif
export CAMELK_CACHE
# The Camel K releases: CAMEL_K_VERSION (tests) and CAMEL_K_PREVIOUS_VERSION (the demo's upgrade).
include tests/camel-k/versions.env
export CARGO_TARGET_DIR ?= $(CAMELK_CACHE)/cargo-target

.PHONY: build test lint fuzz fuzz-smoke control-plane camel-k camel-k-previous helm flux local-cluster local-cluster-down local-cluster-status

## Everything CI checks: formatting, lints, a short run of every fuzz target, and every
## test (end-to-end included). The prerequisites are checked first (scripts/prereqs.sh
## names the command that installs what is missing), then everything is built, the Go
## builds beside the Cargo build (scripts/build.sh), before the first check runs. The
## tests run as `cargo test --workspace --no-fail-fast` would, with the fuzz smoke beside
## them, TEST_JOBS jobs at once (xtask/src/bin/run-tests.rs; TEST_JOBS=1: one after another).
TEST_JOBS ?= 3
test: prereqs-test
	bash scripts/build.sh test
	$(MAKE) --no-print-directory lint
	"$(CARGO_TARGET_DIR)/debug/run-tests" --jobs $(TEST_JOBS) \
		--also "fuzz-smoke=$(MAKE) --no-print-directory fuzz-smoke"

.PHONY: prereqs-test prereqs-demo
prereqs-test:
	@bash scripts/prereqs.sh test
prereqs-demo:
	@bash scripts/prereqs.sh demo

build:
	cargo build --workspace --all-targets --locked

## Every unit and pure test, the quick loop: the libraries' and binaries' own tests, the
## doc tests, and the integration-test binaries that start no server (no control plane, no
## Go-built binary, no Git or SSH server; `git`, shellcheck, kubectl and lua are used), on
## the stable toolchain. tests/testkit/tests/unit_target.rs fails when a test binary is in
## neither UNIT_TESTS nor seen starting a server. CAMELK_UNIT_ONLY makes the testkit refuse
## to build or start a Go binary. See docs/development.md.
UNIT_TESTS := bad_input bad_source ci_output ci_templates commands dependencies \
	edit_golden layers malformed plan_scenarios plugin properties public_api revert \
	scripts strip_owner_keys unit_target validation
.PHONY: unit
unit:
	env -u CAMELK_TEST_KUBECONFIG CAMELK_UNIT_ONLY=1 cargo test --workspace --locked --no-fail-fast \
		--lib --bins $(addprefix --test ,$(UNIT_TESTS))
	env -u CAMELK_TEST_KUBECONFIG CAMELK_UNIT_ONLY=1 cargo test --workspace --locked --no-fail-fast --doc

lint:
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets --locked -- -D warnings
	# The library as the plugin links it: without the sync's server or the reference operator.
	# --lib alone: the tests' dev-dependencies (camelk-testkit's in-process sync) turn the
	# server back on for every target built with them.
	cargo clippy -p camelk-reconciler --no-default-features --lib --locked -- -D warnings
	cargo clippy -p camelk-reconciler --no-default-features --all-targets --locked -- -D warnings
	# The API docs, whose links must resolve to items the reader can see.
	RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked --quiet
	# In a target directory of its own: in the same one, the two builds of the library's docs
	# overwrite each other, and each run documents it twice again.
	RUSTDOCFLAGS="-D warnings" cargo doc -p camelk-reconciler --no-default-features --no-deps --locked --quiet \
		--target-dir "$(CARGO_TARGET_DIR)/doc-no-default-features"
	# The Helm chart, strictly (values.schema.json included): each source, and the
	# OpenShift example values. Helm comes from the cache (`make helm`, tests/helm/build.sh).
	helm=$$(bash tests/helm/build.sh)/helm && chart=charts/camelk-reconciler && \
		"$$helm" lint --strict $$chart --set git.repository=https://git.example.com/gitops.git && \
		"$$helm" lint --strict $$chart --set source=cluster --set cluster.name=camel-k && \
		"$$helm" lint --strict $$chart -f $$chart/examples/openshift-values.yaml \
			--set git.repository=https://git.example.com/gitops.git
	# Every GitHub workflow and CI template (actionlint also runs shellcheck on their
	# `run:` scripts; the GitLab template is checked by kubectl-camelk/tests/ci_templates.rs),
	# and every shell script.
	"$$(bash tests/actionlint/build.sh)/actionlint" .github/workflows/*.yml ci/github/*.yml
	shellcheck -x -P SCRIPTDIR ci/*.sh scripts/*.sh scripts/*/*.sh tests/*.sh tests/*/build.sh .ci/run

## Fuzz every target of fuzz/ for FUZZ_SECONDS each (default 600) on the nightly
## toolchain; cargo-fuzz is installed into the cache on first use. A crash's input
## lands in fuzz/artifacts/<target>/. See scripts/fuzz.sh.
FUZZ_SECONDS ?= 600
fuzz:
	FUZZ_SECONDS=$(FUZZ_SECONDS) bash scripts/fuzz.sh

## 10 seconds of each fuzz target from its committed seeds (part of `make test`; `make fuzz`
## runs 600 s each on the corpus it keeps growing).
fuzz-smoke:
	FUZZ_SECONDS=10 FUZZ_CORPUS=fresh bash scripts/fuzz.sh

## Build etcd, kube-apiserver, kube-controller-manager, kube-scheduler and KWOK (the
## simulated node) from upstream Go modules (cached).
control-plane:
	bash tests/control-plane/build.sh >/dev/null
	bash tests/kwok/build.sh >/dev/null

## Build upstream Apache Camel K's `kamel` (the real operator, `kamel operator`) at the
## release the tests run, and copy its CRDs (cached).
camel-k:
	bash tests/camel-k/build.sh $(CAMEL_K_VERSION) >/dev/null

## Helm, built from its Go module at the version tests/helm/go.mod pins (cached), for
## the chart's tests (helm lint, helm template).
helm:
	bash tests/helm/build.sh >/dev/null

## actionlint, built from its Go module at the version tests/actionlint/go.mod pins
## (cached), for `make lint`.
.PHONY: actionlint
actionlint:
	bash tests/actionlint/build.sh >/dev/null

## Flux's source-controller and kustomize-controller, built from their Go modules at the
## release tests/flux/*/go.mod pin, and their CRDs (cached), for the tests that run real
## Flux beside the reconciler (camelk_testkit::flux).
flux:
	bash tests/flux/build.sh >/dev/null

## The fault matrix at scale: every scenario with both flavours of operators, 1,000
## Integrations and Pipes each (24 worlds; 22 took 110 minutes on 2 cores at CHAOS_PARALLEL=3,
## all 24 have not finished in one run: docs/performance.md). `make test`
## runs the reduced matrix (100 resources, the quickest faults). CHAOS_RESOURCES,
## CHAOS_SCENARIOS (quick|all), CHAOS_OPERATORS (reference|upstream), CHAOS_ONLY (parts
## of scenarios' names, comma-separated) and CHAOS_PARALLEL (worlds at once: 3 here, as
## three upstream worlds got ready as fast as two and four overloaded 2 cores; the harness's
## own default is 2) override.
.PHONY: chaos
chaos: control-plane camel-k
	CHAOS_RESOURCES=$${CHAOS_RESOURCES:-1000} CHAOS_SCENARIOS=$${CHAOS_SCENARIOS:-all} \
		CHAOS_PARALLEL=$${CHAOS_PARALLEL:-3} cargo test --locked -p camelk-reconciler --test chaos

## The older release the demo upgrades from.
camel-k-previous:
	bash tests/camel-k/build.sh $(CAMEL_K_PREVIOUS_VERSION) >/dev/null

## Start a local control plane in the background; kubeconfig in .local-cluster/kubeconfig.
local-cluster: control-plane camel-k
	cargo run --quiet --locked -p xtask --bin local-cluster -- up

local-cluster-down:
	cargo run --quiet --locked -p xtask --bin local-cluster -- down

local-cluster-status:
	cargo run --quiet --locked -p xtask --bin local-cluster -- status

## The demo: a local control plane, two real upstream Camel K operators (the
## older release and the one the tests run), `reconciler sync` following a local
## Git repository, and a rolling upgrade operator-1 -> operator-2 in three steps.
## scripts/build.sh builds everything it runs, both Camel K releases included, the Go
## builds beside the Cargo build; if the older release fails to build, the demo runs two
## operators of the newer one and says why.
.PHONY: demo
demo: prereqs-demo
	bash scripts/build.sh demo
	cargo run --quiet --locked -p xtask --bin demo

## Release archives for krew in dist/ (kubectl-camelk and reconciler, each with its
## .sha256) and krew-manifest.yaml rendered with their checksums. DIST_TARGETS names
## Rust target triples (default: every one rustup has installed for Linux or macOS on
## x86_64 or aarch64); see scripts/dist/package.sh.
## Container images of reconciler and kubectl-camelk in an OCI layout (dist/oci), built
## without a daemon or root by umoci; IMAGE_PUSH=<registry>/<prefix> pushes them with
## skopeo. See scripts/image/build.sh.
.PHONY: image
image:
	bash scripts/image/build.sh

.PHONY: dist
dist:
	DIST_TARGETS="$(DIST_TARGETS)" bash scripts/dist/package.sh
