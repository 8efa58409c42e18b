# tpukit: `make demo` sets everything up and runs the examples; `make test` runs every check.
SHELL := bash
export MLIR_SYS_220_PREFIX ?= /usr/lib/llvm-22
export LLVM_SYS_221_PREFIX ?= /usr/lib/llvm-22
export TABLEGEN_220_PREFIX ?= /usr/lib/llvm-22
export TPUKIT_PYTHON ?= $(CURDIR)/.venv/bin/python
EXAMPLES := add_vectors softmax layer_norm matmul row_gather flash_attention

.PHONY: setup demo test fmt lint rust-test examples conformance pytest wheel wheel-check doc package bench fuzz asan corpus
setup:
	@bash scripts/setup.sh

demo: setup
	cargo build --release --examples -p tpukit -p tpukit-cli
	@for e in $(EXAMPLES); do echo; echo "== $$e =="; cargo run -q --release --example $$e || exit 1; done
	@echo; echo "== from Python: tpuBLAS operators (precompiled) and a Helion program, against torch =="
	$(TPUKIT_PYTHON) examples/tpublas.py
	cd examples/helion && $(TPUKIT_PYTHON) softmax.py
	@echo; echo "== an unmodified GPT-2 training step on tpuBLAS (tpublas.mode), against torch eager =="
	$(TPUKIT_PYTHON) examples/gpt2_step.py
	@echo; echo "== softmax for a TPU: lowered by tpukit, compiled by libtpu (no TPU needed) =="
	@mkdir -p target/demo
	cargo run -q --release -p tpukit-cli -- lower softmax --shape 1024x512 --dtype bf16 -o target/demo/softmax.mlir
	$(TPUKIT_PYTHON) tests/conformance/tpu_compile.py target/demo/softmax.mlir

fmt:
	cargo fmt --all -- --check

lint:
	cargo clippy --workspace --all-targets -- -D warnings
	$(TPUKIT_PYTHON) -m ruff check benches examples scripts

rust-test:
	cargo test --workspace

# Every example runs on the interpreter and the compiled CPU backend and checks both results
# against plain ndarray code; it fails loudly if either differs.
examples:
	@for e in $(EXAMPLES); do cargo run -q --example $$e > /dev/null || { echo "example $$e failed"; exit 1; }; done
	@echo "examples: $(words $(EXAMPLES)) passed, 0 failed"

# Every catalog kernel, lowered by the `tpukit` CLI, compiled by libtpu for v5e and v6e (no TPU needed).
conformance:
	cargo build -q -p tpukit-cli
	$(TPUKIT_PYTHON) -m ruff check tests/conformance
	$(TPUKIT_PYTHON) -m pytest -q tests/conformance

# The Python package (built into .venv by setup): real Pallas kernels imported and run on cpu and
# interpret, against Pallas interpret mode and jnp references.
pytest: setup
	$(TPUKIT_PYTHON) -m ruff check python
	$(TPUKIT_PYTHON) -m pytest -q python/tests

# The Python package as a manylinux wheel with its bundles (host-tuned and x86-64-v3), in
# target/wheels/ (scripts/wheel.sh; WHEEL_BUNDLES=portable leaves this host's out).
wheel: setup
	@bash scripts/wheel.sh

# That wheel (from the dev build, portable bundle without TPU executables), installed into a
# fresh venv and running examples/tpublas.py outside the repository, every kernel from a bundle.
wheel-check: setup
	$(TPUKIT_PYTHON) scripts/wheel_check.py

# The API documentation (target/doc), with every intra-doc link resolving; ~40 s after lint.
doc:
	RUSTDOCFLAGS="-D warnings" cargo doc -q --workspace --no-deps

# The publishable crates as crates.io would take them (every crate but tpukit-python, which
# ships as the wheel); those without LLVM/MLIR dependencies also built from their packages
# (~1 min; the others would build LLVM-linked crates again, minutes).
package:
	cargo package -q --workspace --exclude tpukit-python --no-verify --allow-dirty
	cargo package -q -p tpukit-dsl -p tpukit-macros -p tpukit-catalog --allow-dirty

test: setup fmt lint rust-test examples conformance pytest doc package wheel-check

