# The target node's OpenAI-compatible HTTP front end (target-node/ms_http.c,
# docs/architecture.md §7) against a fake backend over loopback sockets: response shapes,
# SSE streaming, stop strings, every 4xx, bearer tokens, 50 concurrent clients
# against a bounded queue, client disconnects, shutdown, and `curl -N`.
# HTTP_SMALL=1 shrinks the random stop-string cases.
ms_add_test(test_http test_http.c LIBS ms_target LABELS http TIMEOUT 300)
target_link_libraries(test_http PRIVATE PkgConfig::JANSSON Threads::Threads)
# Request bodies come from the network: the parser is fuzzed.
ms_add_fuzz(fuzz_http_body fuzz/fuzz_http_body.c 30)
target_link_libraries(fuzz_http_body PRIVATE ms_target)
# Issue 35, acceptance 3: raw bytes as an HTTP connection to the real server
# (framing, headers, bodies; libmicrohttpd's own parser included), checked for
# whole responses, JSON errors and a server that still answers.
ms_add_fuzz(fuzz_http_raw fuzz/fuzz_http_raw.c 30)
target_link_libraries(fuzz_http_raw PRIVATE ms_target PkgConfig::JANSSON Threads::Threads)
