#!/usr/bin/env bash
# Issue 34, acceptance 4: README.md's "Many pairs" block, run as written the way
# tests/test_readme_examples.sh runs "Using the engine": the fenced sh block is
# cut out and run under `set -euo pipefail` from the repository root, on the
# private Slurm of tests/integration/slurm.sh (SLURM_CONF) with nginx. Only
# places change: build/release/ → the build, build/models and build/slurm →
# this test's folder, cpu-one-box.cfg → a copy whose model and ports are this
# test's, the fixed ports 8090 and 8000 → free ones (two pairs: a list of
# ports for HTTP and for the link, submit.sh's form), and nginx's workers keep
# the test's tag (--env MS_TEST_TAG, so none can outlive it). Every command
# must exit 0; the front's answer must be the single-process text, and nothing
# may run after the block (its scancel and --stop).
source "$(dirname "$0")/lib.sh"
it_init readme-pairs
it_need_shared models/stories260k/stories260K.bin models/stories260k/tok512.bin
it_need_cmds nginx
source "$(dirname "$0")/slurm.sh"
it_slurm
export MS_FRONT_DIR=$WORK/front
stop_front='MS_FRONT_DIR=$WORK/front bash "$MS_SOURCE_DIR/cluster/front/nginx-front.sh" --stop >/dev/null 2>&1'
IT_CLEANUP="$stop_front; it_slurm_stop"
echo "MS_FRONT_DIR='$WORK/front' bash '$MS_SOURCE_DIR/cluster/front/nginx-front.sh' --stop" >>"$WORK/.cleanup"

awk '/^## Many pairs/ {s=1; next} s==1 && /^```sh/ {s=2; next} s==2 && /^```/ {exit} s==2 {print}' \
  "$MS_SOURCE_DIR/README.md" >"$WORK/block.sh"
[ "$(grep -c . "$WORK/block.sh")" -ge 6 ] || it_die "README.md's 'Many pairs' block not found (or shorter than 6 lines)"
grep -q 'sbatch\|submit.sh' "$WORK/block.sh" && grep -q 'nginx-front.sh' "$WORK/block.sh" ||
  it_die "the block runs no Slurm job or no front"

# The config as the README names it, with this test's model folder and ports.
http_port=$(it_port) link_port=$(it_port) front=$(it_port)
# The two pairs' ports from the port helper (P, P+1 may be another test's).
ports=$(it_port),$(it_port) lports=$(it_port),$(it_port)
sed -e "s#\"../../build/models/stories260k\"#\"$WORK/models/stories260k\"#" \
    -e "s#tcp://127.0.0.1:5757#tcp://127.0.0.1:$link_port#" -e "s#^\(  port = \)8080;#\1$http_port;#" \
    "$MS_SOURCE_DIR/cluster/configs/cpu-one-box.cfg" >"$WORK/cpu-one-box.cfg"
grep -q "$WORK/models/stories260k" "$WORK/cpu-one-box.cfg" && grep -q "port = $http_port;" "$WORK/cpu-one-box.cfg" ||
  it_die "cpu-one-box.cfg no longer has the model path or port this test replaces"
mkdir -p "$WORK/models"
{
  echo 'set -euo pipefail'
  echo 'set -x'
  sed -e "s#build/release/#$MS_BUILD_DIR/#g" -e "s#build/models/#$WORK/models/#g" -e "s#build/slurm#$MS_SLURM_DIR#g" \
      -e "s#cluster/configs/cpu-one-box.cfg#$WORK/cpu-one-box.cfg#g" -e "s#\.\./shared#$MS_SHARED_DIR#g" \
      -e "s#--port 8090#--port $ports --link-port $lports#g" -e "s#8000#$front#g" -e "s#--start#--env MS_TEST_TAG --start#" "$WORK/block.sh"
} >"$WORK/run.sh"
it_log "running README.md's 'Many pairs' block ($(grep -vc '^#\|^$' "$WORK/block.sh") lines)"
if ! (cd "$MS_SOURCE_DIR" && MS_BUILD_DIR=$MS_BUILD_DIR timeout 160 bash "$WORK/run.sh" >"$WORK/stdout" 2>"$WORK/block.log"); then
  it_fail "the README block stopped; its last commands and messages:"
  tail -n 25 "$WORK/block.log"
  it_finish
fi
it_log "$(grep -c '^+ ' "$WORK/block.log") commands ran, all exited 0"

# The one curl answer (the only JSON object on stdout) vs microspec-generate.
printf 'Once upon a time' >"$WORK/prompt.txt"
it_ar "$WORK/models/stories260k" "$WORK/prompt.txt" 32 "$WORK/ar.txt"
grep '^{' "$WORK/stdout" | tail -n 1 >"$WORK/answer.json"
it_text_same "the front's answer" "$WORK/ar.txt" "$WORK/answer.json" "$WORK/answer.txt" &&
  it_log "the front answered with the single-process text"
[ "$(grep -c '^http://127.0.0.1:' "$WORK/stdout")" = 3 ] ||
  it_fail "submit.sh printed $(grep -c '^http://' "$WORK/stdout") URLs, expected 1 + 2: $(grep http "$WORK/stdout")"
[ -z "$(squeue -h 2>/dev/null)" ] || for _ in $(seq 1 120); do [ -z "$(squeue -h)" ] && break; sleep 0.25; done
[ -z "$(squeue -h)" ] || it_fail "jobs left after the block's scancel: $(squeue -h)"
front_up() { [ -s "$WORK/front/nginx.pid" ] && kill -0 "$(cat "$WORK/front/nginx.pid")" 2>/dev/null; }
for _ in $(seq 1 50); do front_up || break; sleep 0.1; done
! front_up || it_fail "the front still runs 5 s after --stop"
it_finish
