#!/usr/bin/env bash
# Fails when regenerating the OpenAPI client/server code or the provider docs
# would change the checked-in files. Works on a dirty tree: it regenerates in
# a copy and compares the copy with the working tree.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Copy the tracked and untracked-but-not-ignored files.
git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
  [ -e "$f" ] || continue
  mkdir -p "$tmp/$(dirname "$f")"
  cp -p "$f" "$tmp/$f"
done
(cd "$tmp" && go generate ./... >/dev/null)
status=0
for d in server/api client docs; do
  [ -d "$d" ] || continue
  if ! diff -r -q "$d" "$tmp/$d" >/dev/null; then
    echo "generated files in $d are stale; run 'make generate' and commit:" >&2
    diff -r "$d" "$tmp/$d" | head -40 >&2 || true
    status=1
  fi
done
exit $status
