# Draft tree (draft-node/ms_tree.c): EAGLE-2 expansion/rerank/flatten against a naive
# history enumeration, structural properties, chain mode, ties, bad params, failing callbacks.
ms_add_test(test_tree test_tree.c LIBS ms_draft LABELS draft unit)
# The n-gram draft source (draft-node/ms_ngram.c) and the cost policy's pruning
# (target-node/ms_policy.c) against naive references: backward-scan lookup,
# root paths after a graft, the acceptance record, prefix-closed enumeration.
ms_add_test(test_ngram test_ngram.c LIBS ms_draft ms_target LABELS draft unit)
