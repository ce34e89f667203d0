# Draft vocabulary modes (draft-node/ms_vocab.*, docs/architecture.md §5) and the static
# list builder (tools/vocab/microspec_freqlist.c): the dynamic window against a naive
# recomputation, V-independence of its work, static lists, rows agreement.
ms_add_test(test_vocab_dynamic test_vocab_dynamic.c LIBS ms_draft LABELS vocab TIMEOUT 300)
ms_add_test(test_vocab_work test_vocab_work.c LIBS ms_draft LABELS vocab TIMEOUT 300)
ms_add_test(test_vocab_static test_vocab_static.c LIBS ms_draft LABELS vocab)
ms_add_test(test_vocab_freqlist test_vocab_freqlist.c LIBS ms_draft LABELS vocab TIMEOUT 300)
add_dependencies(test_vocab_freqlist microspec-freqlist)
ms_add_test(test_vocab_rows test_vocab_rows.c LIBS ms_draft LABELS vocab)
# Typed (GGUF block-format) heads: packed rows kept in the head's blocks, the
# head over them (f32 and 8-bit activations, packed and indexed) bitwise equal
# to the full-head product's columns, for full / static / dynamic.
ms_add_test(test_vocab_q test_vocab_q.c LIBS ms_draft LABELS vocab TIMEOUT 300)
# The list parser reads files from outside: fuzzed. ms_vocab.c is compiled into
# the target (not linked from ms_draft) so libFuzzer's coverage sees it.
ms_add_fuzz(fuzz_vocab_list fuzz/fuzz_vocab_list.c 20)
target_sources(fuzz_vocab_list PRIVATE ${CMAKE_SOURCE_DIR}/draft-node/ms_vocab.c)
target_include_directories(fuzz_vocab_list PRIVATE ${CMAKE_SOURCE_DIR}/draft-node)
# Per-step vocabularies (issue 16): set_active against a naive set, packed
# rows against the head's rows, gathers only for entering ids; the static head
# limit and the position-aware budget schedule.
ms_add_test(test_vocab_step test_vocab_step.c LIBS ms_draft LABELS vocab)
# Mode static+window (draft-node/ms_vmode_static_window.c) through the head
# interface: its rows are list ∪ window (a separate reference window), its
# top-k is a naive top-k over that union.
ms_add_test(test_vocab_union test_vocab_union.c LIBS ms_draft LABELS vocab)
