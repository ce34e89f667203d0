#!/usr/bin/env bash
# gpu_pack.sh — build the CUDA Release here and pack, into the ignored folder
# .gpu/, everything a lent GPU machine needs to run our GPU tests, the GPU
# benchmark and a short end-to-end check with no build and no network there.
#
#   tools/dev/gpu_pack.sh            then make the `run` call this script prints
#                                (it runs tools/gpu_first_run.sh there)
#
# Why a pack: the GPU image has nvcc, CMake and the CUDA libraries but none of
# our Debian libraries (zmq, msgpack, libconfig, jansson, pcre2, utf8proc,
# openblas, microhttpd), no network, and ../shared does not travel. So we ship
#   .gpu/bin/     the `cuda`-labelled test executables (list from ctest -N -L
#                 cuda), the tools they spawn (microspec-mkmodel, -mkeagle) and
#                 the end-to-end tools, all stripped;
#   .gpu/lib/     the ldd closure of those executables, minus the libraries any
#                 glibc system has and minus the CUDA libraries the image has
#                 (EXCLUDE below); a library over XZ_OVER bytes is stored as
#                 NAME.xz (libopenblas: 36 MB → 4 MB) and unpacked there;
#   .gpu/shared/  the subset of ../shared the end-to-end check needs, in the
#                 same layout (the binaries are built with MS_SHARED_DIR=.gpu/shared,
#                 relative: they are run from the repository root);
#   .gpu/tests.tsv  name, executable, ctest TIMEOUT, arguments of each cuda test;
#   .gpu/BUILD_DIR  the absolute MS_BUILD_DIR baked into the tests (they spawn
#                 MS_BUILD_DIR/tools/microspec-mkmodel; gpu_first_run.sh links
#                 that path to .gpu/bin when it does not exist there);
#   .gpu/MANIFEST   every file with its size and sha256, and the build facts.
#
# The whole working tree that travels is limited to 64 MiB, so this script
# fails when .gpu exceeds LIMIT_MIB (default 56) or tree + .gpu exceeds 64 MiB.
#
# Environment: MS_GPU_BUILD (default build/gpu), MS_SHARED (default ../shared),
# LIMIT_MIB (56), JOBS (nproc).
set -euo pipefail
# --help prints the header above; an unknown option is refused (exit 2).
for a in "$@"; do
  case $a in
    -h|--help) sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "gpu_pack.sh: unknown option $a (see --help)" >&2; exit 2 ;;
  esac
done

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
build=${MS_GPU_BUILD:-$root/build/gpu}
shared=${MS_SHARED:-$root/../shared}
limit_mib=${LIMIT_MIB:-56}
jobs=${JOBS:-$(nproc)}
pack=$root/.gpu
XZ_OVER=$((4 * 1024 * 1024))

die() { echo "gpu_pack: ERROR: $*" >&2; exit 1; }
say() { echo "gpu_pack: $*" >&2; }

# Libraries NOT packed (matched on the SONAME ldd prints):
#  - glibc's own pieces: they must match the target's ld.so, and every glibc
#    system has them (we build against glibc 2.36; the image's is newer, and
#    glibc is backward compatible);
#  - the GCC runtime (libgcc_s, libstdc++): present wherever g++/nvcc is, and
#    backward compatible (GLIBCXX versions only grow);
#  - the CUDA libraries and driver: the image has CUDA 13 (cudart, cuBLAS,
#    cuBLASLt, NCCL; libcuda comes with the driver). Ours would be 800 MB.
EXCLUDE='^(linux-vdso\.so|ld-linux.*\.so|libc\.so|libm\.so|libmvec\.so|libpthread\.so|libdl\.so|librt\.so|libresolv\.so|libutil\.so|libanl\.so|libgcc_s\.so|libstdc\+\+\.so|libcuda\.so|libcudart\.so|libcublas\.so|libcublasLt\.so|libnccl\.so)'

