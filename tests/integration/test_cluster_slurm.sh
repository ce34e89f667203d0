#!/usr/bin/env bash
# Issue 34, acceptance 1: a private Slurm on this machine (munged, slurmctld
# and two slurmd, as the Slurm nodes ms1 and ms2, with a config written here)
# runs cluster/slurm/pair.sbatch on the stories260K pair as a heterogeneous job:
# target on one component, draft on the other, linked over tcp with the job's
# secret; its answer equals microspec-generate's, and scancel leaves neither a
# node nor a step of the job running. Then cluster/slurm/submit.sh -n 2 (the
# loop form) brings up two pairs whose URLs it lists, each answering with the
# same text, stopped by scancel.
# (Two slurmd, not one: tests/integration/slurm.sh says why.)
source "$(dirname "$0")/lib.sh"
it_init slurm
it_need_shared models/stories260k/stories260K.bin models/stories260k/tok512.bin
it_stories

source "$(dirname "$0")/slurm.sh"
it_slurm
S=$WORK/slurm

# ---- the reference and the pair's config --------------------------------------------------------
printf 'Once upon a time' >"$WORK/prompt.txt"
it_ar "$STORIES" "$WORK/prompt.txt" 32 "$WORK/ar.txt"
C_MODEL=$STORIES C_PORT=$(it_port) C_ENDPOINT=tcp://127.0.0.1:$(it_port)
it_config "$WORK/pair.cfg"
port=$C_PORT

# job_gone ID — bounded wait until the job has left the queue (completing included)
job_gone() {
  local deadline=$((SECONDS + 60))
  while [ -n "$(squeue -h -j "$1" -o %i 2>/dev/null)" ] && [ $SECONDS -lt $deadline ]; do sleep 0.25; done
  [ -z "$(squeue -h -j "$1" -o %i 2>/dev/null)" ]
}
# left PATTERN — this test's processes (by its MS_TEST_TAG: another test's
# private Slurm may run a job of the same id) whose command line holds PATTERN
left() {
  local pid line
  while read -r pid line; do
    grep -qzx -- "MS_TEST_TAG=$MS_TEST_TAG" "/proc/$pid/environ" 2>/dev/null && echo "$pid $line"
  done < <(pgrep -af -- "$1" | grep -v pgrep)
  return 0
}
# ask URL LABEL — /v1/completions with the prompt, text compared with the reference
ask() {
  printf '{"prompt":"Once upon a time","max_tokens":32,"temperature":0}' >"$WORK/req.json"
  local code
  code=$(it_post "$1" /v1/completions "$WORK/req.json" "$WORK/$2.json")
  [ "$code" = 200 ] || { it_fail "$2: HTTP $code: $(head -c 300 "$WORK/$2.json")"; return; }
  it_text_same "$2" "$WORK/ar.txt" "$WORK/$2.json" "$WORK/$2.txt" && it_log "$2: the single-process text"
}

# ---- (1) one pair: sbatch, answer, scancel ----------------------------------------------------------
id=$(cd "$MS_SOURCE_DIR" && MS_BUILD_DIR=$MS_BUILD_DIR sbatch --parsable -o "$WORK/job-%j.log" \
       cluster/slurm/pair.sbatch "$WORK/pair.cfg" --timeout 90) || it_die "sbatch failed"
id=${id%%;*}
it_log "job $id submitted"
deadline=$((SECONDS + 100))
until [ -s "$S/jobs/$id/url" ] || [ $SECONDS -ge $deadline ] || [ -z "$(squeue -h -j "$id" -o %i)" ]; do sleep 0.25; done
[ -s "$S/jobs/$id/url" ] || { cat "$WORK/job-$id.log" 2>/dev/null; it_die "the pair of job $id did not come up"; }
url=$(cat "$S/jobs/$id/url")
[ "$url" = "http://127.0.0.1:$port" ] || it_fail "job $id: url $url, expected http://127.0.0.1:$port"
grep -q "^MS_LINK_ENDPOINT=tcp://127.0.0.1:" "$S/jobs/$id/pair.env" || it_fail "job $id: pair.env: $(cat "$S/jobs/$id/pair.env")"
for f in link.secret pair.cfg; do
  [ "$(stat -c %a "$S/jobs/$id/$f")" = 600 ] || it_fail "job $id: $f is not mode 0600"
done
nodes=$(squeue -h -j "$id" -o '%N' | sort | tr '\n' ' ')
[ "$nodes" = "ms1 ms2 " ] || it_fail "job $id: components on '$nodes', expected ms1 and ms2"
grep -q 'draft joined' "$S/jobs/$id/target.log" || it_fail "job $id: target.log shows no draft joining"
ask "$url" pair
curl -s -m 5 "$url/health" | grep -q '"draft":"up"' || it_fail "job $id: the draft is not up after the request"
[ -n "$(left "$S/jobs/$id/pair.cfg")" ] || it_fail "job $id: no node process found while it runs"
scancel "$id"
job_gone "$id" || it_fail "job $id still in the queue 60 s after scancel"
for _ in $(seq 1 40); do [ -z "$(left "$S/jobs/$id/")" ] && break; sleep 0.25; done
[ -z "$(left "$S/jobs/$id/")" ] || it_fail "after scancel, processes of job $id remain: $(left "$S/jobs/$id/")"
[ -z "$(left "slurmstepd: \[$id\.")" ] || it_fail "after scancel, steps of job $id remain: $(left "slurmstepd: \[$id\.")"
grep -q 'stopping' "$S/jobs/$id/target.log" || it_fail "job $id: the target did not log a clean stop (SIGTERM)"

# ---- (2) two pairs: the loop form, their URL list ------------------------------------------------
# Each pair's ports from the port helper (P, P+1 may be another test's).
ports=$(it_port),$(it_port) lports=$(it_port),$(it_port)
MS_BUILD_DIR=$MS_BUILD_DIR bash "$MS_SOURCE_DIR/cluster/slurm/submit.sh" "$WORK/pair.cfg" -n 2 --port "$ports" \
  --link-port "$lports" --wait 100 -- -o "$WORK/job-%j.log" >"$WORK/urls.txt" 2>"$WORK/submit.log" ||
  it_fail "submit.sh -n 2: $(cat "$WORK/submit.log")"
[ "$(wc -l <"$WORK/urls.txt")" = 2 ] || it_fail "submit.sh listed $(wc -l <"$WORK/urls.txt") URLs: $(cat "$WORK/urls.txt")"
cmp -s "$WORK/urls.txt" "$S/jobs/pairs.urls" || it_fail "submit.sh's stdout and pairs.urls differ"
n=0
while read -r u; do
  n=$((n + 1))
  ask "$u" "loop$n"
done <"$WORK/urls.txt"
mapfile -t ids <"$S/jobs/pairs.jobs"
[ ${#ids[@]} = 2 ] || it_fail "pairs.jobs lists ${#ids[@]} jobs"
scancel "${ids[@]}"
for j in "${ids[@]}"; do
  job_gone "$j" || it_fail "job $j still in the queue after scancel"
  for _ in $(seq 1 40); do [ -z "$(left "$S/jobs/$j/")" ] && break; sleep 0.25; done
  [ -z "$(left "$S/jobs/$j/")" ] || it_fail "after scancel, processes of job $j remain: $(left "$S/jobs/$j/")"
done
it_finish
