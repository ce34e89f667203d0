#!/usr/bin/env python3
"""http_probe.py — the probe set of issue 35 against a running target (loopback, stdlib only).

  http_probe.py load PORT SECONDS CLIENTS BODY_FILE WANT_TEXT_FILE
      CLIENTS threads send the completion request BODY_FILE over keep-alive connections
      for SECONDS: every answer must be 200 with the text of WANT_TEXT_FILE, or 503 with
      the API's JSON error; a reset, a timeout or any other status fails.
  http_probe.py slow PORT CLIENTS HEADER_TIMEOUT_S BODY_FILE WANT_TEXT_FILE
      CLIENTS connections send a POST's headers (Content-Length: 100) and then drip its
      body a byte a second: each must be closed (or answered 408) within HEADER_TIMEOUT_S
      plus slack, while legitimate requests sent meanwhile are served (200, same text).
  http_probe.py bad PORT BODY_FILE WANT_TEXT_FILE
      100 bad inputs (framing, headers, JSON, fields, endpoints): each must be a 4xx with
      the API's JSON error naming the field where one applies; the server then still
      serves the real request.

Each prints key=value lines (the counts) and exits 1 with FAIL lines when a check fails.
Every socket has a timeout: nothing waits unbounded.
"""
import http.client
import json
import socket
import sys
import threading
import time

FAILS = []


def fail(msg):
    FAILS.append(msg)
    print("FAIL: " + msg, flush=True)


def text_of(body):
    try:
        return json.loads(body)["choices"][0]["text"]
    except (ValueError, KeyError, IndexError, TypeError):
        return None


def is_api_error(body):
    try:
        e = json.loads(body)["error"]
        return isinstance(e["message"], str) and isinstance(e["type"], str) and "param" in e
    except (ValueError, KeyError, TypeError):
        return False


def post(port, body, timeout=60):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


# ---- load ------------------------------------------------------------------------------------

def cmd_load(port, seconds, clients, body, want):
    counts = {"requests": 0, "ok": 0, "busy": 0, "resets": 0, "other": 0, "wrong_text": 0}
    lock = threading.Lock()
    end = time.monotonic() + seconds

    def client():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        while time.monotonic() < end:
            kind = "other"
            try:
                conn.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
                r = conn.getresponse()
                data = r.read()
                if r.status == 200:
                    kind = "ok" if text_of(data) == want else "wrong_text"
                elif r.status == 503 and is_api_error(data):
                    kind = "busy"
                else:
                    with lock:
                        if counts["other"] < 5:
                            fail("load: HTTP %d: %r" % (r.status, data[:200]))
                if r.will_close:
                    conn.close()
            except (ConnectionError, http.client.HTTPException, socket.timeout, OSError) as e:
                kind = "resets"
                with lock:
                    if counts["resets"] < 5:
                        fail("load: %s: %s" % (type(e).__name__, e))
                conn.close()
            with lock:
                counts["requests"] += 1
                counts[kind] += 1
        conn.close()

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + 120)
    for k, v in counts.items():
        print("load_%s=%d" % (k, v))
    if counts["ok"] == 0:
        fail("load: no request served")
    if counts["resets"] or counts["other"] or counts["wrong_text"]:
        fail("load: %d resets, %d other answers, %d wrong texts" % (counts["resets"], counts["other"], counts["wrong_text"]))


# ---- slow bodies -----------------------------------------------------------------------------

