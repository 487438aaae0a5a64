"""The timeline's braille chart: dots where the values are, marks and rules under the lines, labelled ticks."""

from __future__ import annotations

from rich.text import Text

from workbench.tui.timeline_series import Drop, TimelineData
from workbench.tui.widgets.braille_chart import Line, Mark, Rule, draw
from workbench.tui.widgets.timeline import ESTIMATED, REPORTED, chart

RED, BLUE, GREY = (255, 0, 0), (0, 0, 255), (90, 90, 90)


def colour_at(text: Text, offset: int) -> tuple[int, int, int] | None:
    """The colour of the character at ``offset`` of the chart's plain text."""
    for span in text.spans:
        if span.start <= offset < span.end and not isinstance(span.style, str) and span.style.color is not None:
            triplet = span.style.color.get_truecolor()
            return (triplet.red, triplet.green, triplet.blue)
    return None


def test_a_rising_line_is_the_dots_from_the_bottom_left_to_the_top_right() -> None:
    # One cell, two points: the first at the bottom of its left column, the second at the top of its right one,
    # joined by the dots between (left: rows 3 and 2; right: rows 1 and 0).
    assert draw(2, 1, [Line([0, 10], RED)], top=10).plain == "│" + chr(0x2800 + 0x40 + 0x04 + 0x10 + 0x08)
    falling = draw(2, 1, [Line([10, 0], RED)], top=10).plain
    assert falling == "│" + chr(0x2800 + 0x01 + 0x02 + 0x20 + 0x80)


def test_a_long_line_climbs_across_the_rows() -> None:
    text = draw(21, 4, [Line(list(range(0, 101, 5)), RED)], top=100)
    rows = text.plain.split("\n")
    assert len(rows) == 4 and all(len(row) == 21 for row in rows)
    first = [next(x for x, char in enumerate(row) if "\u2800" < char <= "\u28ff") for row in rows]
    assert first == sorted(first, reverse=True), "the top row's dots are right of the bottom row's"
    assert rows[-1][1] != " " and rows[0][-1] != " "


def test_ticks_are_labelled_on_their_rows_beside_the_axis() -> None:
    rows = draw(12, 4, [Line([1, 2], RED)], top=40, ticks=[(10, "10"), (30, "30"), (50, "50")]).plain.split("\n")
    # 30 of 40 is a quarter down from the top: the second of four rows; 10 the third; 50 is above the top.
    assert [row[:3] for row in rows] == ["  │", "30┤", "10┤", "  │"]


def test_marks_cross_rules_and_lines_cross_both() -> None:
    text = draw(11, 2, [Line([0, 0], BLUE)], top=10, marks=[Mark(0.5, RED)], rules=[Rule(10, GREY), Rule(11, GREY)])
    top, bottom = text.plain.split("\n")
    assert top == "│" + "─" * 5 + "│" + "─" * 4, "the rule over the top is not drawn; the mark cuts the other"
    assert colour_at(text, 1) == GREY and colour_at(text, 6) == RED
    assert bottom[6] not in " │", "the line is drawn over the mark"
    assert colour_at(text, len(top) + 1 + 6) == BLUE


def test_a_later_line_takes_the_cells_it_shares() -> None:
    text = draw(5, 1, [Line([3, 3], ESTIMATED), Line([3, 3], REPORTED)], top=3)
    inked = [x for x, char in enumerate(text.plain) if char > "\u2800"]
    assert len(inked) == 3 and {colour_at(text, x) for x in inked} == {REPORTED}


def test_no_values_or_no_room_is_an_empty_chart() -> None:
    assert draw(10, 3, [Line([], RED)], top=10).plain == ""
    assert draw(1, 3, [Line([1], RED)], top=10).plain == ""


def test_the_timeline_marks_each_drop_in_its_colour() -> None:
    data = TimelineData(reported=(1000, 5000, 2000, 6000), estimated=(1100, 5200, 2100, 6100),
                        drops=(Drop(1.5, "compaction"), Drop(2.5, "offload")), warn_at=4000, compact_at=90_000)
    text = chart(data, 40, 6)
    rows = text.plain.split("\n")
    assert [row[:3] for row in rows if "┤" in row] == ["6k┤", "4k┤", "2k┤"]
    assert sum(row.count("─") for row in rows) > 20, "the warn line is drawn; the far compact line is not"
    colours = {colour_at(text, x) for x in range(len(text.plain)) if text.plain[x] == "│" and x % 41 > 2}
    assert colours == {(247, 118, 142), (125, 207, 255)}