# tpukit cpu beside numpy, XLA CPU (jax.jit) and Pallas interpret in one run, then every tpuBLAS
# operator's first call (bundle, disk cache, cold) and steady state beside XLA's and libtpu's
# compile, a GPT-2 training step's first iteration under tpublas.mode() beside torch eager and
# torch.compile, and JAX's shipped TPU ops under on_cpu() beside TPU interpret mode and plain XLA;
# rewrites those sections of BENCHMARKS.md. Not part of `make test`: benchmarks are
# not timed tests.
bench: setup
	@# matplotlib draws python_speed.py's plot; a benchmark-only dependency, not make setup's.
	$(TPUKIT_PYTHON) -c 'import matplotlib' 2>/dev/null \
		|| $(TPUKIT_PYTHON) -m pip install -q --disable-pip-version-check matplotlib
	$(TPUKIT_PYTHON) benches/compare.py --write
	$(TPUKIT_PYTHON) benches/tpublas.py --write
	$(TPUKIT_PYTHON) benches/first_iteration.py --write
	$(TPUKIT_PYTHON) benches/shipped_ops.py --write
	$(TPUKIT_PYTHON) benches/python_speed.py --write
	$(TPUKIT_PYTHON) benches/pallas_speed.py --write

# The fuzz targets (RELIABILITY.md) with FUZZ_CASES inputs each; `make test` runs them short.
# Release builds; a million importer cases (MLIR parsing) still take the longest: tens of minutes.
FUZZ_CASES ?= 1000000
# Random kernels compile one kernel per case (~25 ms in debug): fewer of them.
FUZZ_KERNELS ?= 100000
# Writers killed with SIGKILL mid-write (crash_safe): rounds of a cache and a bundle writer each.
FUZZ_KILLS ?= 1000
# Random kernels compiled by libtpu for v5e and v6e (seeds from 100000, apart from make test's).
FUZZ_TPU_KERNELS ?= 500
fuzz:
	TPUKIT_FUZZ_CASES=$(FUZZ_CASES) cargo test --release -p tpukit-dsl --test fuzz_parse
	TPUKIT_FUZZ_CASES=$(FUZZ_CASES) cargo test --release -p tpukit-import --test fuzz_import
	TPUKIT_FUZZ_CASES=$(FUZZ_CASES) cargo test --release -p tpukit-runtime --test fuzz_artifacts
	TPUKIT_KILL_ROUNDS=$(FUZZ_KILLS) cargo test --release -p tpukit-runtime --test crash_safe
	TPUKIT_FUZZ_CASES=$(FUZZ_KERNELS) cargo test --release -p tpukit --test fuzz_kernels
	cargo build -q -p tpukit-cli
	TPUKIT_RANDOM_KERNELS=$(FUZZ_TPU_KERNELS) TPUKIT_RANDOM_SEED=100000 \
		$(TPUKIT_PYTHON) -m pytest -q tests/conformance/test_random_kernels.py

# AddressSanitizer (nightly Rust, every crate instrumented, its own target directory): the
# runtime's tests (compiled CPU backend, staging, cache, bundles, fork, kill -9 writers) and
# the cross-crate reliability, cache and random-kernel tests. Leak checking is off: the JIT's
# linked code and a forked child's inherited worker pool are leaked on purpose; huge
# allocations return null as malloc does (the out-of-memory tests ask for them). Not part of
# `make test` (a second full build). Results: RELIABILITY.md.
ASAN := RUSTFLAGS=-Zsanitizer=address ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1 \
	cargo +nightly test --target x86_64-unknown-linux-gnu --target-dir target/asan
asan:
	$(ASAN) -p tpukit-runtime
	$(ASAN) -p tpukit --test reliability --test cache --test fuzz_kernels

# JAX's own TPU Pallas tests run on tpukit (scripts/pallas_corpus): JAX_SRC is a jax-ml/jax
# checkout at the installed version's tag. Not part of `make test`: it reads JAX's sources.
JAX_SRC ?=
corpus: setup
	@test -n "$(JAX_SRC)" || { echo "make corpus JAX_SRC=<jax-ml/jax checkout at jax-v0.10.2>"; exit 2; }
	$(TPUKIT_PYTHON) -m pip install -q absl-py hypothesis
	scripts/pallas_corpus/run.sh $(JAX_SRC) target/pallas-corpus
