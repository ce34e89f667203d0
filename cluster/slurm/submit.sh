#!/usr/bin/env bash
# Submits N MicroSpec pairs, each one heterogeneous job of
# cluster/slurm/pair.sbatch, and (with --wait) prints their URLs once up.
# A loop, not a job array: Slurm does not make arrays of heterogeneous jobs.
#
#   cluster/slurm/submit.sh CONFIG [-n N] [--port P] [--link-port P] [--wait SECONDS] [-- SBATCH OPTIONS...]
#
# Pair i (0..N-1) serves HTTP on P+i (default P: http.port) and links on
# link port+i (pair.sbatch's default otherwise), so pairs sharing a node do
# not collide; a comma-separated list (--port 8090,8093) gives each pair's own. Each component's CPUs come from the config (target.threads,
# draft.threads; 0 leaves Slurm's default) and a component on cuda:N asks for
# one GPU; SBATCH OPTIONS after -- go to both components.
# The batch output goes to ${MS_SLURM_DIR:-build/slurm}/slurm-JOBID.out, the job
# ids to ${MS_SLURM_DIR:-build/slurm}/pairs.jobs (stop them all with
# `scancel $(cat build/slurm/pairs.jobs)`); with --wait, the URLs of the pairs
# that came up within SECONDS go to stdout and to .../pairs.urls (the list
# cluster/front/nginx-front.sh reads), and a pair that did not is an error.
set -euo pipefail
me=submit.sh
root=$(cd "$(dirname "$0")/../.." && pwd)
usage() { sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
config="" n=1 port="" link_port="" wait_s="" extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    -n) n=$2; shift 2 ;;
    --port) port=$2; shift 2 ;;
    --link-port) link_port=$2; shift 2 ;;
    --wait) wait_s=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "$me: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) [ -z "$config" ] || { echo "$me: one CONFIG only" >&2; exit 2; }; config=$1; shift ;;
  esac
done
[ -n "$config" ] || { usage >&2; exit 2; }
[ -f "$config" ] || { echo "$me: $config: no such file" >&2; exit 2; }
[[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "$me: -n takes a positive count" >&2; exit 2; }
command -v sbatch >/dev/null || { echo "$me: sbatch not found (Slurm's client commands)" >&2; exit 2; }
config=$(cd "$(dirname "$config")" && pwd)/$(basename "$config")
build=${MS_BUILD_DIR:-$root/build/release}
[ -x "$build/tools/microspec-config" ] || { echo "$me: $build/tools/microspec-config missing: build first" >&2; exit 2; }
mapfile -t v < <("$build/tools/microspec-config" "$config" --get http.port --get target.threads --get draft.threads \
                   --get target.device --get draft.device --get link.endpoint)
[ -n "$port" ] || port=${v[0]}
if [ -z "$link_port" ]; then
  case "${v[5]}" in tcp://*:*) link_port=${v[5]##*:} ;; *) link_port=5757 ;; esac
fi
# component OPTS THREADS DEVICE — sbatch options of one component
component() {
  local -n out=$1
  out=(--ntasks=1)
  [ "$2" = 0 ] || out+=("--cpus-per-task=$2")
  case "$3" in cuda*) out+=(--gpus=1) ;; esac
  out+=("${extra[@]}")
}
dir=${MS_SLURM_DIR:-$root/build/slurm}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
c0=() c1=()
# port_of LIST I — the I-th port: LIST's I-th entry, or LIST + I for one number
port_of() {
  local list=() p
  IFS=, read -r -a list <<<"$1"
  if [ ${#list[@]} -gt 1 ]; then p=${list[$2]:-}; else p=$(($1 + $2)); fi
  [[ "$p" =~ ^[0-9]+$ ]] || { echo "$me: the port list $1 has no entry for pair $2" >&2; exit 2; }
  echo "$p"
}
for ((i = 0; i < n; i++)); do port_of "$port" "$i" >/dev/null && port_of "$link_port" "$i" >/dev/null; done
component c0 "${v[1]}" "${v[3]}"
component c1 "${v[2]}" "${v[4]}"
# The batch script's own output beside the job folders (an -o among OPTIONS wins).
c0=("--output=$dir/slurm-%j.out" "${c0[@]}")
: >"$dir/pairs.jobs"
rm -f "$dir/pairs.urls"
jobs=()
for ((i = 0; i < n; i++)); do
  p=$(port_of "$port" "$i")
  id=$(cd "$root" && sbatch --parsable --job-name="microspec-pair-$i" "${c0[@]}" : "${c1[@]}" \
         cluster/slurm/pair.sbatch "$config" --port "$p" --link-port "$(port_of "$link_port" "$i")")
  id=${id%%;*}
  jobs+=("$id")
  echo "$id" >>"$dir/pairs.jobs"
  echo "$me: pair $i: job $id (HTTP port $p)" >&2
done
[ -n "$wait_s" ] || exit 0

deadline=$((SECONDS + wait_s))
urls=()
for id in "${jobs[@]}"; do
  while [ ! -s "$dir/$id/url" ] && [ $SECONDS -lt $deadline ]; do
    # A job that has left the queue will never write its URL.
    [ -n "$(squeue -h -j "$id" -o %i 2>/dev/null)" ] || break
    sleep 0.5
  done
  [ -s "$dir/$id/url" ] || { echo "$me: job $id did not come up (see $dir/slurm-$id.out, $dir/$id/*.log)" >&2; exit 1; }
  urls+=("$(cat "$dir/$id/url")")
done
printf '%s\n' "${urls[@]}" | tee "$dir/pairs.urls"
