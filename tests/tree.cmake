# Draft tree (draft-node/ms_tree.c): EAGLE-2 expansion/rerank/flatten against a naive
# history enumeration, structural properties, chain mode, ties, bad params, failing callbacks.
ms_add_test(test_tree test_tree.c LIBS ms_draft LABELS draft unit)