def cmd_slow(port, clients, header_s, body, want):
    bound = header_s + 6.0  # the reaper looks every 100 ms; a loaded machine gets slack
    socks = []
    head = b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"
    for _ in range(clients):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(head)
        s.setblocking(False)
        socks.append([s, time.monotonic(), None, b""])
    legit = {"ok": 0, "bad": 0}
    stop = threading.Event()

    def legitimate():
        while not stop.is_set():
            try:
                st, data = post(port, body, timeout=30)
                if st == 200 and text_of(data) == want:
                    legit["ok"] += 1
                else:
                    legit["bad"] += 1
                    fail("slow: a legitimate request got HTTP %d: %r" % (st, data[:200]))
            except (ConnectionError, http.client.HTTPException, socket.timeout, OSError) as e:
                legit["bad"] += 1
                fail("slow: a legitimate request failed: %s" % e)
            stop.wait(0.2)

    lt = threading.Thread(target=legitimate)
    lt.start()
    start = time.monotonic()
    next_drip = start + 1.0
    while time.monotonic() - start < bound and any(x[2] is None for x in socks):
        now = time.monotonic()
        for x in socks:
            if x[2] is not None:
                continue
            try:
                d = x[0].recv(4096)
                if d:
                    x[3] += d
                else:
                    x[2] = now
            except BlockingIOError:
                pass
            except OSError:
                x[2] = now
        if now >= next_drip:
            next_drip += 1.0
            for x in socks:
                if x[2] is None:
                    try:
                        x[0].send(b"a")
                    except OSError:
                        x[2] = now
        time.sleep(0.05)
    stop.set()
    lt.join(60)
    closed = sum(1 for x in socks if x[2] is not None)
    got408 = sum(1 for x in socks if x[3].startswith(b"HTTP/1.1 408"))
    longest = max((x[2] if x[2] is not None else time.monotonic()) - x[1] for x in socks)
    for x in socks:
        x[0].close()
    print("slow_clients=%d\nslow_closed=%d\nslow_408=%d\nslow_longest_s=%.1f\nslow_legit_ok=%d\nslow_legit_bad=%d"
          % (clients, closed, got408, longest, legit["ok"], legit["bad"]))
    if closed != clients:
        fail("slow: %d of %d slow-body connections still open after %.0f s" % (clients - closed, clients, bound))
    if legit["ok"] == 0:
        fail("slow: no legitimate request served meanwhile")


# ---- bad inputs ------------------------------------------------------------------------------

