# Wire format of the target↔draft link (protocol/ms_wire.c): round trips of every
# message type, golden frame-0 bytes (tests/golden/wire/*.bin, written once with
# `test_wire --write-golden DIR`), msgpack-c as an independent reader, bad input,
# and a fuzz target whose accepted inputs must survive encode → decode unchanged.
ms_add_test(test_wire test_wire.c LIBS ms_protocol LABELS protocol unit TIMEOUT 120)
# The golden frames decoded and re-encoded by PyPI's msgpack, against the
# reviewed NAME.json beside them (tests/golden/wire/README.md).
add_test(NAME test_wire_golden COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/test_wire_golden.py)
set_tests_properties(test_wire_golden PROPERTIES LABELS "protocol;unit" SKIP_RETURN_CODE 77 TIMEOUT 60)
ms_add_fuzz(fuzz_wire fuzz/fuzz_wire.c 20)
target_link_libraries(fuzz_wire PRIVATE ms_protocol)
# Who may be the target's draft (protocol/ms_link.h): HMAC-SHA256 against RFC 4231
# and Python's hmac, the link secret's challenge/proof (no proof, another secret,
# a replayed proof), and a healthy draft that keeps its place against a second one
# (with and without a secret), over real ms_link ends on an ipc:// endpoint.
ms_add_test(test_link_auth test_link_auth.c LIBS ms_protocol LABELS protocol unit TIMEOUT 120)
