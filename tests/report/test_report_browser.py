"""The report in a real browser: headless Chromium (Debian's ``chromium``; ``make test`` installs it) loads the
page from disk with networking off, the SVG plots survive into its DOM, each has its size and its data marks,
and the screenshot shows the marks' colour inside every plot's box. Fails, never skips, without Chromium."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from prom_reward.probe.run import ProbeConfig, run_probe
from prom_reward.report.html import render_report
from prom_reward.report.summarize import summarize
from prom_reward.report.svg import HEIGHT, MARK, WIDTH
from tests.probe.test_probe import exploitable_judge, write_items, write_llmbar
from tests.report.test_report import compared_rows, graded_rows

pytestmark = pytest.mark.integration  # draws the plots in headless Chromium

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
PROBE_BOXES = """<pre id="plot-boxes"></pre><script>
const out = [...document.querySelectorAll('svg.plot')].map(svg => {
  const r = svg.getBoundingClientRect();
  const marks = [...svg.querySelectorAll('.mark')].filter(m => {
    const b = m.getBBox(); return b.width > 0 && b.height > 0; });
  return {name: svg.dataset.plot, x: r.left + scrollX, y: r.top + scrollY, w: r.width, h: r.height,
          marks: marks.length};
});
document.getElementById('plot-boxes').textContent = JSON.stringify(out);
</script>"""


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    assert os.access(CHROMIUM, os.X_OK), (
        "Chromium is missing: install Debian's package (apt-get install -y chromium); make test does (make browser)"
    )
    profile = tmp_path / "profile"
    profile.mkdir(exist_ok=True)
    cmd = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--no-first-run",
        "--disable-component-update",
        "--disable-sync",
        "--force-device-scale-factor=1",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        *args,
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def page_with_probe(tmp_path: Path, rows: list[dict]) -> str:
    cfg = ProbeConfig(
        llmbar=str(write_llmbar(tmp_path / "llmbar", natural_right_is_longer=True)),
        items=str(write_items(tmp_path / "items.jsonl")),
        seed=0,
    )
    probe = run_probe(exploitable_judge(), cfg, judge_label="scripted length-loving judge")
    return render_report(summarize(rows * 8), probe, title="Report in a browser", source="graded.jsonl")


def bluish_pixels(image) -> int:
    """Pixels of a data mark's colour (opaque or 55 % over white), not the black axes, grey grid or background."""
    data = image.tobytes()
    return sum(
        1
        for i in range(0, len(data), 3)
        if data[i + 2] > 150 and data[i + 2] - data[i] > 35 and data[i + 2] - data[i + 1] > 15
    )


@pytest.mark.parametrize("rows", ["grade", "compare"])
def test_plots_are_drawn_in_headless_chromium(tmp_path, rows):
    from PIL import Image

    page = page_with_probe(tmp_path, graded_rows() if rows == "grade" else compared_rows())
    report = tmp_path / "report.html"
    report.write_text(page)
    dom = chromium(tmp_path, "--dump-dom", report.as_uri()).stdout
    assert dom.count('<svg class="plot"') == page.count('<svg class="plot"') == 4
    assert len(re.findall(r'class="mark"', dom)) == len(re.findall(r'class="mark"', page)) > 10

    probed = tmp_path / "report_boxes.html"
    probed.write_text(page.replace("</body>", PROBE_BOXES + "</body>"))
    dumped = chromium(
        tmp_path, "--virtual-time-budget=3000", "--window-size=1200,2000", "--dump-dom", probed.as_uri()
    ).stdout  # the screenshot's width: the same layout
    boxes = json.loads(re.search(r'<pre id="plot-boxes">(.*?)</pre>', dumped, re.S).group(1).replace("&quot;", '"'))
    assert len(boxes) == 4
    for box in boxes:
        assert (box["w"], box["h"]) == (WIDTH + 2, HEIGHT + 2) and box["marks"] > 0, box  # + the 1px border

    height = int(max(b["y"] + b["h"] for b in boxes)) + 40
    shot = tmp_path / "report.png"
    chromium(tmp_path, f"--screenshot={shot}", f"--window-size=1200,{height}", report.as_uri())
    image = Image.open(shot).convert("RGB")
    assert image.size == (1200, height)
    for box in boxes:
        area = image.crop((int(box["x"]), int(box["y"]), int(box["x"] + box["w"]), int(box["y"] + box["h"])))
        marks = bluish_pixels(area)
        assert marks >= 60, (box["name"], marks)  # the bars and points are painted, not just the frame
    outside = image.crop((0, 0, 1200, int(min(b["y"] for b in boxes)) - 5))
    assert bluish_pixels(outside) < 50  # the mark colour is the plots' own
    assert MARK == "#2f6db5"  # what bluish_pixels() looks for
