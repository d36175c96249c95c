#!/usr/bin/env bash
# Fetch the dashboard's chart library (uPlot, MIT) from the npm registry with npm itself,
# check it against the pinned integrity hash, and put its two browser files where the
# Python package serves them (src/eagle_eye/observe/static/vendor/uplot/, git-ignored).
# A wheel built after this carries them, so `pip install` of that wheel needs no Node.js.
# Without npm the dashboard still runs and the page says that the charts are missing.
#   usage: scripts/dashboard_assets.sh          (no-op when already in place)
set -euo pipefail
cd "$(dirname "$0")/.."
version="1.6.32"
integrity="sha512-KIMVnG68zvu5XXUbC4LQEPnhwOxBuLyW1AHtpm6IKTXImkbLgkMy+jabjLgSLMasNuGGzQm/ep3tOkyTxpiQIw=="
dest="src/eagle_eye/observe/static/vendor/uplot"

if [[ -f "$dest/VERSION" && "$(cat "$dest/VERSION")" == "$version" ]]; then
  exit 0
fi
if ! command -v npm >/dev/null; then
  echo "dashboard: npm not found; the dashboard will run without charts" \
    "(install Node.js and re-run scripts/dashboard_assets.sh)" >&2
  exit 0
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "uplot@$version" >/dev/null)
tarball="$tmp/uplot-$version.tgz"
got="$(python3 -c 'import base64, hashlib, sys
print("sha512-" + base64.b64encode(hashlib.sha512(open(sys.argv[1], "rb").read()).digest()).decode())' "$tarball")"
if [[ "$got" != "$integrity" ]]; then
  echo "dashboard: uplot@$version does not match its pinned integrity hash" >&2
  exit 1
fi
tar -xzf "$tarball" -C "$tmp" package/LICENSE package/dist/uPlot.iife.min.js package/dist/uPlot.min.css
mkdir -p "$dest"
cp "$tmp/package/dist/uPlot.iife.min.js" "$tmp/package/dist/uPlot.min.css" "$dest/"
cp "$tmp/package/LICENSE" "$dest/LICENSE"
echo "$version" >"$dest/VERSION"
