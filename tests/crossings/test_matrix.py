"""The crossing matrix (issue 44): every entry point (``entry_points.ENTRY_POINTS``) x every registered judge format
and a YAML one (``formats.FORMATS``) x with and without a checklist x judge kinds (the format-aware stand-in server
on 127.0.0.1, a judgment store in front of it, the in-process scripted judge). Each cell gives the entry point's
documented outcome, or is refused at start with one line naming what the format supports."""

from __future__ import annotations

import pytest

from prom_reward.rewards.config import MODES
from tests.crossings.cells import GRADES, KINDS, MODEL, Cell, assert_refused, assert_refused_checklist
from tests.crossings.entry_points import ENTRY_POINTS
from tests.crossings.formats import FORMATS
from tests.fakes import StandInJudge


@pytest.fixture(scope="module")
def stand_in():
    """One format-aware stand-in judge server for the module's cells."""
    judge = StandInJudge(GRADES, default=3, model=MODEL, max_model_len=32768).start()
    yield judge
    judge.stop()


@pytest.fixture(scope="module", autouse=True)
def _one_parser():
    """The command line's parser built once for the module's commands (``main`` builds one per call: 100 builds
    were a tenth of the matrix's time)."""
    from prom_reward.cli import main as cli

    parser = cli.build_parser()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cli, "build_parser", lambda: parser)
        yield


def cells() -> list[pytest.ParameterSet]:
    """Every cell. Each entry point meets each format once in the unit tier, the (checklist, judge kind) pairs
    taken in turn across the formats (so each entry point meets every pair too); its other cells are marked
    ``integration``: ``make test`` (CI) runs every cell, ``make test-fast`` keeps to its time budget."""
    out = []
    for entry, point in ENTRY_POINTS.items():
        pairs = [(c, k) for c in ((False, True) if point.checklists else (False,)) for k in KINDS]
        for i, fmt in enumerate(FORMATS):
            for checklist, kind in pairs:
                marks = () if pairs[i % len(pairs)] == (checklist, kind) else (pytest.mark.integration,)
                label = f"{entry}-{fmt}-{'checklist' if checklist else 'rubric'}-{kind}"
                out.append(pytest.param(entry, fmt, checklist, kind, id=label, marks=marks))
    return out


CELLS = cells()


@pytest.mark.parametrize(("entry", "fmt", "checklist", "kind"), CELLS)
def test_cell(entry, fmt, checklist, kind, stand_in, tmp_path):
    point = ENTRY_POINTS[entry]
    cell = Cell(fmt, checklist, kind, tmp_path, stand_in.url)
    out = point.run(cell)
    missing = point.needs(cell)
    if missing == "checklist":
        assert_refused_checklist(out, point.refuses_checklists)
    elif missing is not None:
        assert_refused(out, cell, missing)
    else:
        assert out.refused is None and out.code == 0, out
        point.check(cell, out)


def test_every_reward_mode_is_an_entry_point_of_the_matrix():
    assert {f"{cls}-{m}" for cls in ("sync", "async") for m in MODES} <= set(ENTRY_POINTS)
