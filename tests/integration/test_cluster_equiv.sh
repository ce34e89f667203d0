#!/usr/bin/env bash
# Acceptance 1: the cluster's greedy output through HTTP equals the target
# model's own autoregressive output (microspec-generate, single process, no
# draft) for 20 Spec-Bench prompts, with speculation really happening
# (microspec.spec_rounds > 0, draft_failed false), in pipeline "sync" and
# "overlap" (and for layerskip an "overlap-self" run whose draft is the whole
# target over the full vocabulary: its pre-drafts must be confirmed), and a
# "cost" pass: the shipped default policy (draft.policy = "cost": trees
# pruned by measured costs, the model skipped while it does not pay, so
# speculation may not happen) with the n-gram source merged (KIND+ngram).
#   test_cluster_equiv.sh layerskip   stories260K, its first layer drafting
#   test_cluster_equiv.sh lm          a random tiny Qwen3 target + a smaller Qwen3 LM
#   test_cluster_equiv.sh eagle       the same target + a random EAGLE head
# ITEST_PROMPTS (default 20; 5 with ITEST_SMALL) and ITEST_TOKENS (default 48) shrink it.
source "$(dirname "$0")/lib.sh"
kind=${1:?usage: test_cluster_equiv.sh layerskip|lm|eagle}
it_init "equiv-$kind"
n_prompts=${ITEST_PROMPTS:-20}
[ -z "${ITEST_SMALL:-}" ] || n_prompts=${ITEST_PROMPTS:-5}
n_tok=${ITEST_TOKENS:-48}
it_need_shared data/spec_bench/question.jsonl
case "$kind" in
  layerskip)
    it_need_shared models/stories260k/stories260K.bin models/stories260k/tok512.bin
    it_stories
    C_MODEL=$STORIES C_KIND=layerskip C_LAYERS=1 C_CTX=512 C_WMAX=256 ;;
  lm|eagle)
    it_need_shared tokenizers/qwen3/tokenizer.json
    it_qwen3_pair
    C_MODEL=$Q3 C_KIND=$kind C_DRAFT=$WORK/q3-$kind C_CTX=1024 C_WMAX=512
    C_TREE="top_k = 6; depth = 3; total = 16;" ;;
  *) it_die "unknown draft kind $kind" ;;
esac
mkdir -p "$WORK/prompts" "$WORK/ar"
"$TOOL" prompts "$MS_SHARED_DIR/data/spec_bench/question.jsonl" "$n_prompts" "$WORK/prompts" || it_die "reading prompts"

it_log "autoregressive references: $n_prompts prompts x $n_tok tokens"
it_ar_all "$C_MODEL" "$n_tok" "$WORK/ar" "$WORK"/prompts/p*.txt

runs="sync overlap cost"
# layerskip also runs "overlap-self": all 5 layers over the full vocabulary, a
# draft identical to the target, so the overlap pre-drafts must be confirmed;
# and "overlap-ngram", the same with the n-gram source merged (grafted into the
# confirmed pre-drafts' trees too).
[ "$kind" != layerskip ] || runs="$runs overlap-self overlap-ngram"
layers0=${C_LAYERS:-1}
for pipeline in $runs; do
  C_PIPELINE=${pipeline%%-*} C_PORT=$(it_port) C_ENDPOINT=ipc://$WORK/link-$pipeline.sock C_VOCAB=dynamic C_LAYERS=$layers0
  C_POLICY=all C_KIND=$kind
  [ "$pipeline" != overlap-self ] || { C_VOCAB=full C_LAYERS=5; }
  [ "$pipeline" != overlap-ngram ] || { C_VOCAB=full C_LAYERS=5 C_KIND=$kind+ngram; }
  [ "$pipeline" != cost ] || { C_PIPELINE=sync C_POLICY=cost C_KIND=$kind+ngram; }
  it_config "$WORK/$pipeline.cfg"
  it_up "$WORK/$pipeline.cfg" "$pipeline"
  it_log "$kind/$pipeline: cluster up at $URL"
  # A node that cannot honour the pipeline says so (e.g. eagle drafts run overlap as sync).
  grep -h "WARN.*pipeline" "$WORK/$pipeline-target.log" "$WORK/$pipeline-draft.log" | sed "s/^/NOTE: /"
  same=0 spec_total=0
  for p in "$WORK"/prompts/p*.txt; do
    b=$(basename "$p" .txt)
    "$TOOL" body completions "$p" "$n_tok" 0 >"$WORK/$b.body"
    code=$(it_post "$URL" /v1/completions "$WORK/$b.body" "$WORK/$b.$pipeline.json")
    if [ "$code" != 200 ]; then
      it_fail "$kind/$pipeline $b: HTTP $code: $(head -c 300 "$WORK/$b.$pipeline.json")"
      continue
    fi
    "$TOOL" text "$WORK/$b.$pipeline.json" "$WORK/$b.$pipeline.txt" || { it_fail "$kind/$pipeline $b: no text"; continue; }
    it_same "$kind/$pipeline $b" "$WORK/ar/$b.txt" "$WORK/$b.$pipeline.txt" && same=$((same + 1))
    mapfile -t st < <("$TOOL" get "$WORK/$b.$pipeline.json" microspec.spec_rounds microspec.draft_failed \
                      microspec.mean_accepted_length)
    [ "${st[0]:-0}" -gt 0 ] || [ "$pipeline" = cost ] || it_fail "$kind/$pipeline $b: spec_rounds ${st[0]:-?} (no speculation)"
    [ "${st[1]:-}" = false ] || it_fail "$kind/$pipeline $b: draft_failed ${st[1]:-?}"
    spec_total=$((spec_total + ${st[0]:-0}))
  done
  it_log "$kind/$pipeline: $same/$n_prompts identical to AR, $spec_total speculative rounds"
  if [[ "$pipeline" = overlap-* ]]; then # the draft logs its counts when request n ends
    deadline=$((SECONDS + 10))
    until grep -q "request $n_prompts over" "$WORK/$pipeline-draft.log" || [ $SECONDS -ge $deadline ]; do sleep 0.05; done
  fi
  pre=$(grep -o "pre-drafts so far: .*" "$WORK/$pipeline-draft.log" | tail -n 1)
  [ -z "$pre" ] || it_log "$kind/$pipeline: draft node: $pre"
  if [[ "$pipeline" = overlap-* ]]; then
    confirmed=$(grep -o "[0-9]* confirmed" <<<"$pre" | cut -d" " -f1)
    [ "${confirmed:-0}" -gt 0 ] || it_fail "overlap with a perfect draft: no pre-draft confirmed (${pre:-no count logged})"
  fi
  kill -0 "$DRAFT_PID" 2>/dev/null || it_fail "$kind/$pipeline: the draft node died"
  grep -q '"draft":"up"' <<<"$(curl -s -m 2 "$URL/health")" || it_fail "$kind/$pipeline: draft not up at the end"
  it_stop "$DRAFT_PID"
  it_stop "$TARGET_PID"
done
it_finish