command -v cmake >/dev/null || die "cmake not found"
command -v python3 >/dev/null || die "python3 not found (used to read ctest's JSON)"
command -v xz >/dev/null || die "xz not found"
[ -f "$shared/models/stories260k/stories260K.bin" ] || die "$shared/models/stories260k/stories260K.bin absent (set MS_SHARED)"

# --- 1. configure + build ----------------------------------------------------
# MS_SHARED_DIR is a CACHE PATH; given as :STRING it stays relative (a PATH
# would be made absolute against the current directory).
mkdir -p "$build"
say "configuring $build (Release, CUDA sm_90, MS_SHARED_DIR=.gpu/shared)"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DMS_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -UMS_SHARED_DIR -DMS_SHARED_DIR:STRING=.gpu/shared -DMS_SANITIZE=OFF -DMS_FUZZ=OFF -DMS_WERROR=OFF >"$build/gpu_pack.configure.log" 2>&1 ||
  { tail -n 30 "$build/gpu_pack.configure.log" >&2; die "configure failed (log: $build/gpu_pack.configure.log)"; }
grep -q '^MS_SHARED_DIR:STRING=.gpu/shared$' "$build/CMakeCache.txt" || die "MS_SHARED_DIR did not stay relative"
grep -q 'CUDA backend ON' "$build/gpu_pack.configure.log" || die "CUDA backend is not ON (no nvcc?)"

# The cuda tests, from ctest itself: name, executable, TIMEOUT, arguments.
# ctest names the executable only once it is built; before that we take the
# test name as its target (ms_add_test names the executable after the test).
# Their WORKING_DIRECTORY is ctest's default (the tests folder of the build):
# the packed tests run from the repo root instead, where .gpu/shared resolves.
cuda_tests() {
  (cd "$build" && ctest -N -L cuda --show-only=json-v1) | python3 -c '
import json, sys
d = json.load(sys.stdin)
for t in d["tests"]:
    cmd = t.get("command") or ["-"]
    props = {p["name"]: p["value"] for p in t.get("properties", [])}
    print("\t".join([t["name"], cmd[0], str(int(float(props.get("TIMEOUT", 300)))), " ".join(cmd[1:])]))
'
}
tests_tsv=$(cuda_tests)
[ -n "$tests_tsv" ] || die "ctest -N -L cuda lists no tests"
say "cuda tests: $(printf '%s\n' "$tests_tsv" | cut -f1 | tr '\n' ' ')"

# Tools: the GPU benchmark, the end-to-end set, and what the tests spawn
# (MS_BUILD_DIR/tools/microspec-mkmodel, -mkeagle).
tools=(microspec-gpu-bench microspec-generate convert-llama2c microspec-freqlist microspec-target microspec-draft
  microspec-mkmodel microspec-mkeagle)
targets=("${tools[@]}")
while IFS=$'\t' read -r name exe _; do [ "$exe" = - ] && exe=$name; targets+=("$(basename "$exe")"); done <<<"$tests_tsv"
say "building ${#targets[@]} targets with $jobs jobs"
cmake --build "$build" -j"$jobs" --target "${targets[@]}" >"$build/gpu_pack.build.log" 2>&1 ||
  { tail -n 40 "$build/gpu_pack.build.log" >&2; die "build failed (log: $build/gpu_pack.build.log)"; }
tests_tsv=$(cuda_tests)
mapfile -t test_exes < <(printf '%s\n' "$tests_tsv" | cut -f2)
for i in "${!test_exes[@]}"; do
  [ "${test_exes[$i]}" != - ] || die "ctest names no executable for $(printf '%s\n' "$tests_tsv" | sed -n "$((i + 1))p" | cut -f1) after the build"
done

tool_path() { # the built file of a tool target
  local p
  for p in "$build/tools/$1" "$build/bin/$1"; do [ -x "$p" ] && { echo "$p"; return; }; done
  die "tool $1 was not built"
}

