"""Library contenders: an absent optional one is a recorded RuntimeError, never a crash."""

import importlib.util

import pytest
import torch

from stagelab.families.sdpa import FAMILY as SDPA, Shape
from stagelab.families.softmax import FAMILY as SOFTMAX, Rows


@pytest.mark.skipif(importlib.util.find_spec("flash_attn") is not None, reason="flash-attn-4 is installed here")
def test_fa4_absent_is_a_runtime_error_naming_the_extra():
    assert "fa4" in SDPA.contenders
    shape = Shape(1, 1, 8, 64, False)
    with pytest.raises(RuntimeError, match=r"stagelab\[fa4\]"):
        SDPA.contender("fa4", shape, SDPA.make_inputs(shape, torch.float16, 0, "cpu"))


def test_unknown_softmax_contender_is_named():
    problem = Rows(2, 8)
    with pytest.raises(RuntimeError, match="unknown softmax contender 'cub'"):
        SOFTMAX.contender("cub", problem, SOFTMAX.make_inputs(problem, torch.float16, 0, "cpu"))


def test_fa4_site_directory_honours_pth_files(tmp_path, monkeypatch):
    import sys

    from stagelab.families.sdpa.contenders import FA4_SITE_ENV, add_fa4_site

    extra = tmp_path / "from_pth"
    extra.mkdir()
    site_dir = tmp_path / "site"
    site_dir.mkdir()
    (site_dir / "cutlass.pth").write_text(f"{extra}\n")
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setenv(FA4_SITE_ENV, str(site_dir))
    add_fa4_site()
    assert str(site_dir) in sys.path and str(extra) in sys.path
