"""How a document's shell blocks are read: servers apart from scripts, a console block's
commands and their output, an output block after a script, and the tolerant matcher's rule
(tests/docs/shell_blocks.py); each with a case it must refuse."""

from pathlib import Path

from sybil import Document

from tests.docs.shell_blocks import ShellBlock, ShellBlockParser, console_steps, matches, script_steps


def test_a_server_line_is_a_step_of_its_own_and_the_lines_between_are_one_script() -> None:
    steps = script_steps(
        "make run       # devhost\n.venv/bin/python -m simulator   # another terminal\n"
        'TOKEN=$(ops token)\ncurl -d \'{"a": 1,\n  "b": 2}\'\n.venv/bin/python -m agent_worker --name a1\n'
    )
    assert [(s.service.kind if s.service else None) for s in steps] == [
        "devhost",
        "simulator",
        None,
        "agent",
    ]
    assert steps[2].command == 'TOKEN=$(ops token)\ncurl -d \'{"a": 1,\n  "b": 2}\''


def test_a_line_continued_from_a_quote_is_not_a_server() -> None:
    steps = script_steps("echo 'text\nmake run inside a quote'\n")
    assert len(steps) == 1 and steps[0].service is None


def test_a_console_block_pairs_each_command_with_its_output() -> None:
    steps = console_steps("$ echo one \\\n    two\none two\n$ true\n")
    assert [(s.command, s.expected) for s in steps] == [("echo one \\\n    two", "one two"), ("true", "")]


def test_an_output_block_right_after_a_script_is_its_expected_output(tmp_path: Path) -> None:
    doc = tmp_path / "d.md"
    doc.write_text(
        "```bash\necho hi\n```\n\n```\nhi\n```\n\ntext\n\n```sh\ntrue\n```\n\nprose\n\n```\nnot output\n```\n"
    )
    parser = ShellBlockParser(lambda example: None)
    blocks = [r.parsed for r in parser(Document(doc.read_text(), str(doc)))]
    assert all(isinstance(b, ShellBlock) for b in blocks)
    assert [b.steps[-1].expected for b in blocks] == ["hi\n", None]


def test_the_matcher_allows_variable_parts_and_nothing_else() -> None:
    shown = "order smoke-… at 2026-01-01T00:00:00Z took 120 ms\nid 0123456789abcdef0123\n...\ndone"
    actual = (
        "order smoke-4f2a9c at 2026-12-02T12:31:07.125+00:00 took 87 ms\n"
        "id fedcba9876543210fedc\nx\ny\ndone\n"
    )
    assert matches(shown, actual)
    assert not matches(shown, actual.replace("done", "failed"))
    assert not matches("order o-1: Processed", "order o-1: Error")
    assert not matches("took 120 ms", "took many ms")
