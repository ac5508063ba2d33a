"""avsim.core.digest: what resume-by-content compares."""

from __future__ import annotations

from pathlib import Path

import pytest

from avsim.core import digest


def _folder(root: Path) -> Path:
    (root / "sub").mkdir(parents=True)
    (root / "a.json").write_text('{"x": 1}')
    (root / "sub" / "b.bin").write_bytes(bytes(range(256)))
    return root


def test_same_content_same_digest_wherever_the_folder_is(tmp_path: Path) -> None:
    one = _folder(tmp_path / "one")
    two = _folder(tmp_path / "elsewhere" / "two")
    assert digest.folder_digest(one, {"fps": 30}) == digest.folder_digest(two, {"fps": 30})
    assert len(digest.folder_digest(one, {})) == 64


@pytest.mark.parametrize("change", ["bytes", "name", "option", "new_file"])
def test_any_input_change_changes_the_digest(tmp_path: Path, change: str) -> None:
    folder = _folder(tmp_path / "f")
    before = digest.folder_digest(folder, {"fps": 30, "cameras": ["a"]})
    options = {"fps": 30, "cameras": ["a"]}
    if change == "bytes":
        (folder / "a.json").write_text('{"x": 2}')
    elif change == "name":
        (folder / "a.json").rename(folder / "c.json")
    elif change == "option":
        options = {"fps": 30, "cameras": ["b"]}
    else:
        (folder / "sub" / "new.txt").write_text("")
    assert digest.folder_digest(folder, options) != before


def test_option_order_and_hidden_temporaries_do_not_matter(tmp_path: Path) -> None:
    folder = _folder(tmp_path / "f")
    before = digest.folder_digest(folder, {"a": 1, "b": 2})
    (folder / ".a.json.tmphost.1-x").write_text("partial")
    assert digest.folder_digest(folder, {"b": 2, "a": 1}) == before
    assert [p.name for p in digest.folder_files(folder)] == ["a.json", "b.bin"]
