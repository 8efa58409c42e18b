#!/usr/bin/env bash
# JAX's TPU Pallas tests on tpukit (see conftest.py). Usage:
#   scripts/pallas_corpus/run.sh JAX_CHECKOUT OUTDIR [test_file ...]
# JAX_CHECKOUT: a jax-ml/jax checkout at the installed version's tag (jax-v0.10.2); its
# tests/pallas/ files are copied into OUTDIR and run there, one pytest per file, with a
# junit XML each; summarize.py groups the failures by first error.
# Needs absl-py and hypothesis (JAX's test dependencies) importable.
set -euo pipefail
src=$(cd "$1" && pwd); out=$2; shift 2
here=$(cd "$(dirname "$0")" && pwd)
files=("$@")
[ ${#files[@]} -gt 0 ] || files=(tpu_pallas_test tpu_ops_test pallas_test tpu_pallas_pipeline_test
  tpu_pallas_async_test tpu_pallas_state_test tpu_pallas_random_test tpu_pallas_memory_space_test)
mkdir -p "$out"; cp "$here/conftest.py" "$out/"
python=${PYTHON:-$here/../../.venv/bin/python}
for f in "${files[@]}"; do
  cp "$src/tests/pallas/$f.py" "$out/"
  (cd "$out" && CORPUS_JAX_SRC=$src TPUKIT_BUNDLE= timeout "${CORPUS_TIMEOUT:-2400}" \
    "$python" -m pytest -q -p no:cacheprovider --junitxml="$f.xml" "$f.py" > "$f.log" 2>&1) || true
  echo "$f: $(tail -1 "$out/$f.log")"
done
"$python" "$here/summarize.py" "$out" "${files[@]}"
