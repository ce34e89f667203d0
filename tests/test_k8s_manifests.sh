#!/usr/bin/env bash
# Issue 34, acceptance 3: the Kubernetes layouts of cluster/k8s/ (pair: target
# and draft in one pod, a Deployment of N and a Service; split: target and
# draft as two Deployments) validate offline against the schemas of a current
# Kubernetes version (PyPI kubernetes-validate, --strict: unknown fields are
# errors), their references hold (tests/k8s_check.py) and the cluster configs
# they carry pass microspec-config --check. Then deliberately broken copies
# must fail: a wrong type (schema), a misspelt field (strict schema), a
# Service selecting no pod, a probe on the wrong port and kustomize replicas
# for no Deployment (references), a bad config key (microspec-config).
#
#   test_k8s_manifests.sh BUILD_DIR
set -uo pipefail
build=$(cd "${1:?usage: test_k8s_manifests.sh BUILD_DIR}" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
if ! python3 -c 'import kubernetes_validate' 2>/dev/null; then
  bash "$src/tools/install-deps.sh" >/dev/null 2>&1 || true
  python3 -c 'import kubernetes_validate' 2>/dev/null ||
    { echo "SKIP: PyPI kubernetes-validate cannot be installed (tools/install-deps.sh; pip failed)"; exit 77; }
fi
kv=(python3 -m kubernetes_validate --strict --quiet)
"${kv[@]}" --version >/dev/null 2>&1 || kv=(kubernetes-validate --strict --quiet)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# check DIR LAYOUT — 0 when the layout passes all three checks; the first
# failing check's name in $what and its messages in $tmp/out.
check() {
  local dir=$1 layout=$2 files=() c
  mkdir -p "$tmp/cfg-$layout"
  what=references
  (cd "$dir" && python3 "$src/tests/k8s_check.py" "$layout" "$tmp/cfg-$layout") >"$tmp/files" 2>"$tmp/out" || return 1
  [ ! -s "$tmp/out" ] || return 1
  mapfile -t files <"$tmp/files"
  what=schema
  (cd "$dir" && "${kv[@]}" "${files[@]}") >"$tmp/out" 2>&1 || return 1
  grep -q 'ERROR' "$tmp/out" && return 1
  what=config
  for c in "$tmp/cfg-$layout"/*.cfg; do
    "$build/tools/microspec-config" "$c" --check >"$tmp/out" 2>&1 || return 1
  done
  rm -rf "$tmp/cfg-$layout"
  return 0
}

version=$("${kv[@]}" --version 2>&1 | tail -n 1)
echo "kubernetes-validate $version (its default Kubernetes version)"
for layout in pair split; do
  if check "$src/cluster/k8s" "$layout"; then
    echo "ok: cluster/k8s/$layout validates (schema, references, configs)"
  else
    fail "cluster/k8s/$layout: $what check: $(head -c 600 "$tmp/out")"
  fi
done

# broken NAME LAYOUT EXPECTED_CHECK PYTHON — a copy of cluster/k8s edited by
# PYTHON (on `docs`, the YAML documents of each file, by path) must fail, in
# EXPECTED_CHECK.
broken() {
  local name=$1 layout=$2 want=$3 edit=$4
  rm -rf "$tmp/k8s"
  mkdir -p "$tmp/k8s"
  cp -r "$src/cluster/k8s/." "$tmp/k8s/"
  python3 - "$tmp/k8s" <<EOF || { fail "broken copy $name: the edit failed"; return; }
import os, sys, yaml
root = sys.argv[1]
def load(p):
    return list(yaml.safe_load_all(open(os.path.join(root, p), encoding="utf-8")))
def save(p, docs):
    yaml.safe_dump_all(docs, open(os.path.join(root, p), "w", encoding="utf-8"), sort_keys=False)
$edit
EOF
  if check "$tmp/k8s" "$layout"; then
    fail "broken copy '$name' passed every check"
  elif [ "$what" != "$want" ]; then
    fail "broken copy '$name' failed the $what check, expected $want: $(head -c 300 "$tmp/out")"
  else
    echo "ok: broken copy '$name' fails the $what check: $(grep -m1 -E 'ERROR|FAIL|:' "$tmp/out" | head -c 200)"
  fi
}
broken "replicas as a string" pair schema '
d = load("pair/deployment.yaml"); d[0]["spec"]["replicas"] = "two"; save("pair/deployment.yaml", d)'
broken "misspelt readinessProbe" split schema '
d = load("split/target-deployment.yaml")
c = d[0]["spec"]["template"]["spec"]["containers"][0]; c["readinesProbe"] = c.pop("readinessProbe")
save("split/target-deployment.yaml", d)'
broken "Service selecting no pod" pair references '
d = load("pair/service.yaml"); d[0]["spec"]["selector"] = {"app.kubernetes.io/name": "microspec-pairs"}
save("pair/service.yaml", d)'
broken "probe port not the http.port" split references '
d = load("split/target-deployment.yaml")
d[0]["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = 8081
save("split/target-deployment.yaml", d)'
broken "replicas for no Deployment" pair references '
d = load("pair/kustomization.yaml"); d[0]["replicas"][0]["name"] = "microspec-pairs"; save("pair/kustomization.yaml", d)'
broken "unknown config key" pair config '
d = load("pair/configmap.yaml"); d[0]["data"]["pair.cfg"] = d[0]["data"]["pair.cfg"].replace("queue = 8", "queu = 8")
save("pair/configmap.yaml", d)'

if [ "$fails" -gt 0 ]; then echo "test_k8s_manifests: $fails failure(s)"; exit 1; fi
echo "test_k8s_manifests: ok"
