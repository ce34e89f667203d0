#!/usr/bin/env bash
# Issue 15: a model path that does not exist is reported the same way by the
# target and the draft — "PATH: no such file or directory (KEY)" — as the
# first thing either node says (not after ~50 lines of configuration), and
# both exit non-zero. Each draft kind reads its own folders: lm its
# draft.model, layerskip the target.model, eagle both. Needs no model.
source "$(dirname "$0")/lib.sh"
it_init badpath
missing=$WORK/no-such-model
mkdir -p "$WORK/present"
# node BIN CONFIG NAME WANT_PATH WANT_KEY — runs the node, checks its first line
node() {
  local out=$WORK/$3.log rc
  timeout 60 "$1" --config "$2" >"$out" 2>&1 </dev/null
  rc=$?
  [ "$rc" != 0 ] && [ "$rc" != 124 ] || it_fail "$3: exit $rc, expected a failure"
  local first
  first=$(head -n 1 "$out")
  [[ "$first" == *"ERROR "*": $4: no such file or directory ($5)" ]] ||
    it_fail "$3: first line is '$first', expected '$4: no such file or directory ($5)'"
  [ "$(wc -l <"$out")" -le 3 ] || it_fail "$3: $(wc -l <"$out") lines for a missing path: $(head -c 400 "$out")"
  echo "  $3: $first"
}
cfg() { # cfg FILE TARGET_MODEL KIND DRAFT_MODEL
  cat >"$1" <<EOF2
target = { model = "$2"; max_ctx = 64; };
draft = { enabled = true; kind = "$3"; model = "$4"; };
link = { endpoint = "ipc://$WORK/link.sock"; };
http = { listen = "127.0.0.1"; port = $(it_port); };
EOF2
}
cfg "$WORK/a.cfg" "$missing" layerskip ""
node "$TARGET_BIN" "$WORK/a.cfg" target "$missing" target.model
node "$DRAFT_BIN" "$WORK/a.cfg" draft-layerskip "$missing" target.model
cfg "$WORK/b.cfg" "$WORK/present" lm "$missing-lm"
node "$DRAFT_BIN" "$WORK/b.cfg" draft-lm "$missing-lm" draft.model
cfg "$WORK/c.cfg" "$missing" eagle "$WORK/present"
node "$DRAFT_BIN" "$WORK/c.cfg" draft-eagle "$missing" target.model
it_finish
