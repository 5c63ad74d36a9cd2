"""What a relevance score means: its distribution for relevant and unrelated hits on LoCoMo.

Each conversation is loaded into its own namespace (as bench_retrieval.py does); every
question goes through the pipeline the tools call (top 10). A hit is *relevant* when it is
one of the question's evidence turns, *other* when it is another turn of the same
conversation. *Unrelated* is the top hit for a question asked against a different
conversation's namespace (nothing there is about it). Printed: quantiles of `score` for each
group, and for `min_relevance` thresholds the share of relevant hits kept and of unrelated
top hits dropped.

    .venv/bin/python benchmarks/bench_calibration.py [--conversations 10]
"""

from __future__ import annotations

import argparse
import re
from typing import Any

import bench_retrieval
import common


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=10)
    args = parser.parse_args()
    home = common.private_home("msk-")
    groups: dict[str, list[float]] = {"relevant": [], "other": [], "unrelated": []}
    try:
        common.start_database()
        from memsys.db import session_scope
        from memsys.retrieval import pipeline

        loaded: list[tuple[str, list[tuple[str, set[str]]]]] = []
        for conv in common.locomo(common.DEFAULT_DATA)[: args.conversations]:
            ns = f"locomo:{conv['sample_id']}"
            c = conv["conversation"]
            turns, meta = [], []
            sessions = [k for k in c if re.fullmatch(r"session_\d+", k)]
            for key in sorted(sessions, key=lambda k: int(k.split("_")[1])):
                for turn in c[key]:
                    turns.append(f"{turn['speaker']}: {turn['text']}")
                    meta.append({"dia_id": turn["dia_id"]})
            ids, _ = bench_retrieval.load(ns, turns, meta)
            by_dia = {m["dia_id"]: cid for m, cid in zip(meta, ids, strict=True)}
            questions = []
            for qa in conv["qa"]:
                found = bench_retrieval.EVIDENCE.findall(" ".join(qa.get("evidence", [])))
                gold = {by_dia[d] for d in found if d in by_dia}
                if gold:
                    questions.append((qa["question"], gold))
            loaded.append((ns, questions))

        def hits(ns: str, query: str) -> list[Any]:
            with session_scope() as s:
                filters = {"namespace": ns, "doc_type": "memory"}
                return pipeline.retrieve(s, query, filters=filters, limit=10).hits

        for n, (ns, questions) in enumerate(loaded):
            common.progress(f"{ns}: {len(questions)} questions")
            elsewhere = loaded[(n + 1) % len(loaded)][0]
            for question, gold in questions:
                for hit in hits(ns, question):
                    groups["relevant" if hit.id in gold else "other"].append(hit.score)
                top = hits(elsewhere, question)
                if top:
                    groups["unrelated"].append(top[0].score)
    finally:
        common.stop_database(home, keep=False)

    qs = (10, 25, 50, 75, 90)
    rows = [
        [name, len(v), *(round(common.percentile(v, q), 3) for q in qs)]
        for name, v in groups.items()
    ]
    print(common.table(["hits", "n", *(f"p{q}" for q in qs)], rows))
    cut_rows = []
    for threshold in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6):
        kept = sum(s >= threshold for s in groups["relevant"]) / len(groups["relevant"])
        dropped = sum(s < threshold for s in groups["unrelated"]) / len(groups["unrelated"])
        cut_rows.append([threshold, f"{kept:.1%}", f"{dropped:.1%}"])
    print()
    print(common.table(["min_relevance", "relevant kept", "unrelated top hit dropped"], cut_rows))
    payload = {"machine": common.machine(), "load": common.loadavg(), "groups": rows}
    print("written to", common.write_json("calibration.json", {**payload, "cuts": cut_rows}))


if __name__ == "__main__":
    main()
