#!/usr/bin/env bash
# microspec-generate refuses bad usage with a message naming the problem and
# a non-zero status; --help works.
set -u
build=$1
gen=$build/tools/microspec-generate
fail=0
expect() { # expect STATUS PATTERN -- args...
  local want=$1 pat=$2; shift 3
  out=$("$gen" "$@" 2>&1); got=$?
  if [ "$got" != "$want" ] || ! grep -q -- "$pat" <<<"$out"; then
    echo "FAIL: $* → status $got (want $want), output: $out"; fail=1
  else
    echo "ok: $* → $got"
  fi
}
expect 0 "usage: microspec-generate" -- --help
expect 2 "model DIR is required" -- --prompt hi
expect 2 "max-tokens expects an integer" -- --model /nonexistent --max-tokens abc
expect 2 "temperature expects a number" -- --model /nonexistent -t -1
expect 2 "unexpected argument" -- --model /nonexistent stray
expect 1 "/nonexistent" -- --model /nonexistent
exit $fail
