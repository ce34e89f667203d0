#!/usr/bin/env python3
"""The official OpenAI Python client (PyPI `openai`) against a MicroSpec target.

    openai_client_check.py BASE_URL API_KEY PROMPT_FILE EXPECTED_FILE MAX_TOKENS

BASE_URL is the server root (http://127.0.0.1:PORT); API_KEY the bearer
token. EXPECTED_FILE holds the greedy continuation of PROMPT_FILE from an
independent run (microspec-generate). Checks, each through the client's own
types: models.list names "microspec"; models.retrieve("microspec") returns it
and an unknown id raises NotFoundError; a wrong key raises
AuthenticationError; completions.create, chat.completions.create and a
streamed chat (deltas concatenated) all return the expected text with a
finish_reason and usage the client parses. Exit 0 when all hold, 1 otherwise,
77 when the openai package cannot be imported.
"""
import sys

try:
    import openai
except ImportError as e:  # skipped, not passed
    print(f"SKIP: the openai package cannot be imported ({e}); tools/install-deps.sh installs it")
    sys.exit(77)

fails = 0


def check(cond, what):
    global fails
    if cond:
        print(f"  ok: {what}")
    else:
        fails += 1
        print(f"FAIL: {what}")


def main():
    base, key, prompt_file, expected_file, max_tokens = sys.argv[1:6]
    max_tokens = int(max_tokens)
    prompt = open(prompt_file, encoding="utf-8").read()
    expected = open(expected_file, encoding="utf-8").read()
    print(f"openai {openai.__version__} against {base}")
    client = openai.OpenAI(base_url=base + "/v1", api_key=key, max_retries=0, timeout=120)

    ids = [m.id for m in client.models.list()]
    check("microspec" in ids, f"models.list names microspec ({ids})")
    m = client.models.retrieve("microspec")
    check(m.id == "microspec" and m.object == "model", f"models.retrieve: {m.id} / {m.object}")
    try:
        client.models.retrieve("no-such-model")
        check(False, "models.retrieve of an unknown id raises NotFoundError")
    except openai.NotFoundError:
        check(True, "models.retrieve of an unknown id raises NotFoundError")
    try:
        openai.OpenAI(base_url=base + "/v1", api_key=key + "x", max_retries=0, timeout=30).models.list()
        check(False, "a wrong key raises AuthenticationError")
    except openai.AuthenticationError:
        check(True, "a wrong key raises AuthenticationError")

    c = client.completions.create(model="microspec", prompt=prompt, max_tokens=max_tokens, temperature=0)
    text = c.choices[0].text
    check(text == expected, f"completions.create text equals the reference ({text[:60]!r}...)")
    check(c.choices[0].finish_reason in ("length", "stop"), f"completion finish_reason {c.choices[0].finish_reason}")
    check(c.usage is not None and 0 < c.usage.completion_tokens <= max_tokens and c.usage.prompt_tokens > 0,
          f"completion usage {c.usage}")

    # stories260K has no chat template: a single user turn is the completion prompt
    msgs = [{"role": "user", "content": prompt}]
    r = client.chat.completions.create(model="microspec", messages=msgs, max_tokens=max_tokens, temperature=0)
    msg = r.choices[0].message
    check(msg.role == "assistant" and msg.content == expected,
          f"chat.completions.create content equals the reference ({(msg.content or '')[:60]!r}...)")
    check(r.choices[0].finish_reason in ("length", "stop"), f"chat finish_reason {r.choices[0].finish_reason}")

    parts, finish, chunks = [], None, 0
    stream = client.chat.completions.create(model="microspec", messages=msgs, max_tokens=max_tokens, temperature=0,
                                            stream=True)
    for ch in stream:
        chunks += 1
        if ch.choices:
            if ch.choices[0].delta.content:
                parts.append(ch.choices[0].delta.content)
            finish = ch.choices[0].finish_reason or finish
    streamed = "".join(parts)
    check(chunks > 1 and streamed == expected, f"streamed chat: {chunks} chunks, deltas equal the reference")
    check(finish in ("length", "stop"), f"streamed chat finish_reason {finish}")

    parts = [ch.choices[0].text for ch in client.completions.create(
        model="microspec", prompt=prompt, max_tokens=max_tokens, temperature=0, stream=True) if ch.choices]
    check("".join(parts) == expected, "streamed completion: texts equal the reference")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
