"""docs_check.py: a published table against what its command prints (here a command that
prints a fixed crossing table, so no simulation runs)."""

from __future__ import annotations

import argparse
import sys

from scripts.studies import docs_check

OUTPUT = """
       op  predicted h/t  simulated crossing  ratio
      qkv            518                 527   1.02
 out_proj           1556                1506   0.97
      fc1            389                 409   1.05
      fc2            389                 409   1.05
"""

TABLE = """Some text.

| op | c | predicted h/t | simulated crossing | ratio |
| --- | --- | --- | --- | --- |
| qkv (all-gather) | 3 | 518 | {qkv} | 1.02 |
| out_proj (reduce-scatter) | 1 | 1556 | 1506 | 0.97 |
| fc1 (all-gather) | 4 | 389 | 409 | 1.05 |
| fc2 (reduce-scatter) | 4 | 389 | 409 | 1.05 |

After the table.
"""


def _check(doc, rows=None) -> docs_check.Check:
    printed = [sys.executable, "-c", f"print({OUTPUT!r})"]
    return docs_check.Check("t", str(doc), "| op | c | predicted h/t", lambda _: printed,
                            docs_check.tp_overlap_expected, (0,), rows=rows)


def test_a_table_as_its_command_prints_it_passes(tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text(TABLE.format(qkv="527"))
    assert _check(doc).drifts(argparse.Namespace()) == []


def test_a_drifted_figure_is_named_with_both_values(tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text(TABLE.format(qkv="541"))  # the figure the findings once published
    assert _check(doc).drifts(argparse.Namespace()) == [
        f"{doc} row `qkv (all-gather)` column 4: published '541', the command prints '527'"]


def test_a_row_deleted_from_the_table_is_named(tmp_path):
    doc = tmp_path / "doc.md"
    lines = TABLE.format(qkv="527").splitlines(keepends=True)
    doc.write_text("".join(l for l in lines if not l.startswith("| fc2")))
    assert _check(doc).drifts(argparse.Namespace()) == [
        f"{doc} row `fc2 (reduce-scatter)`: the command prints it, the table lacks it"]


def test_a_table_of_some_rows_names_only_those_it_lacks(tmp_path):
    """A table that quotes some of the printed rows (the findings' MoE table): a row it does not
    quote is no drift, one of those it quotes deleted is."""
    doc = tmp_path / "doc.md"
    lines = TABLE.format(qkv="527").splitlines(keepends=True)
    doc.write_text("".join(l for l in lines if not l.startswith(("| fc1", "| fc2"))))
    quoted = ("qkv (all-gather)", "out_proj (reduce-scatter)", "fc1 (all-gather)")
    assert _check(doc, rows=quoted).drifts(argparse.Namespace()) == [
        f"{doc} row `fc1 (all-gather)`: the command prints it, the table lacks it"]
    assert _check(doc, rows=quoted[:2]).drifts(argparse.Namespace()) == []


def test_the_findings_quote_the_moe_rows_they_name():
    """The findings' MoE table holds exactly the rows docs_check names as quoted (keyed as the
    check keys them), so deleting one is found without running the study."""
    check = next(c for c in docs_check.CHECKS if c.name == "moe_nodes_readme")
    rows = docs_check.table_after(docs_check.ROOT / check.doc, check.heading)
    assert sorted(" | ".join(r[c] for c in check.key_columns) for r in rows) == sorted(check.rows)


def test_the_quick_grid_holds_the_points_around_each_published_crossing():
    """--quick reproduces the published crossings only if, for each, it has the full grid's
    last exposed point and first hidden one (the published figures: 527, 1506, 409)."""
    from scripts.studies.tp_overlap_crossing import h_over_t_values

    full = h_over_t_values(docs_check.TP_OVERLAP_GRID)
    quick = h_over_t_values(docs_check.TP_OVERLAP_QUICK_GRID)
    for crossing in (527, 1506, 409):
        below = max(x for x in full if x < crossing)
        assert below in quick and below + 64 in quick, crossing


def test_readme_moe_cells_accept_the_prediction_in_parentheses_or_none():
    row = ("| 64 | 8 | 4 | hierarchical | pairwise | 5.13 | 5.17 | 204.3 | 411.1 "
           "| 3.48 (4.63 if unlimited) | 39.8 / 39.5 | 51 / 50 (RDMA) |")
    want = docs_check.moe_readme_expected(row)["64 | hierarchical | 4"]
    assert want == {3: ("5.13",), 4: ("204.3",), 5: ("3.48 (4.63)", "3.48"), 6: ("39.8",)}
