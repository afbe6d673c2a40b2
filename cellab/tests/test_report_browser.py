"""The report opens in headless Chromium and its plots render: a screenshot that is not blank."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from matplotlib import colors as mcolors
from matplotlib import image as mimage

from cellab.report import page as report
from cellab.tests.test_report import campaign_folder

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (make setup installs it: "
                                                           "APT_PACKAGES in the Makefile)"),
              pytest.mark.background]  # no clock, no root: beside a lab test at SCHED_IDLE (conftest.py)
WINDOW = (1400, 3000)
PLOT_HUES = 4  # the report's plots show 7 here; text and links alone show at most 2


def screenshot(html: Path, out_png: Path, profile: Path) -> np.ndarray:
    """Chromium's rendering of the page as an RGB float array (a private profile: tests may run in parallel)."""
    argv = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
            f"--user-data-dir={profile}", f"--screenshot={out_png}", f"--window-size={WINDOW[0]},{WINDOW[1]}",
            html.resolve().as_uri()]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert out_png.is_file(), f"no screenshot (exit {result.returncode}): {result.stderr[-2000:]}"
    return mimage.imread(out_png)[..., :3]


def non_white_share(rgb: np.ndarray) -> float:
    return float((rgb.min(axis=2) < 0.9).mean())


def plot_hues(rgb: np.ndarray, min_pixels: int = 300) -> int:
    """How many distinct hues (of 12 bins) cover at least min_pixels saturated pixels.

    Text is black and links one blue, so several well-covered hues mean the plots' coloured lines and
    markers were drawn.
    """
    hsv = mcolors.rgb_to_hsv(rgb)
    coloured = (hsv[..., 1] > 0.4) & (hsv[..., 2] > 0.3)
    bins = np.floor(hsv[..., 0][coloured] * 12).astype(int) % 12
    return int((np.bincount(bins, minlength=12) >= min_pixels).sum())


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> Path:
    """One report for both tests (rendering it is half of each test's time); neither changes it."""
    return report.write_report(campaign_folder(tmp_path_factory.mktemp("out")))


def test_report_renders_in_headless_chromium(rendered, tmp_path):
    html = rendered
    rgb = screenshot(html, tmp_path / "shot.png", tmp_path / "profile")
    assert rgb.shape[:2] == (WINDOW[1], WINDOW[0])
    assert non_white_share(rgb) > 0.02, "the page is (nearly) blank"
    assert plot_hues(rgb) >= PLOT_HUES, "no coloured plots on the page"


def test_the_blank_check_catches_broken_images(rendered, tmp_path):
    # the same page with its inline PNGs corrupted: text renders, plots do not, and the check must say so
    html = rendered
    broken = tmp_path / "broken.html"
    broken.write_text(re.sub(r"base64,[A-Za-z0-9+/=]+", "base64,AAAA", html.read_text()))
    rgb = screenshot(broken, tmp_path / "shot.png", tmp_path / "profile")
    assert non_white_share(rgb) > 0.02  # the text is there
    assert plot_hues(rgb) < PLOT_HUES
