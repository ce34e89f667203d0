#!/usr/bin/env bash
# Issue 15: the official OpenAI Python client (PyPI openai; tools/install-deps.sh
# installs it) against a real cluster (stories260K, target + layerskip draft,
# bearer token): models.list, models.retrieve (and NotFoundError for an unknown
# id), AuthenticationError for a wrong key, completions, chat, streamed chat and
# streamed completions, each answer equal to microspec-generate's greedy text
# (tests/integration/openai_client_check.py). Skipped (77) when python3 or the
# openai package is missing.
source "$(dirname "$0")/lib.sh"
command -v python3 >/dev/null || { echo "SKIP: python3 absent"; exit 77; }
python3 -c 'import openai' 2>/dev/null ||
  { echo "SKIP: the openai Python package is not importable (pip install openai; tools/install-deps.sh)"; exit 77; }
it_init openai
it_need_shared models/stories260k/stories260K.bin models/stories260k/tok512.bin
it_stories
printf 'Once upon a time, there was a' >"$WORK/prompt.txt"
it_ar "$STORIES" "$WORK/prompt.txt" 40 "$WORK/ar.txt"
token=key-$RANDOM-$RANDOM
C_MODEL=$STORIES C_PORT=$(it_port) C_HTTP_EXTRA="bearer_token = \"$token\";"
it_config "$WORK/openai.cfg"
it_up "$WORK/openai.cfg" openai
timeout 180 python3 "$(dirname "$0")/openai_client_check.py" "$URL" "$token" "$WORK/prompt.txt" "$WORK/ar.txt" 40
rc=$?
[ "$rc" = 0 ] || it_fail "the OpenAI client's checks failed (exit $rc)"
kill -0 "$DRAFT_PID" 2>/dev/null || it_fail "the draft node died"
it_finish
