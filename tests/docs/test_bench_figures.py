"""Every measured figure in the README and docs/ is its benchmark's recorded result
(harness/tools/bench_figures.py), and the check fails on a figure typed by hand, a file or key that is
not there; ``--write`` renders them."""

import json
from pathlib import Path

from harness.tools import bench_figures

ROOT = Path(__file__).resolve().parents[2]


def test_every_figure_in_the_docs_is_its_recorded_result() -> None:
    problems = bench_figures.check(bench_figures.documents(ROOT))
    assert not problems, "run `python -m harness.tools.bench_figures --write`:\n" + "\n".join(problems)


def _docs(tmp_path: Path, markdown: str) -> tuple[Path, Path]:
    results = tmp_path / "bench" / "results"
    results.mkdir(parents=True)
    (results / "run.json").write_text(json.dumps({"burst": {"orders_per_second": 27.3, "n": 12000}}))
    doc = tmp_path / "doc.md"
    doc.write_text(markdown)
    return doc, results


def test_a_figure_that_differs_from_its_results_fails(tmp_path: Path) -> None:
    doc, results = _docs(tmp_path, "at <!--bench:run:burst.orders_per_second-->10.1<!--/bench--> orders/s\n")
    [problem] = bench_figures.check([doc], results)
    assert "shows '10.1', the results say '27.3'" in problem and "doc.md:1" in problem


def test_a_figure_equal_to_its_results_passes_with_its_format(tmp_path: Path) -> None:
    doc, results = _docs(
        tmp_path,
        "<!--bench:run:burst.orders_per_second-->27.3<!--/bench--> and\n"
        "<!--bench:run:burst.n|,-->12,000<!--/bench--> orders\n",
    )
    assert bench_figures.check([doc], results) == []


def test_a_missing_file_or_key_fails(tmp_path: Path) -> None:
    doc, results = _docs(
        tmp_path,
        "<!--bench:nothing:x-->1<!--/bench--> <!--bench:run:burst.p50-->1<!--/bench-->"
        " <!--bench:run:burst-->1<!--/bench-->\n",
    )
    problems = bench_figures.check([doc], results)
    assert len(problems) == 3
    assert "no results file" in problems[0]
    assert "no key 'burst.p50'" in problems[1]
    assert "not a single value" in problems[2]


def test_a_key_whose_name_holds_a_dot_is_found(tmp_path: Path) -> None:
    doc, results = _docs(tmp_path, "<!--bench:ops:happy.Service Bus.send|g-->5<!--/bench--> sends\n")
    (results / "ops.json").write_text(json.dumps({"happy": {"Service Bus.send": 5.0}}))
    assert bench_figures.check([doc], results) == []


def test_write_renders_each_figure_from_its_results(tmp_path: Path) -> None:
    doc, results = _docs(
        tmp_path, "at <!--bench:run:burst.orders_per_second|.0f-->10<!--/bench--> orders/s, typed\n"
    )
    assert bench_figures.write([doc], results) == []
    assert (
        doc.read_text() == "at <!--bench:run:burst.orders_per_second|.0f-->27<!--/bench--> orders/s, typed\n"
    )
    assert bench_figures.check([doc], results) == []
