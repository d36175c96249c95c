#!/usr/bin/env bash
# Prepare this machine for Eagle Eye: a project virtualenv (.venv) with the package and the
# given extras, plus, with --system, the Debian tools the tests drive (prometheus/promtool,
# kubectl, chromium, tmux) and npm, which the build uses to fetch the dashboard's charts.
# Safe to re-run: it only installs what is missing.
#   usage: scripts/setup.sh [--system] [EXTRAS]     (default extras: server)
set -euo pipefail
cd "$(dirname "$0")/.."
system=0
if [[ "${1:-}" == "--system" ]]; then system=1; shift; fi
extras="${1:-server}"
PYTHON="${PYTHON:-python3}"

if [[ $system == 1 ]]; then
  need=()
  command -v prometheus >/dev/null || need+=(prometheus)
  command -v promtool >/dev/null || need+=(prometheus)
  command -v kubectl >/dev/null || need+=(kubectl)
  command -v chromium >/dev/null || need+=(chromium)
  command -v tmux >/dev/null || need+=(tmux)
  command -v npm >/dev/null || need+=(npm)  # the build fetches the dashboard's charts
  if ((${#need[@]})); then
    if [[ $(id -u) != 0 ]]; then
      echo "setup: missing ${need[*]}; run as root or install them with apt-get" >&2
      exit 1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      $(printf '%s\n' "${need[@]}" | sort -u) >/dev/null
  fi
fi

if [[ ! -x .venv/bin/python ]]; then
  "$PYTHON" -m venv .venv
fi
stamp=".venv/.eagle-eye-$extras-$(cat pyproject.toml setup.py | sha256sum | cut -c1-16)"
# The install runs setup.py's build step, which fetches the dashboard's chart library
# with npm (pinned, checksummed) into the package: redo it if those files went missing.
charts="src/eagle_eye/observe/static/vendor/uplot/uPlot.iife.min.js"
if [[ ! -f "$stamp" || ! -f "$charts" ]]; then
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  .venv/bin/python -m pip install -q -e ".[$extras]"
  touch "$stamp"
fi
