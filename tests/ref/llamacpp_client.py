"""Minimal client for llama.cpp's llama-server (reference data generation only).

Server(...) starts `llama-server -m FILE -t 2 --port P --host 127.0.0.1` on a
free loopback port, waits for /health with a deadline, and always stops the
process it started. Response shapes are those of llama.cpp 0c1e57098
(tools/server): /tokenize -> {"tokens": [...]}; /completion with n_probs > 0
and post_sampling_probs false (the default) -> "completion_probabilities":
[{id, token, logprob, top_logprobs: [{id, token, logprob}]}], where logprob is
log of the softmax over the full raw logits (server-common.cpp
get_token_probabilities; server-task.cpp completion_token_output::to_json).
"""
import json
import os
import socket
import subprocess
import time
import urllib.request


def default_bin_dir():
    here = os.path.dirname(os.path.abspath(__file__))
    tool = os.path.join(here, "..", "..", "tools", "build-llamacpp.sh")
    try:
        return subprocess.run([tool, "--bin"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def post(url, body, timeout=600):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


class Server:
    def __init__(self, model, bin_dir=None, extra=(), threads=2, log_path=None):
        self.bin = os.path.join(bin_dir or default_bin_dir(), "llama-server")
        self.model = model
        self.port = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.args = [self.bin, "-m", model, "-t", str(threads), "--port", str(self.port),
                     "--host", "127.0.0.1"] + list(extra)
        self.log_path = log_path or os.devnull
        self.proc = None

    def __enter__(self):
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(["nice", "-n", "10"] + self.args, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 300
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("llama-server exited with %d (log: %s)" % (self.proc.returncode, self.log_path))
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=5) as r:
                    if r.status == 200:
                        return self
            except OSError:
                pass
            time.sleep(0.5)
        self.__exit__(None, None, None)
        raise RuntimeError("llama-server did not become healthy in 300 s")

    def __exit__(self, *exc):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return False

    def tokenize(self, text, add_special=True):
        # add_special=True adds BOS exactly where the file's add_bos_token says so.
        return post(self.url + "/tokenize", {"content": text, "add_special": add_special,
                                            "parse_special": True})["tokens"]

    def completion(self, **body):
        return post(self.url + "/completion", body)
