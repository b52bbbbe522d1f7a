"""The results file: whole lines only, a torn last line ignored and cut off, the last line of a key wins."""

from __future__ import annotations

from mcutrain.sweep import store


def test_torn_last_line_is_ignored_then_cut_before_the_next_append(tmp_path):
    path = tmp_path / store.RESULTS
    store.append_line(path, {"key": "a", "status": "done"})
    with open(path, "ab") as f:
        f.write(b'{"key": "b", "sta')            # a write killed half way
    assert [ln["key"] for ln in store.read_lines(path)] == ["a"]
    store.append_line(path, {"key": "c", "status": "done"})
    assert path.read_text().count("\n") == 2
    assert [ln["key"] for ln in store.read_lines(path)] == ["a", "c"]


def test_last_line_of_a_key_wins_and_lines_are_byte_stable(tmp_path):
    store.append_line(tmp_path / store.RESULTS, {"key": "a", "status": "failed"})
    store.append_line(tmp_path / store.RESULTS, {"status": "done", "key": "a"})
    assert store.latest(tmp_path) == {"a": {"key": "a", "status": "done"}}
    assert store.line_text({"b": 1, "a": 2}) == store.line_text({"a": 2, "b": 1}) == '{"a":2,"b":1}\n'
    assert store.is_sweep_dir(tmp_path) and not store.is_sweep_dir(tmp_path / "x")
