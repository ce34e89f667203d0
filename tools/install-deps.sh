#!/usr/bin/env bash
# Installs, by Debian package name, everything the build and the tests need.
# Idempotent: packages already present are not touched, and apt is only
# called when something is missing. Needs root (or sudo) when it installs.
#
#   tools/install-deps.sh        (no arguments)
set -euo pipefail
# --help prints the header above; an unknown option is refused (exit 2).
for a in "$@"; do
  case $a in
    -h|--help) sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "install-deps.sh: unknown option $a (see --help)" >&2; exit 2 ;;
  esac
done

packages=(
  build-essential cmake pkg-config git ca-certificates
  clang libclang-rt-14-dev          # libFuzzer + sanitizers for the fuzz targets
  libzmq3-dev                       # node link (ZeroMQ)
  libsodium-dev                     # HMAC-SHA256 of the link's hello, SHA-256 in tests (ZeroMQ's crypto library)
  libmsgpack-dev                    # protocol messages (msgpack-c)
  libconfig-dev                     # cluster configuration files
  libjansson-dev                    # config.json, tokenizer.json, HTTP bodies
  libpcre2-dev                      # tokenizer pre-split regex
  libutf8proc-dev                   # tokenizer NFC normalizer (Qwen)
  libopenblas-dev                   # CPU GEMM
  libmicrohttpd-dev                 # HTTP API on the target node
  python3 python3-pip               # test helpers and report scripts; pip for the openai client (below)
  curl iproute2                     # integration tests
  prometheus                        # promtool check metrics on /metrics (~19 MB; the server is not started)
  gnuplot-nox                       # PNG plots of results/coverage (tools/dev/coverage_report.sh)
  slurm-wlm munge                   # cluster/slurm/ (a pair as a heterogeneous job); test_cluster_slurm runs a private Slurm
  nginx                             # cluster/front/ (many pairs behind one endpoint); test_cluster_front
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

# Python packages the tests use (pip, for the user running this): the official
# OpenAI client (tests/integration/test_cluster_openai.sh); ggml's `gguf`
# reader and numpy (the GGUF golden checks, the float64 reference forward and
# tools/vocab/specvocab_build.py, which writes the SpecVocab artefacts);
# Hugging Face's tokenizers (Gemma's tokenizer.json as an independent reference);
# msgpack, the independent reader of the wire goldens (tests/test_wire_golden.py);
# kubernetes-validate, the offline schema check of cluster/k8s/ (test_k8s_manifests).
# A failed pip install is reported and the tests that need it skip; it does
# not stop the build.
py_mods=(openai gguf numpy tokenizers msgpack kubernetes_validate)
py_pkgs=(openai gguf==0.19.0 numpy tokenizers msgpack kubernetes-validate)
python_deps() {
  local i want=()
  for i in "${!py_mods[@]}"; do
    python3 -c "import ${py_mods[$i]}" 2>/dev/null || want+=("${py_pkgs[$i]}")
  done
  if [ ${#want[@]} -eq 0 ]; then
    echo "install-deps: python3 has ${py_mods[*]}" >&2
    return 0
  fi
  echo "install-deps: pip installing ${want[*]} for $(python3 --version 2>&1)" >&2
  python3 -m pip install --quiet "${want[@]}" 2>/dev/null ||
    python3 -m pip install --quiet --break-system-packages "${want[@]}" ||
    echo "install-deps: pip install ${want[*]} failed (the tests that need them will be skipped)" >&2
  return 0
}

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present" >&2
  python_deps
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
python_deps