# --- 2. assemble .gpu ---------------------------------------------------------
rm -rf "$pack"
mkdir -p "$pack/bin" "$pack/lib" "$pack/shared/models/stories260k"
bins=()
for e in "${test_exes[@]}"; do [ -x "$e" ] || die "$e not built"; bins+=("$e"); done
for t in "${tools[@]}"; do bins+=("$(tool_path "$t")"); done
for b in "${bins[@]}"; do
  install -m 0755 "$b" "$pack/bin/"
  strip --strip-all "$pack/bin/$(basename "$b")"
done
# strip keeps the device code (.nv_fatbin is an allocated section): check.
first=$(basename "${test_exes[0]}")
if readelf -S "${test_exes[0]}" | grep -c nv_fatbin >/dev/null; then
  readelf -S "$pack/bin/$first" | grep -c nv_fatbin >/dev/null || die "strip removed the device code of $first"
else
  die "${test_exes[0]} has no .nv_fatbin section: not a CUDA build?"
fi
printf '%s\n' "$tests_tsv" | awk -F'\t' 'BEGIN{OFS="\t"} {n=split($2,p,"/"); $2=p[n]; print}' >"$pack/tests.tsv"
echo "$build" >"$pack/BUILD_DIR"

# The ldd closure (ldd already lists indirect dependencies).
declare -A libs=()
for b in "${bins[@]}"; do
  while read -r name arrow path _; do
    [ "$arrow" = "=>" ] || continue
    [ "$path" = "not" ] && die "$(basename "$b"): $name not found here"
    [[ $name =~ $EXCLUDE ]] && continue
    libs[$name]=$path
  done < <(ldd "$b")
done
for name in "${!libs[@]}"; do
  cp -L "${libs[$name]}" "$pack/lib/$name"
  chmod 0644 "$pack/lib/$name"
  if [ "$(stat -c %s "$pack/lib/$name")" -gt "$XZ_OVER" ]; then
    xz -9 -T"$jobs" "$pack/lib/$name" # → NAME.xz; gpu_first_run.sh unpacks it outside .gpu
  fi
done

src=$shared/models/stories260k
for f in stories260K.bin tok512.bin golden_once_upon_a_time_t0_n256.txt; do
  [ -f "$src/$f" ] || die "$src/$f absent"
  cp "$src/$f" "$pack/shared/models/stories260k/"
done

