"""`memsys bench retrieval`: the quality table on an evaluation set, stored and asked through
the real pipeline inside a transaction that is rolled back; bad arguments exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import text

from memsys.db import get_engine
from tests.cli.helpers import fails, run

PASSAGES = {
    "Lake Orvin": ["Lake Orvin is a glacial lake in the Tarsk mountains.", " It freezes in May."],
    "Tarsk mountains": ["The Tarsk mountains are a range on the island of Vell."],
    "Mira Holt": ["Mira Holt is a cellist who recorded the Harbour Suites."],
    "Harbour Suites": ["The Harbour Suites are six pieces for solo cello written in 1921."],
    "Copper kettles": ["Copper kettles conduct heat quickly and tarnish green."],
    "Night trains": ["Night trains carry sleeping cars between distant cities."],
}
QUESTIONS = [
    {
        "question": "On which island is the range that holds Lake Orvin?",
        "supporting_facts": [["Lake Orvin", 0], ["Tarsk mountains", 0]],
    },
    {
        "question": "When were the pieces recorded by the cellist Mira Holt written?",
        "supporting_facts": [["Mira Holt", 0], ["Harbour Suites", 0]],
    },
]


@pytest.fixture
def data(tmp_path: Path) -> Path:
    folder = tmp_path / "hotpotqa"
    folder.mkdir()
    (folder / "hotpotqa_train_corpus.json").write_text(json.dumps(PASSAGES))
    (folder / "hotpotqa_train.json").write_text(json.dumps(QUESTIONS))
    return tmp_path


def _memories() -> int:
    with get_engine().connect() as conn:
        return int(conn.execute(text("SELECT count(*) FROM chunk")).scalar_one())


@pytest.mark.usefixtures("embedder")
def test_a_run_scores_every_ranking_and_leaves_nothing_behind(data: Path) -> None:
    result = run("bench", "retrieval", "--data-dir", str(data), "--sets", "hotpotqa", "--json")
    assert result.exit_code == 0, (result.stdout, result.stderr)
    table = json.loads(result.stdout)["sets"]["hotpotqa"]
    assert table["questions"] == 2 and table["documents"] == len(PASSAGES)
    # Both supporting passages of each question are in the first five, by every memsys order
    # and every baseline; the floor compares fused with the best channel.
    rankings = ("fused", "dense", "lexical", "baseline_dense", "baseline_bm25", "baseline_bm25_pg")
    for ranking in rankings:
        assert table[ranking]["R@5"] == 1.0, ranking
    assert table["floor"] == {
        "metric": "R@5", "fused": 1.0, "best_channel": 1.0, "below": [], "holds": True
    }  # fmt: skip
    assert _memories() == 0  # stored in a transaction that was rolled back
    human = run("bench", "retrieval", "--data-dir", str(data), "--sets", "hotpotqa")
    assert human.exit_code == 0 and "floor (R@5): fused 1.000" in human.stdout


@pytest.mark.usefixtures("embedder")
def test_the_shipped_agent_sets_run_without_data_and_each_store_has_its_floor() -> None:
    """`--sets agent` needs no data folder; each of its stores (identifiers, paraphrases,
    near-duplicates, …) gets its own floor check, and the exit code follows every one."""
    from memsys.benchmark import harness, sets

    shipped = {c.name: len(c.questions) for c in sets.agent("tune")}
    args = ("bench", "retrieval", "--sets", "agent", "--half", "tune", "--data-dir", "/nonexistent")
    result = run(*args, "--json")
    table = json.loads(result.stdout)["sets"]["agent"]
    assert {name: part["questions"] for name, part in table["parts"].items()} == shipped
    assert len(shipped) == 7 and table["questions"] == sum(shipped.values())
    for part in table["parts"].values():
        assert part["floor"]["metric"] == "R@1"
        assert part["floor"]["holds"] == (part["floor"]["below"] == [])
    assert result.exit_code == (0 if harness.floor_holds(table) else 1)
    assert _memories() == 0
    lines = harness.render("agent", table)
    assert [line.split(" (")[0].strip() for line in lines[-7:]] == list(shipped)


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (["--sets", "hotpotqa,trivia"], "--sets: unknown ['trivia']"),
        (["--sets", ","], "--sets: unknown nothing given"),
        (["--half", "middle"], "--half must be one of all, tune, report"),
        (["--sets", "scifact"], "evaluation data not found"),
        (["--data-dir", "/nonexistent/memsys-data"], "--data-dir: no such folder"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(data: Path, args: list[str], reason: str) -> None:
    given = [] if "--data-dir" in args else ["--data-dir", str(data)]  # an option is given once
    line = fails("bench", "retrieval", *given, *args)
    assert reason in line
    assert _memories() == 0


def test_the_floor_is_broken_by_any_metric_not_only_the_headline() -> None:
    """Fused above every channel at R@5 but under BM25 alone at R@1: the floor does not hold,
    and the table names the metric."""
    from memsys.benchmark import harness, scoring

    row = {"R@1": 0.3, "R@5": 0.5, "all@1": 0.2, "nDCG@10": 0.4}
    result: dict[str, object] = {name: dict(row) for name in scoring.CHANNELS}
    result["lexical"] = {**row, "R@1": 0.33}
    result["fused"] = {"R@1": 0.32, "R@5": 0.66, "all@1": 0.2, "nDCG@10": 0.5}
    floor = scoring.floor_check(result, "R@5")
    assert floor["holds"] is False
    assert (floor["fused"], floor["best_channel"]) == (0.66, 0.5)  # the headline holds
    assert floor["below"] == [{"metric": "R@1", "fused": 0.32, "best_channel": 0.33}]
    result["fused"] = {**result["fused"], "R@1": 0.33}  # level with the best is not below
    assert scoring.floor_check(result, "R@5")["holds"] is True
    table = {**result, "questions": 1, "documents": 1, "floor": floor}
    table.update({r: dict(row) for r in harness.ROWS if r not in table})
    lines = harness.render("hotpotqa", table)
    assert "BROKEN" in lines[-2] and lines[-1] == (
        "  below on R@1: fused 0.320 vs best channel 0.330"
    )


def _locomo(root: Path) -> Path:
    """A two-session conversation in LoCoMo's layout, with questions of two categories."""
    turns = [
        ("Ana", "I adopted a grey kitten called Pixel last week."),
        ("Ben", "Nice! I finally fixed the leaking roof of the cabin."),
        ("Ana", "Pixel keeps chasing the laser pointer all evening."),
        ("Ben", "The cabin is by Lake Orvin, we go there every summer."),
    ]
    session = [{"speaker": s, "dia_id": f"D1:{n}", "text": t} for n, (s, t) in enumerate(turns, 1)]
    conversation = {
        "speaker_a": "Ana",
        "speaker_b": "Ben",
        "session_1": session,
        "session_1_date_time": "1:56 pm on 8 May, 2023",
    }
    qa = [
        {"question": "When did Ana adopt her kitten?", "evidence": ["D1:1"], "category": 2},
        {"question": "Where is Ben's cabin?", "evidence": ["D1:4"], "category": 4},
        {"question": "What did Ben fix at the cabin?", "evidence": ["D1:2"], "category": 4},
    ]
    folder = root / "locomo"
    folder.mkdir()
    sample = {"sample_id": "conv-1", "conversation": conversation, "qa": qa}
    (folder / "locomo10.json").write_text(json.dumps([sample]))
    return root


