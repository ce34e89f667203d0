#!/usr/bin/env python3
"""Clients for test_cluster_front.sh: many /v1/completions requests at once
through the nginx front, some streamed, optionally killing a process mid-run.

    front_load.py URL REFS_JSON N CONCURRENT OUT_JSON [--kill-pid PID --kill-after K]
    front_load.py check OUT_JSON PAIR_A PAIR_B [KILLED_PAIR]

REFS_JSON maps each prompt to its greedy continuation from an independent run
(microspec-generate, the same max_tokens). Request i asks prompt i mod P,
streamed when i % 4 == 3. --kill-pid: SIGKILL of PID once K requests have
finished. For each request OUT_JSON records: status, the pair that answered
(X-MicroSpec-Pair), whether the text equals the reference, whether it was
streamed, and its first-byte and end times on the same monotonic clock as the
kill (order only, never a duration limit). $FRONT_TOKEN, when set, is sent as
the bearer token. Plain http.client: no third-party
package, a dropped connection is an error the caller sees.

check: prints the counts (answered, per pair, failed) and exits 1 unless every
request was answered with its reference text by PAIR_A or PAIR_B (host:port)
and both answered some. With KILLED_PAIR (whose target the run killed), a
request may fail only if its first byte came before the kill; every other
request is answered, and none by KILLED_PAIR after the kill.
"""
import http.client
import json
import os
import signal
import sys
import threading
import time
import urllib.parse


def one(host, port, prompt, max_tokens, stream):
    rec = {"status": 0, "pair": "", "ok": False, "stream": stream, "first_byte": None, "end": None, "error": ""}
    body = json.dumps({"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": stream})
    conn = http.client.HTTPConnection(host, port, timeout=120)
    try:
        headers = {"Content-Type": "application/json"}
        if os.environ.get("FRONT_TOKEN"):
            headers["Authorization"] = "Bearer " + os.environ["FRONT_TOKEN"]
        conn.request("POST", "/v1/completions", body=body, headers=headers)
        resp = conn.getresponse()  # returns once the status line and headers arrived: the first bytes
        rec["first_byte"] = time.monotonic()
        rec["status"] = resp.status
        rec["pair"] = resp.getheader("X-MicroSpec-Pair", "")
        data = resp.read().decode("utf-8")
        rec["end"] = time.monotonic()
        if resp.status != 200:
            rec["error"] = data[:200]
            return rec
        if stream:
            text, done = "", False
            for line in data.split("\n"):
                line = line.strip()
                if not line.startswith("data: "):
                    continue
                if line == "data: [DONE]":
                    done = True
                    continue
                chunk = json.loads(line[6:])
                for c in chunk.get("choices", []):
                    text += c.get("text") or ""
            rec["text"] = text
            rec["complete"] = done
        else:
            doc = json.loads(data)
            rec["text"] = doc["choices"][0]["text"]
            rec["complete"] = doc["choices"][0].get("finish_reason") in ("length", "stop")
    except (OSError, http.client.HTTPException, ValueError, KeyError, IndexError) as e:
        rec["error"] = f"{type(e).__name__}: {e}"
        rec["end"] = time.monotonic()
    finally:
        conn.close()
    return rec


def check(out, pair_a, pair_b, killed):
    doc = json.load(open(out, encoding="utf-8"))
    kill_at, recs = doc["kill_at"], doc["requests"]
    fails = []
    per = {pair_a: 0, pair_b: 0}
    lost_started, retried = 0, 0
    for r in recs:
        # the last upstream nginx tried answered ("a:1, b:2" after a retry)
        tried = [p.strip() for p in r["pair"].split(",") if p.strip()]
        last = tried[-1] if tried else ""
        if len(tried) > 1:
            retried += 1
        if r["ok"] and last in per:
            per[last] += 1
            if killed and kill_at is not None and last == killed and r["first_byte"] > kill_at:
                fails.append(f"request {r['index']}: answered by the killed pair {killed} after the kill")
            continue
        # Started before the kill: its first byte reached this client before kill_at, or the killed pair itself
        # sent the status line (a SIGKILLed process sends nothing after; the client's timestamp, taken in one of
        # 20 threads, can lag the bytes' arrival past kill_at).
        started = r["first_byte"] is not None and kill_at is not None and (
            r["first_byte"] < kill_at or (r["status"] == 200 and last == killed))
        if killed and started and last == killed:
            lost_started += 1
            continue
        fails.append(f"request {r['index']} (stream={r['stream']}): status {r['status']}, pair '{r['pair']}', "
                     f"text {'equal' if r['ok'] else 'wrong/missing'}, error {r['error']!r}")
    print(f"requests: {len(recs)}, answered with the reference text: {per[pair_a] + per[pair_b]} "
          f"({pair_a}: {per[pair_a]}, {pair_b}: {per[pair_b]}), streamed: {sum(r['stream'] for r in recs)}, "
          f"retried on another pair: {retried}, lost after their first byte: {lost_started}, failed otherwise: {len(fails)}")
    if killed:
        if kill_at is None:
            fails.append("the kill never happened")
        else:
            nofb = sum(1 for r in recs if r["first_byte"] is None or r["first_byte"] > kill_at)
            print(f"requests without a first byte at the kill: {nofb}")
    elif min(per.values()) == 0:
        fails.append(f"the requests were not split over both pairs: {per}")
    for f in fails[:20]:
        print("FAIL:", f)
    return 1 if fails else 0


def main():
    args = sys.argv[1:]
    if args and args[0] == "check":
        sys.exit(check(args[1], args[2], args[3], args[4] if len(args) > 4 else None))
    kill_pid, kill_after = None, None
    if "--kill-pid" in args:
        i = args.index("--kill-pid")
        kill_pid = int(args[i + 1])
        del args[i:i + 2]
    if "--kill-after" in args:
        i = args.index("--kill-after")
        kill_after = int(args[i + 1])
        del args[i:i + 2]
    url, refs_file, n, conc, out = args[0], args[1], int(args[2]), int(args[3]), args[4]
    refs = json.load(open(refs_file, encoding="utf-8"))
    prompts = sorted(refs["texts"])
    max_tokens = refs["max_tokens"]
    u = urllib.parse.urlparse(url)
    recs = [None] * n
    lock = threading.Lock()
    state = {"next": 0, "done": 0, "kill_at": None}

    def worker():
        while True:
            with lock:
                i = state["next"]
                if i >= n:
                    return
                state["next"] += 1
            p = prompts[i % len(prompts)]
            r = one(u.hostname, u.port, p, max_tokens, i % 4 == 3)
            r["ok"] = r["status"] == 200 and r.get("complete", False) and r.get("text") == refs["texts"][p]
            r["index"] = i
            recs[i] = r
            with lock:
                state["done"] += 1
                if kill_pid and state["kill_at"] is None and state["done"] >= kill_after:
                    state["kill_at"] = time.monotonic()
                    os.kill(kill_pid, signal.SIGKILL)

    threads = [threading.Thread(target=worker) for _ in range(conc)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    json.dump({"kill_at": state["kill_at"], "requests": recs}, open(out, "w", encoding="utf-8"), indent=1)


if __name__ == "__main__":
    main()