# --- 3. check: every packed binary resolves only through .gpu/lib -------------
# (or the excluded system/CUDA libraries), with an empty environment.
unpack=$(mktemp -d)
trap 'rm -rf "$unpack"' EXIT
for z in "$pack"/lib/*.xz; do [ -e "$z" ] && xz -dc "$z" >"$unpack/$(basename "$z" .xz)"; done
bad=0
for b in "$pack"/bin/*; do
  while read -r name arrow path _; do
    [ "$arrow" = "=>" ] || continue
    if [ "$path" = "not" ]; then echo "  $(basename "$b"): $name NOT FOUND" >&2; bad=1; continue; fi
    [[ $name =~ $EXCLUDE ]] && continue
    case $path in "$pack/lib/"* | "$unpack/"*) ;; *) echo "  $(basename "$b"): $name from $path (outside .gpu/lib)" >&2; bad=1 ;; esac
  done < <(env -i LD_LIBRARY_PATH="$pack/lib:$unpack" ldd "$b")
done
[ "$bad" = 0 ] || die "packed binaries resolve libraries outside .gpu/lib (above)"
env -i LD_LIBRARY_PATH="$pack/lib:$unpack" "$pack/bin/microspec-generate" --help >/dev/null ||
  die "packed microspec-generate does not start under env -i LD_LIBRARY_PATH=.gpu/lib"
say "ldd check: every packed binary resolves outside .gpu/lib only the excluded system/CUDA libraries"
# The newest symbol versions the pack needs from the libraries it leaves out.
needs=$(for f in "$pack"/bin/* "$pack"/lib/*.so* "$unpack"/*; do
  case $f in *.xz) continue ;; esac
  objdump -T "$f" 2>/dev/null | grep -o 'GLIBC_2\.[0-9.]*\|GLIBCXX_3\.[0-9.]*' || true
done | sort -uV | awk -F_ '{v[$1]=$0} END{print v["GLIBC"], v["GLIBCXX"]}')

# --- 4. MANIFEST and sizes ------------------------------------------------------
gpu_bytes=$(find "$pack" -type f -printf '%s\n' | awk '{s+=$1} END{print s+0}')
tree_bytes=$(git -C "$root" ls-files -z -co --exclude-standard | (cd "$root" && xargs -0 -r stat -L -c %s 2>/dev/null || true) |
  awk '{s+=$1} END{print s+0}')
{
  echo "# MicroSpec GPU pack — made by tools/dev/gpu_pack.sh; used by tools/gpu_first_run.sh"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "git: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$root" diff --quiet 2>/dev/null || echo ' (+ uncommitted changes)')"
  echo "build: $build (Release, CUDA archs 90, MS_SHARED_DIR=.gpu/shared)"
  echo "built on: $(. /etc/os-release && echo "$PRETTY_NAME"), $(ldd --version | head -n1), nvcc $("$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)" --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p')"
  echo "not packed (expected on the GPU image): glibc (libc libm libmvec libpthread libdl librt libresolv libutil libanl ld-linux), libgcc_s, libstdc++, libcuda, libcudart, libcublas, libcublasLt, libnccl"
  echo "needs from the target: $needs (its glibc and libstdc++ must provide these symbol versions)"
  echo "compressed: libraries over $XZ_OVER bytes as NAME.xz (unpacked by gpu_first_run.sh)"
  echo "total: $gpu_bytes bytes in .gpu; working tree (tracked + untracked, not ignored): $tree_bytes bytes"
  echo "# size sha256 path"
  (cd "$pack" && find . -type f ! -name MANIFEST | sort | while read -r f; do
    printf '%10s %s %s\n' "$(stat -c %s "$f")" "$(sha256sum "$f" | cut -c1-16)" "${f#./}"
  done)
} >"$pack/MANIFEST"
gpu_bytes=$(find "$pack" -type f -printf '%s\n' | awk '{s+=$1} END{print s+0}')
mib() { awk -v b="$1" 'BEGIN{printf "%.1f MiB", b/1048576}'; }
say ".gpu: $(mib "$gpu_bytes") ($(find "$pack" -type f | wc -l) files: bin $(du -sb "$pack/bin" | cut -f1) B, lib $(du -sb "$pack/lib" | cut -f1) B, shared $(du -sb "$pack/shared" | cut -f1) B)"
say "working tree that travels besides .gpu: $(mib "$tree_bytes")"
[ "$gpu_bytes" -le $((limit_mib * 1048576)) ] || die ".gpu is $(mib "$gpu_bytes"), over the $limit_mib MiB budget"
[ $((gpu_bytes + tree_bytes)) -le $((64 * 1048576)) ] ||
  die ".gpu + working tree = $(mib $((gpu_bytes + tree_bytes))), over the 64 MiB the run tool carries"

cat <<EOF

Pack ready: .gpu ($(mib "$gpu_bytes")) + working tree ($(mib "$tree_bytes")) = $(mib $((gpu_bytes + tree_bytes))) of 64 MiB.
In the GPU session make this one call of the run tool (about 9 minutes of device time):

  run(command="bash tools/gpu_first_run.sh", carry=[".gpu"], timeout_s=600)

It writes weights.txt, env.txt, tests.tsv, logs.txt, gpu_bench.json, gpu_bench.csv,
e2e.txt and summary.txt under \$OUT and prints the summary table last.
A second, narrower call: run(command="GPU_STEPS=tests GPU_ONLY=test_cuda_spec bash tools/gpu_first_run.sh", carry=[".gpu"], timeout_s=600)
EOF
