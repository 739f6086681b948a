"""What the commands print for a person: counted nouns, colour, one-line table rows, the progress bar."""

from __future__ import annotations

import io
import json
import re

import pytest
import yaml

from webhook.output import CUT_NOTE, Progress, Style, Table, color_wanted, dump, plural, print_table


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("count", "expected"), [(0, "0 objects"), (1, "1 object"), (2, "2 objects"), (1_000, "1000 objects")]
)
def test_plural(count: int, expected: str) -> None:
    assert plural(count, "object") == expected


def test_irregular_plural() -> None:
    assert (plural(1, "policy", "policies"), plural(3, "policy", "policies")) == ("1 policy", "3 policies")


def test_colour_only_on_a_terminal_and_never_when_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    assert color_wanted(Terminal(), no_color=False)
    assert not color_wanted(io.StringIO(), no_color=False)
    assert not color_wanted(Terminal(), no_color=True)
    monkeypatch.setenv("NO_COLOR", "1")
    assert not color_wanted(Terminal(), no_color=False)
    monkeypatch.setenv("NO_COLOR", "")  # no-color.org: only a non-empty value counts
    assert color_wanted(Terminal(), no_color=False)
    monkeypatch.setenv("TERM", "dumb")
    assert not color_wanted(Terminal(), no_color=False)


def test_status_words_are_coloured_and_the_rest_is_left_alone() -> None:
    style = Style(True)
    assert style.status("fail") == "\033[31mfail\033[0m"
    assert style.status("yes") == "\033[32myes\033[0m"
    assert style.status("node-1") == "node-1"
    assert Style(False).status("fail") == "fail"


def test_table_rows_are_one_line_each_and_the_last_column_fits() -> None:
    table = Table(
        ("NODE", "FITS", "REASON"),
        [("node-1", "no", "a\n  compile error\n  ^"), ("node-22", "yes", "x" * 100)],
    )
    lines = table.render(width=50).splitlines()
    assert lines == [
        "NODE     FITS  REASON",
        "node-1   no    a ...",
        "node-22  yes   " + "x" * 32 + "...",
    ]
    assert all(len(line) <= 50 for line in lines) and table.cut


def test_the_last_column_keeps_a_minimum_on_a_narrow_terminal() -> None:
    table = Table(("NODE", "REASON"), [("a-very-long-node-name", "y" * 100)])
    assert table.render(width=20).splitlines()[1] == "a-ver...  " + "y" * 27 + "..."


def test_wide_columns_before_the_last_are_cut_so_that_every_line_fits_the_terminal() -> None:
    """A test suite's long test names (or a node's devices) must not push the line past 80."""
    name = "a pod pinned with nodeName whose claim is not allocated is refused"
    rows = [("gpu-policies", name, "pass", "denied: " + "z" * 80)]
    table = Table(("SUITE", "TEST", "RESULT", "REASON"), rows)
    lines = table.render(width=80).splitlines()
    assert all(len(line) <= 80 for line in lines), lines
    assert lines[1].startswith("gpu-policies  a pod pinned with nodeN...  pass    denied: z")
    assert len(lines[1]) == 80 and table.cut
    narrow = Table(("A", "B"), [("x" * 60, "short")])
    assert narrow.render(width=80).splitlines()[1] == "x" * 60 + "  short"  # it fits: nothing cut
    assert not narrow.cut


def test_a_table_that_fits_is_not_cut() -> None:
    table = Table(("A", "B"), [("1", "short")])
    assert table.render(width=80) == "A  B\n1  short"
    assert not table.cut


def test_off_a_terminal_long_text_is_kept_whole_on_its_one_line() -> None:
    table = Table(("A", "B"), [("1", "x" * 1000 + "\nsecond line")])
    assert table.render(width=None) == "A  B\n1  " + "x" * 1000 + " ..."


def test_colour_does_not_shift_the_columns() -> None:
    table = Table(("NODE", "FITS", "REASON"), [("node-1", "no", "full"), ("n2", "yes", "")])
    plain = table.render(width=80).splitlines()
    painted = table.render(width=80, style=Style(True)).splitlines()
    assert [re.sub("\033\\[[0-9]+m", "", line) for line in painted] == plain
    assert "\033[31mno\033[0m" in painted[1]


def test_print_table_notes_a_cut_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    out = io.StringIO()
    print_table(Table(("A", "B"), [("1", "two\nlines")]), out, Style(False))
    assert out.getvalue() == "A  B\n1  two ...\n"
    assert capsys.readouterr().err == CUT_NOTE + "\n"


def test_dump_json_and_yaml_keep_the_order() -> None:
    document = {"b": 1, "a": ["x\ny"]}
    out = io.StringIO()
    dump(document, "json", out)
    text = out.getvalue()
    assert json.loads(text) == document and text.index('"b"') < text.index('"a"')
    out = io.StringIO()
    dump(document, "yaml", out)
    assert yaml.safe_load(out.getvalue()) == document and out.getvalue().startswith("b: 1\n")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_progress_waits_then_redraws_in_place_and_wipes_its_line() -> None:
    stream, clock = Terminal(), Clock()
    bar = Progress("audit", stream, delay=0.5, interval=0.1, clock=clock)
    bar(1, 4)
    assert stream.getvalue() == ""  # a run shorter than the delay shows nothing
    clock.now = 0.6
    bar(1, 4)
    bar(2, 4)  # within the interval: not redrawn
    clock.now = 0.8
    bar(4, 4)
    bar.close()
    drawn = stream.getvalue().split("\r")
    assert drawn[1] == "audit [" + "#" * 7 + "." * 23 + "] 1/4"
    assert drawn[2] == "audit [" + "#" * 30 + "] 4/4"
    assert drawn[3].strip() == "" and drawn[4] == ""  # the line is wiped at the end
    assert len(drawn) == 5


def test_progress_draws_nothing_off_a_terminal() -> None:
    stream, clock = io.StringIO(), Clock()
    with Progress("validate", stream, clock=clock) as bar:
        clock.now = 10
        bar(1, 1)
    assert stream.getvalue() == ""
