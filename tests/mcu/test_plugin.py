from mcutrain.mcu import plugin


def test_plugin_builds_once_into_the_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("MCUTRAIN_CACHE", str(tmp_path))
    p = plugin.plugin_path()
    assert p.parent == tmp_path / "insncount" and p.suffix == ".so" and p.stat().st_size > 0
    mtime = p.stat().st_mtime_ns
    assert plugin.plugin_path() == p and p.stat().st_mtime_ns == mtime  # cached, not rebuilt
    assert [f.name for f in p.parent.iterdir()] == [p.name]  # no temp files left behind
