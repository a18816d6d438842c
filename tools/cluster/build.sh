#!/usr/bin/env bash
# Builds the local control plane's binaries from pinned Go module versions:
#   kube-apiserver and etcd (this folder's module: k8s.io/kubernetes + go.etcd.io/etcd/server/v3)
#   kuberay-operator (github.com/ray-project/kuberay/ray-operator, `go install` at a tag).
# Outputs go to .cluster-tools/<versions>/ at the repository root (git-ignored) and are
# reused when present; Go's own build cache makes a rebuild in a fresh clone cheap.
set -euo pipefail
cd "$(dirname "$0")"
here=$(pwd)
root=$(cd ../.. && pwd)
K8S_VERSION=$(awk '$1 == "k8s.io/kubernetes" {print $2; exit}' go.mod)
ETCD_VERSION=$(awk '$1 == "go.etcd.io/etcd/server/v3" {print $2; exit}' go.mod)
KUBERAY_VERSION=$(cat kuberay.version)
out="$root/.cluster-tools/k8s-$K8S_VERSION-etcd-$ETCD_VERSION-kuberay-$KUBERAY_VERSION"
if [[ -x "$out/kube-apiserver" && -x "$out/etcd" && -x "$out/kuberay-operator" ]]; then
  echo "cluster tools present: $out"
  exit 0
fi
command -v go >/dev/null || { echo "cluster-tools: Go is not installed (https://go.dev/dl/); the control-plane tests need it" >&2; exit 2; }
mkdir -p "$out.tmp"
start=$(date +%s)
go build -trimpath -o "$out.tmp/" ./cmd/kube-apiserver ./cmd/etcd
GOBIN="$out.tmp" go install -trimpath "github.com/ray-project/kuberay/ray-operator@$KUBERAY_VERSION"
mv "$out.tmp/ray-operator" "$out.tmp/kuberay-operator"
rm -rf "$out" && mv "$out.tmp" "$out"
echo "cluster tools built in $(( $(date +%s) - start )) s: $out ($(du -sh "$out" | cut -f1))"