def raw(port, data, timeout=20):
    """Send raw bytes, read until the server closes; (status or 0, headers, body, n status lines)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        try:
            s.sendall(data)
        except OSError:
            pass
        out = b""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                d = s.recv(65536)
            except socket.timeout:
                break
            except OSError:
                break
            if not d:
                break
            out += d
    finally:
        s.close()
    lines = sum(1 for l in out.split(b"\n") if l.startswith(b"HTTP/1.") and l[9:12].isdigit())
    head, _, body = out.partition(b"\r\n\r\n")
    status = int(head[9:12]) if head.startswith(b"HTTP/1.") and head[9:12].isdigit() else 0
    return status, head, body, lines


def req(method, path, body=b"", headers=None, host=b"127.0.0.1"):
    h = b"%s %s HTTP/1.1\r\n" % (method, path)
    if host is not None:
        h += b"Host: " + host + b"\r\n"
    h += b"Connection: close\r\n"
    for k, v in (headers or []):
        h += k + b": " + v + b"\r\n"
    if body is not None and not any(k.lower() in (b"content-length", b"transfer-encoding") for k, _ in (headers or [])):
        h += b"Content-Length: %d\r\n" % len(body)
    return h + b"\r\n" + (body or b"")


def completions(body):
    return req(b"POST", b"/v1/completions", body)


def chat(body):
    return req(b"POST", b"/v1/chat/completions", body)


def bad_cases():
    """(name, raw bytes, status, param or None when no field applies)."""
    C, H = completions, chat
    msgs = b'"messages":[{"role":"user","content":"hi"}]'
    cases = [
        # JSON that does not parse: the param is the field the bad token belongs to
        ("NaN", C(b'{"prompt":"a","max_tokens":NaN}'), 400, "max_tokens"),
        ("Infinity", C(b'{"prompt":"a","temperature":Infinity}'), 400, "temperature"),
        ("-Infinity", C(b'{"prompt":"a","top_p":-Infinity}'), 400, "top_p"),
        ("1e99999", C(b'{"prompt":"a","max_tokens":1e99999}'), 400, "max_tokens"),
        ("2^63", C(b'{"prompt":"a","seed":9223372036854775808}'), 400, "seed"),
        ("\\u0000", C(b'{"prompt":"a\\u0000b"}'), 400, "prompt"),
        ("raw NUL", C(b'{"prompt":"a\x00b"}'), 400, "prompt"),
        ("invalid UTF-8", C(b'{"prompt":"a\xffb"}'), 400, "prompt"),
        ("lone surrogate", C(b'{"prompt":"\\ud800"}'), 400, "prompt"),
        ("chat lone surrogate", H(b'{"messages":[{"role":"user","content":"\\udc00"}]}'), 400, "messages[0].content"),
        ("NaN in stop", C(b'{"prompt":"a","stop":["x",NaN]}'), 400, "stop[1]"),
        ("tru", H(b'{"messages":[{"role":"user","content":tru}]}'), 400, "messages[0].content"),
        ("trailing comma", C(b'{"prompt":"a",}'), 400, None),
        ("not json", C(b"not json"), 400, None),
        ("empty body", C(b""), 400, None),
        ("array body", C(b'["prompt"]'), 400, None),
        ("string body", C(b'"prompt"'), 400, None),
        ("unclosed", C(b'{"prompt":"a"'), 400, None),
        # fields
        ("no prompt", C(b"{}"), 400, "prompt"),
        ("prompt number", C(b'{"prompt":5}'), 400, "prompt"),
        ("prompt object", C(b'{"prompt":{}}'), 400, "prompt"),
        ("prompt two strings", C(b'{"prompt":["a","b"]}'), 400, "prompt"),
        ("empty prompt", C(b'{"prompt":""}'), 400, "prompt"),
        ("empty prompt list", C(b'{"prompt":[""]}'), 400, "prompt"),
        ("max_tokens 0", C(b'{"prompt":"a","max_tokens":0}'), 400, "max_tokens"),
        ("max_tokens -1", C(b'{"prompt":"a","max_tokens":-1}'), 400, "max_tokens"),
        ("max_tokens 1.5", C(b'{"prompt":"a","max_tokens":1.5}'), 400, "max_tokens"),
        ("max_tokens string", C(b'{"prompt":"a","max_tokens":"8"}'), 400, "max_tokens"),
        ("max_tokens above the limit", C(b'{"prompt":"a","max_tokens":100000}'), 400, "max_tokens"),
        ("max_completion_tokens 0", C(b'{"prompt":"a","max_completion_tokens":0}'), 400, "max_completion_tokens"),
        ("temperature -1", C(b'{"prompt":"a","temperature":-1}'), 400, "temperature"),
        ("temperature 3", C(b'{"prompt":"a","temperature":3}'), 400, "temperature"),
        ("temperature string", C(b'{"prompt":"a","temperature":"hot"}'), 400, "temperature"),
        ("top_p 0", C(b'{"prompt":"a","top_p":0}'), 400, "top_p"),
        ("top_p 2", C(b'{"prompt":"a","top_p":2}'), 400, "top_p"),
        ("top_p true", C(b'{"prompt":"a","top_p":true}'), 400, "top_p"),
        ("seed string", C(b'{"prompt":"a","seed":"s"}'), 400, "seed"),
        ("seed float", C(b'{"prompt":"a","seed":1.5}'), 400, "seed"),
        ("stop number", C(b'{"prompt":"a","stop":5}'), 400, "stop"),
        ("stop empty", C(b'{"prompt":"a","stop":""}'), 400, "stop"),
        ("stop five", C(b'{"prompt":"a","stop":["a","b","c","d","e"]}'), 400, "stop"),
        ("stop too long", C(b'{"prompt":"a","stop":"' + b"x" * 300 + b'"}'), 400, "stop"),
        ("stop list of numbers", C(b'{"prompt":"a","stop":[1]}'), 400, "stop"),
        ("stream string", C(b'{"prompt":"a","stream":"yes"}'), 400, "stream"),
        ("stream 1", C(b'{"prompt":"a","stream":1}'), 400, "stream"),
        ("n 2", C(b'{"prompt":"a","n":2}'), 400, "n"),
        ("n 0", C(b'{"prompt":"a","n":0}'), 400, "n"),
        ("model number", C(b'{"prompt":"a","model":5}'), 400, "model"),
        ("model too long", C(b'{"prompt":"a","model":"' + b"m" * 200 + b'"}'), 400, "model"),
        ("no messages", H(b"{}"), 400, "messages"),
        ("messages empty", H(b'{"messages":[]}'), 400, "messages"),
        ("messages object", H(b'{"messages":{}}'), 400, "messages"),
        ("message string", H(b'{"messages":["hi"]}'), 400, "messages[0]"),
        ("role missing", H(b'{"messages":[{"content":"hi"}]}'), 400, "messages[0].role"),
        ("role unknown", H(b'{"messages":[{"role":"robot","content":"hi"}]}'), 400, "messages[0].role"),
        ("role number", H(b'{"messages":[{"role":1,"content":"hi"}]}'), 400, "messages[0].role"),
        ("content missing", H(b'{"messages":[{"role":"user"}]}'), 400, "messages[0].content"),
        ("content number", H(b'{"messages":[{"role":"user","content":5}]}'), 400, "messages[0].content"),
        ("content empty", H(b'{"messages":[{"role":"user","content":""}]}'), 400, "messages[0].content"),
        ("content part not text", H(b'{"messages":[{"role":"user","content":[{"type":"image_url"}]}]}'), 400,
         "messages[0].content"),
        ("second content empty", H(b'{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":""}]}'),
         400, "messages[1].content"),
        ("assistant only", H(b'{"messages":[{"role":"assistant","content":"hi"}]}'), 400, "messages"),
        ("system only", H(b'{"messages":[{"role":"system","content":"be brief"}]}'), 400, "messages"),
        ("chat max_tokens 0", H(b"{" + msgs + b',"max_tokens":0}'), 400, "max_tokens"),
        ("chat temperature 9", H(b"{" + msgs + b',"temperature":9}'), 400, "temperature"),
        ("chat stop five", H(b"{" + msgs + b',"stop":["a","b","c","d","e"]}'), 400, "stop"),
        ("chat n 3", H(b"{" + msgs + b',"n":3}'), 400, "n"),
        ("chat stream string", H(b"{" + msgs + b',"stream":"no"}'), 400, "stream"),
        ("duplicate key", C(b'{"prompt":"a","prompt":"b"}'), 400, None),
        # endpoints and methods: no field applies
        ("unknown endpoint", req(b"GET", b"/v2/nothing", None), 404, None),
        ("unknown model", req(b"GET", b"/v1/models/other", None), 404, "model"),
        ("GET on completions", req(b"GET", b"/v1/completions", None), 405, None),
        ("PUT on chat", req(b"PUT", b"/v1/chat/completions", b"{}"), 405, None),
        ("POST on models", req(b"POST", b"/v1/models", b"{}"), 405, None),
        ("DELETE on health", req(b"DELETE", b"/health", None), 405, None),
        ("bad method token", req(b"G(E)T", b"/health", None), 400, None),
        # framing and headers: the header is the field
        ("conflicting Content-Length", req(b"POST", b"/v1/completions", b'{"prompt":"a"}',
                                           [(b"Content-Length", b"14"), (b"Content-Length", b"4")]), 400, "Content-Length"),
        ("Content-Length abc", req(b"POST", b"/v1/completions", b'{"prompt":"a"}', [(b"Content-Length", b"abc")]), 400,
         "Content-Length"),
        ("Content-Length -1", req(b"POST", b"/v1/completions", b'{"prompt":"a"}', [(b"Content-Length", b"-1")]), 400,
         "Content-Length"),
        ("Content-Length 1x", req(b"POST", b"/v1/completions", b'{"prompt":"a"}', [(b"Content-Length", b"1x")]), 400,
         "Content-Length"),
        ("Content-Length 2^70", req(b"POST", b"/v1/completions", b"{}", [(b"Content-Length", b"1180591620717411303424")]),
         413, "Content-Length"),
        ("body over 1 MiB", req(b"POST", b"/v1/completions", b"{}", [(b"Content-Length", b"2000000")]), 413, None),
        ("TE with CL", req(b"POST", b"/v1/completions", b'{"prompt":"a"}',
                           [(b"Transfer-Encoding", b"chunked"), (b"Content-Length", b"14")]), 400, "Transfer-Encoding"),
        ("TE gzip", req(b"POST", b"/v1/completions", b"", [(b"Transfer-Encoding", b"gzip")]), 400, "Transfer-Encoding"),
        ("TE twice", req(b"POST", b"/v1/completions", b"", [(b"Transfer-Encoding", b"chunked"),
                                                           (b"Transfer-Encoding", b"chunked")]), 400, "Transfer-Encoding"),
        ("bad chunk size", req(b"POST", b"/v1/completions", b"zz\r\n", [(b"Transfer-Encoding", b"chunked")]), 400, None),
        ("bare CR in a value", req(b"GET", b"/health", None, [(b"X-A", b"a\rb: c")]), 400, "headers"),
        ("bare CR in a name", req(b"GET", b"/health", None, [(b"X\rA", b"b")]), 400, "headers"),
        ("space before colon", req(b"GET", b"/health", None, [(b"X-A ", b"b")]), 400, "headers"),
        ("control char in a value", req(b"GET", b"/health", None, [(b"X-A", b"a\x01b")]), 400, "headers"),
        ("no colon", req(b"GET", b"/health", None, [(b"no colon here", b"")]).replace(b"no colon here: ", b"no colon here"),
         400, None),
        ("no Host", req(b"GET", b"/health", None, host=None), 400, "Host"),
        ("two Hosts", req(b"GET", b"/health", None, [(b"Host", b"localhost")]), 400, "Host"),
        ("Host of a rebinding name", req(b"GET", b"/v1/models", None, host=b"evil.example:8080"), 403, "Host"),
        ("Host with a bad port", req(b"GET", b"/v1/models", None, host=b"localhost:99999"), 403, "Host"),
        ("Origin of another site", req(b"POST", b"/v1/completions", b'{"prompt":"a"}', [(b"Origin", b"http://evil.example")]),
         403, "Origin"),
        ("Origin null", req(b"GET", b"/v1/models", None, [(b"Origin", b"null")]), 403, "Origin"),
        ("preflight of another site", req(b"OPTIONS", b"/v1/chat/completions", None,
                                          [(b"Origin", b"https://evil.example"), (b"Access-Control-Request-Method", b"POST")]),
         403, "Origin"),
        ("request line too long", b"GET /" + b"a" * 100000 + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 414, None),
        ("header too large", req(b"GET", b"/health", None, [(b"X-Big", b"b" * 100000)]), 431, None),
    ]
    return cases


def cmd_bad(port, body, want):
    cases = bad_cases()
    named = need_name = ok = 0
    for name, data, status, param in cases:
        st, head, resp, lines = raw(port, data)
        err = None
        if st != status:
            err = "status %d, expected %d" % (st, status)
        elif lines != 1:
            err = "%d status lines" % lines
        elif b"application/json" not in head.lower():
            err = "not application/json"
        elif not is_api_error(resp):
            err = "not the API's JSON error"
        else:
            got = json.loads(resp)["error"]["param"]
            if param is not None:
                need_name += 1
                if got == param:
                    named += 1
                else:
                    err = "param %r, expected %r" % (got, param)
        if err:
            fail("bad input '%s': %s: %r" % (name, err, (head + b" | " + resp)[:300]))
        else:
            ok += 1
    st, data = post(port, body)
    alive = st == 200 and text_of(data) == want
    print("bad_cases=%d\nbad_answered=%d\nbad_need_field=%d\nbad_named_field=%d\nbad_then_served=%d"
          % (len(cases), ok, need_name, named, 1 if alive else 0))
    if len(cases) != 100:
        fail("bad: %d cases, the probe set has 100" % len(cases))
    if not alive:
        fail("bad: the server did not serve a real request after the bad inputs (HTTP %d)" % st)


def main(argv):
    if len(argv) < 3:
        print(__doc__)
        return 2
    cmd, port = argv[1], int(argv[2])
    if cmd == "load" and len(argv) == 7:
        cmd_load(port, float(argv[3]), int(argv[4]), open(argv[5], "rb").read(), open(argv[6], encoding="utf-8").read())
    elif cmd == "slow" and len(argv) == 7:
        cmd_slow(port, int(argv[3]), float(argv[4]), open(argv[5], "rb").read(), open(argv[6], encoding="utf-8").read())
    elif cmd == "bad" and len(argv) == 5:
        cmd_bad(port, open(argv[3], "rb").read(), open(argv[4], encoding="utf-8").read())
    else:
        print(__doc__)
        return 2
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
