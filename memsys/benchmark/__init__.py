"""Retrieval quality on data written by others (`memsys bench retrieval`).

`sets` reads the evaluation sets (LoCoMo, HotpotQA ± 2Wiki distractors, SciFact) into
corpora with their questions; `scoring` holds the baselines computed in the same run (exact
dense cosine, a plain Okapi BM25) and the metrics; `harness` loads a corpus through the batch
write path, asks every question through the pipeline the tools call and tabulates every
channel and ablation. benchmarks/bench_retrieval.py is the same harness with a vector cache
and a bulk loader for repeated research runs.
"""
