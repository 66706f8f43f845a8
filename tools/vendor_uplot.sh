#!/usr/bin/env bash
# Fetches the chart library of psctl dashboard's page (uPlot, MIT) from npm and copies the files
# the page bundles into third_party/uplot/, after checking the package against the sha256 below.
# The build never runs this (it is offline): run it by hand to check the vendored files or, with
# a new VERSION and SHA256, to update them; then update third_party/uplot/README.md.
#
# Usage: tools/vendor_uplot.sh   (needs npm and access to its registry)
set -euo pipefail

readonly VERSION=1.6.32
# sha256 of uplot-$VERSION.tgz as `npm pack` downloads it.
readonly SHA256=4b8a8191e425658e3ea8c8c1314b0fc679c861ee3a1af2b20c7b16ba50b5133d
readonly FILES=(LICENSE dist/uPlot.iife.min.js dist/uPlot.min.css)

cd "$(dirname "$0")/.."
dest=third_party/uplot
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

(cd "$work" && npm pack --silent "uplot@$VERSION" > /dev/null)
tarball="$work/uplot-$VERSION.tgz"
actual=$(sha256sum "$tarball" | cut -d' ' -f1)
if [[ "$actual" != "$SHA256" ]]; then
  echo "vendor_uplot: uplot-$VERSION.tgz has sha256 $actual, expected $SHA256" >&2
  exit 1
fi
tar -xzf "$tarball" -C "$work"
for file in "${FILES[@]}"; do
  cp "$work/package/$file" "$dest/$(basename "$file")"
done
echo "vendor_uplot: copied uplot $VERSION (${FILES[*]}) into $dest; their sha256:"
(cd "$dest" && sha256sum "${FILES[@]##*/}")
