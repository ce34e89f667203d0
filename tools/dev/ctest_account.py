#!/usr/bin/env python3
"""The account of one ctest run, for tools/test.sh: counts, every skip with its
reason, the one named retry, and whether the run may count as green.

  ctest_account.py --build DIR --junit FILE --stage NAME [--retry TEST]... [--summary FILE]

FILE is ctest's --output-junit of the run. Rules (issue 36):
  * a failed test fails the run; only a test named by --retry gets one more
    run (ctest -R '^TEST$'), and if that passes it is reported as FLAKY, never
    silently green;
  * a skipped test (its SKIP_RETURN_CODE) is listed with its reason: the last
    line of its output that says "skip", else its last line;
  * a skip is allowed only for a test labelled `cuda` on a machine where
    `nvidia-smi -L` lists no GPU, or for a test whose name matches the regular
    expression in $MS_ALLOW_SKIP (a developer's machine without the models or
    ../shared; printed as such). Any other skip fails the run.
Prints the account to stdout, appends its summary lines to --summary (test.sh
prints them all at the end) and exits 0 green, 1 not green, 2 no usable
JUnit file.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET


def has_gpu():
    try:
        r = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0 and any(l.startswith("GPU ") for l in r.stdout.splitlines())


def labels_of(build):
    r = subprocess.run(["ctest", "--test-dir", build, "--show-only=json-v1"], capture_output=True, text=True)
    out = {}
    if r.returncode != 0:
        return out
    for t in json.loads(r.stdout).get("tests", []):
        for p in t.get("properties", []):
            if p.get("name") == "LABELS":
                out[t["name"]] = list(p.get("value", []))
    return out


def reason_of(text):
    lines = [l.strip() for l in (text or "").splitlines() if l.strip()]
    said = [l for l in lines if "skip" in l.lower()]
    return (said or lines or ["(no output)"])[-1][:200]


# A fuzz run's progress lines (libFuzzer's NEW, REDUCE, pulse, the dictionary).
PROGRESS = re.compile(r"^#\d+\s+(NEW|REDUCE|pulse|INITED|DONE)\b|# Uses: \d+$|^\s*\"")


REASON = re.compile(r"ERROR|SUMMARY|Assert|assert|FAIL|fail|^fuzz_\w+:|^test_\w+:|ALARM|timeout")


def why_failed(out, first=8, last=12):
    """What a failed test said: its error lines (sanitizer reports, a harness's
    own message) and the end of its output, progress lines left out. The
    summary is the tail of a CI log, so a failure's reason must be in it."""
    keep = [l.rstrip() for l in out.splitlines() if l.strip() and not PROGRESS.search(l)]
    errors = [i for i, l in enumerate(keep) if REASON.search(l)][:first]
    picked = sorted(set(errors) | set(range(max(0, len(keep) - last), len(keep))))
    return [keep[i][:200] for i in picked]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--junit", required=True)
    ap.add_argument("--stage", required=True)
    ap.add_argument("--retry", action="append", default=[])
    ap.add_argument("--summary")
    a = ap.parse_args()
    try:
        cases = ET.parse(a.junit).getroot().iter("testcase")
    except (OSError, ET.ParseError) as e:
        print("ctest_account: %s: %s" % (a.junit, e))
        return 2
    passed, failed, skipped, flaky = [], [], [], []
    outputs = {}
    for c in cases:
        name, status = c.get("name"), c.get("status")
        out = (c.findtext("system-out") or "")
        outputs[c.get("name")] = out
        if status == "run":
            passed.append(name)
        elif c.find("skipped") is not None or status in ("notrun", "disabled"):
            skipped.append((name, reason_of(out)))
        else:
            failed.append(name)
    if not passed and not failed and not skipped:
        print("ctest_account: %s: no test ran" % a.junit)
        return 2
    for name in [f for f in failed if f in a.retry]:
        r = subprocess.run(["ctest", "--test-dir", a.build, "--output-on-failure", "-R", "^%s$" % re.escape(name)])
        if r.returncode == 0:
            failed.remove(name)
            flaky.append(name)
    gpu, labels = has_gpu(), labels_of(a.build)
    allow = os.environ.get("MS_ALLOW_SKIP", "")
    bad_skips, lines = [], []
    for name, why in skipped:
        if "cuda" in labels.get(name, []) and not gpu:
            verdict = "allowed: a GPU test, and this machine has no GPU"
        elif allow and re.search(allow, name):
            verdict = "allowed by MS_ALLOW_SKIP=%s" % allow
        else:
            verdict = "NOT ALLOWED: the machine should have what it needs"
            bad_skips.append(name)
        lines.append("  skipped %-40s %s [%s]" % (name, why, verdict))
    for name in flaky:
        lines.append("  FLAKY   %-40s failed, then passed its one rerun (--retry)" % name)
    for name in failed:
        lines.append("  FAILED  %s" % name)
        lines += ["    | " + l for l in why_failed(outputs.get(name, ""))]
    green = not failed and not bad_skips
    head = "%s: %d passed, %d failed, %d skipped (%d not allowed), %d flaky%s: %s" % (
        a.stage, len(passed) + len(flaky), len(failed), len(skipped), len(bad_skips), len(flaky),
        "" if gpu else " (no GPU)", "ok" if green else "NOT GREEN")
    text = "\n".join([head] + lines) + "\n"
    sys.stdout.write("== " + text)
    if a.summary:
        with open(a.summary, "a") as f:
            f.write(text)
    return 0 if green else 1


if __name__ == "__main__":
    sys.exit(main())
