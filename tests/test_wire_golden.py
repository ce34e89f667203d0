#!/usr/bin/env python3
"""The wire goldens read by another MessagePack implementation.

  test_wire_golden.py [GOLDEN_DIR]               check (default tests/golden/wire)
  test_wire_golden.py --write-json [GOLDEN_DIR]  rewrite NAME.json from NAME.bin

tests/golden/wire/NAME.bin are written by this engine's encoder (test_wire
--write-golden) and test_wire checks the encoder against them, so on their own
they only test the encoder against itself. Here PyPI's `msgpack` (an
implementation independent of msgpack-c and of protocol/ms_wire.c) decodes
each .bin: it must hold exactly one object, with no trailing bytes, equal to
NAME.json (the message as msgpack reads it, committed and reviewed by hand
against the examples in tests/test_wire.c); and msgpack's own encoding of
that object (smallest forms, floats as float32) must give the .bin bytes
back, so the frames are canonical MessagePack. Every wire type has both
files; none, or one without the other, fails. Exit 77 only when `msgpack`
cannot be imported.
"""
import json
import os
import sys

TYPES = ["hello", "hello_ack", "begin", "tree", "verify", "end", "cancel", "heartbeat", "error", "ping"]


def decode(msgpack, data):
    u = msgpack.Unpacker(raw=False, strict_map_key=True)
    u.feed(data)
    objs = list(u)
    if len(objs) != 1:
        raise ValueError("%d objects, want 1" % len(objs))
    return objs[0]


def main(argv):
    write = "--write-json" in argv
    args = [a for a in argv if a != "--write-json"]
    here = os.path.dirname(os.path.abspath(__file__))
    golden = args[0] if args else os.path.join(here, "golden", "wire")
    try:
        import msgpack
    except ImportError:
        print("SKIP: the Python package `msgpack` is not importable (tools/install-deps.sh installs it)")
        return 77
    bins = sorted(f[:-4] for f in os.listdir(golden) if f.endswith(".bin"))
    fails = []
    if sorted(bins) != sorted(TYPES):
        fails.append("golden .bin files %s, want one per wire type %s" % (bins, sorted(TYPES)))
    for name in TYPES:
        bpath, jpath = os.path.join(golden, name + ".bin"), os.path.join(golden, name + ".json")
        if not os.path.exists(bpath):
            continue
        data = open(bpath, "rb").read()
        try:
            obj = decode(msgpack, data)
        except Exception as e:  # any refusal of the independent decoder is the finding
            fails.append("%s.bin: msgpack cannot decode it: %s" % (name, e))
            continue
        if write:
            with open(jpath, "w") as f:  # one key a line, values inline: easy to read against test_wire.c
                f.write("{\n" + ",\n".join(" %s: %s" % (json.dumps(k), json.dumps(v)) for k, v in obj.items()) + "\n}\n")
            print("wrote %s" % jpath)
            continue
        if not os.path.exists(jpath):
            fails.append("%s.json missing (--write-json, then review it)" % name)
            continue
        want = json.load(open(jpath))
        if obj != want:
            fails.append("%s.bin decodes to %s, %s.json has %s" % (name, json.dumps(obj)[:300], name,
                                                                   json.dumps(want)[:300]))
        again = msgpack.packb(obj, use_bin_type=True, use_single_float=True)
        if again != data:
            fails.append("%s.bin is not msgpack's own encoding of its object (%d vs %d bytes)" %
                         (name, len(data), len(again)))
        if obj.get("t") != name:
            fails.append("%s.bin has type %r" % (name, obj.get("t")))
        if not fails:
            print("%-10s %4d bytes: msgpack decodes it to %s.json and encodes it back byte for byte" %
                  (name, len(data), name))
    if fails:
        for f in fails:
            print("FAIL: " + f)
        return 1
    print("test_wire_golden: %d golden frames ok" % len(TYPES))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