@pytest.mark.usefixtures("embedder")
def test_locomo_is_also_tabled_by_category_of_question(tmp_path: Path) -> None:
    """The data's README asks LoCoMo's figures per category: a table and a floor check for
    each kind of question, beside the set's own."""
    data = _locomo(tmp_path)
    result = run("bench", "retrieval", "--data-dir", str(data), "--sets", "locomo", "--json")
    assert result.exit_code in (0, 1), (result.stdout, result.stderr)
    table = json.loads(result.stdout)["sets"]["locomo"]
    kinds = table["kinds"]
    assert {k: v["questions"] for k, v in kinds.items()} == {
        "category 2 temporal": 1,
        "category 4 single-hop": 2,
    }
    for part in kinds.values():
        assert part["floor"]["metric"] == "R@10" and set(part["fused"]) == set(table["fused"])
    weighted = sum(v["fused"]["R@1"] * v["questions"] for v in kinds.values()) / 3
    assert weighted == pytest.approx(table["fused"]["R@1"], abs=1e-3)
    human = run("bench", "retrieval", "--data-dir", str(data), "--sets", "locomo").stdout
    assert "  category 2 temporal (1 questions): fused " in human


def test_a_gap_under_the_floor_comes_with_its_sign_test() -> None:
    """Which channel fused is below, and in how many questions it is better and worse: a
    gap of a question or two is told apart from one that is more than chance."""
    from memsys.benchmark import harness, scoring

    gold = [{f"g{i}"} for i in range(8)]
    runs: scoring.Runs = {name: [] for name in (*scoring.CHANNELS, "fused")}
    for i, g in enumerate(gold):
        hit, miss = [f"g{i}", "x"], ["x", f"g{i}"]
        runs["dense"].append((g, hit if i < 7 else miss))  # first in 7 of 8
        runs["fused"].append((g, hit if i in (0, 7) else miss))  # 1 better, 6 worse, 1 tie
        for channel in ("lexical", "graph", "neighbours"):
            runs[channel].append((g, miss))
    assert scoring.sign_test(runs, "fused", "dense", "R@1") == {
        "better": 1, "worse": 6, "p": 0.125
    }  # fmt: skip
    kinds = ["a"] * 4 + ["b"] * 4
    tables = harness.by_kind(runs, kinds, (1,), "R@1")
    assert {k: (v["questions"], v["fused"]["R@1"]) for k, v in tables.items()} == {
        "a": (4, 0.25),
        "b": (4, 0.25),
    }
    (below, *_) = tables["a"]["floor"]["below"]
    assert below == {
        "metric": "R@1", "fused": 0.25, "best_channel": 1.0, "channel": "dense",
        "better": 0, "worse": 3, "p": 0.25,
    }  # fmt: skip
