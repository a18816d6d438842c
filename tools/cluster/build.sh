#!/usr/bin/env bash
# Builds the local control plane's binaries from pinned Go module versions:
#   kube-apiserver and etcd (this folder's module: k8s.io/kubernetes + go.etcd.io/etcd/server/v3)
#   kuberay-operator (github.com/ray-project/kuberay/ray-operator, `go install` at a tag).
#   kueue (sigs.k8s.io/kueue/cmd/kueue, `go install` at the version in kueue.version), with the CRDs
#   of the same module version (config/components/crd: bases and the conversion-webhook patches
#   its kustomization applies) and the ProvisioningRequest CRD of the cluster-autoscaler apis
#   module that Kueue's go.mod pins, copied into kueue-<version>/crds/.
# Outputs go to .cluster-tools/<versions>/ at the repository root (git-ignored) and are
# reused when present; Go's own build cache makes a rebuild in a fresh clone cheap.
set -euo pipefail
cd "$(dirname "$0")"
here=$(pwd)
root=$(cd ../.. && pwd)
K8S_VERSION=$(awk '$1 == "k8s.io/kubernetes" {print $2; exit}' go.mod)
ETCD_VERSION=$(awk '$1 == "go.etcd.io/etcd/server/v3" {print $2; exit}' go.mod)
KUBERAY_VERSION=$(cat kuberay.version)
KUEUE_VERSION=$(cat kueue.version)
out="$root/.cluster-tools/k8s-$K8S_VERSION-etcd-$ETCD_VERSION-kuberay-$KUBERAY_VERSION"
kueue_out="$root/.cluster-tools/kueue-$KUEUE_VERSION"

build_kueue() {
  if [[ -x "$kueue_out/kueue" && -f "$kueue_out/crds/autoscaling.x-k8s.io_provisioningrequests.yaml" ]]; then
    echo "kueue present: $kueue_out"
    return 0
  fi
  local start tmp module apis_version apis
  start=$(date +%s)
  tmp="$kueue_out.tmp"
  mkdir -p "$tmp/crds/patches"
  GOBIN="$tmp" go install -trimpath "sigs.k8s.io/kueue/cmd/kueue@$KUEUE_VERSION"
  module=$(go mod download -json "sigs.k8s.io/kueue@$KUEUE_VERSION" | awk -F'"' '$2 == "Dir" {print $4}')
  cp "$module"/config/components/crd/bases/*.yaml "$tmp/crds/"
  cp "$module"/config/components/crd/kustomization.yaml "$tmp/crds/patches/"
  cp "$module"/config/components/crd/patches/webhook_in_*.yaml "$tmp/crds/patches/"
  apis_version=$(awk '$1 == "k8s.io/autoscaler/cluster-autoscaler/apis" {print $2; exit}' "$module/go.mod")
  apis=$(go mod download -json "k8s.io/autoscaler/cluster-autoscaler/apis@$apis_version" | awk -F'"' '$2 == "Dir" {print $4}')
  cp "$apis/config/crd/autoscaling.x-k8s.io_provisioningrequests.yaml" "$tmp/crds/"
  chmod -R u+w "$tmp"
  printf 'sigs.k8s.io/kueue %s\nk8s.io/autoscaler/cluster-autoscaler/apis %s\n' "$KUEUE_VERSION" "$apis_version" > "$tmp/VERSIONS"
  rm -rf "$kueue_out" && mv "$tmp" "$kueue_out"
  echo "kueue built in $(( $(date +%s) - start )) s: $kueue_out ($(du -sh "$kueue_out" | cut -f1))"
}

# The version kube-apiserver reports (GET /version), stamped as upstream's hack/lib/version.sh
# does; unstamped it says v0.0.0-master+$Format:%H$, which Kueue cannot parse and exits on.
K8S_MINOR=$(echo "$K8S_VERSION" | cut -d. -f2)
LDFLAGS="-X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1"
LDFLAGS="$LDFLAGS -X k8s.io/component-base/version.gitMinor=$K8S_MINOR -X k8s.io/component-base/version.gitTreeState=clean"
stamped() { [[ "$("$1/kube-apiserver" --version 2>/dev/null)" == "Kubernetes $K8S_VERSION" ]]; }

if [[ -x "$out/kube-apiserver" && -x "$out/etcd" && -x "$out/kuberay-operator" ]] && stamped "$out"; then
  echo "cluster tools present: $out"
  command -v go >/dev/null || { [[ -x "$kueue_out/kueue" ]] && exit 0; echo "cluster-tools: Go is not installed (https://go.dev/dl/); kueue needs it" >&2; exit 2; }
  build_kueue
  exit 0
fi
command -v go >/dev/null || { echo "cluster-tools: Go is not installed (https://go.dev/dl/); the control-plane tests need it" >&2; exit 2; }
mkdir -p "$out.tmp"
start=$(date +%s)
go build -trimpath -ldflags "$LDFLAGS" -o "$out.tmp/" ./cmd/kube-apiserver ./cmd/etcd
GOBIN="$out.tmp" go install -trimpath "github.com/ray-project/kuberay/ray-operator@$KUBERAY_VERSION"
mv "$out.tmp/ray-operator" "$out.tmp/kuberay-operator"
rm -rf "$out" && mv "$out.tmp" "$out"
echo "cluster tools built in $(( $(date +%s) - start )) s: $out ($(du -sh "$out" | cut -f1))"
build_kueue
