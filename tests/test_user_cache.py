"""The user's cache (symattn/rendering/user_cache.py): a parsed language file is kept beside the hash of
its bytes, read back while they stay the same, and parsed again when they change or the entry is broken."""

import tomllib
from pathlib import Path

from symattn.rendering import user_cache
from symattn.rendering.phrases import load_language

ROOT = Path(__file__).resolve().parent.parent


def counting(calls: list[str]):
    def parse(text: str) -> dict:
        calls.append(text)
        return tomllib.loads(text)

    return parse


def test_a_parse_is_kept_and_read_back_until_the_file_changes(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    source = tmp_path / "zz.toml"
    source.write_text('title = "一"\n[step]\nname = "x"\n', encoding="utf-8")
    calls: list[str] = []
    parse = counting(calls)
    first = user_cache.parsed(source, parse)
    assert first == {"title": "一", "step": {"name": "x"}} and len(calls) == 1
    assert user_cache.parsed(source, parse) == first and len(calls) == 1  # read back, not parsed
    assert [p.name for p in (tmp_path / "cache" / "symattn" / "parsed").iterdir()] == ["zz.marshal"]
    source.write_text('title = "二"\n', encoding="utf-8")
    assert user_cache.parsed(source, parse) == {"title": "二"} and len(calls) == 2


def test_a_broken_entry_or_a_folder_that_cannot_be_written_only_costs_a_parse(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    source = tmp_path / "zz.toml"
    source.write_text("a = 1\n", encoding="utf-8")
    calls: list[str] = []
    user_cache.parsed(source, counting(calls))
    entry = tmp_path / "cache" / "symattn" / "parsed" / "zz.marshal"
    entry.write_bytes(entry.read_bytes()[:5])  # cut short, as by a full disk
    assert user_cache.parsed(source, counting(calls)) == {"a": 1} and len(calls) == 2
    assert user_cache.parsed(source, counting(calls)) == {"a": 1} and len(calls) == 2  # written whole again
    (tmp_path / "file").write_text("", encoding="utf-8")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "file"))  # a file where the folder would be
    assert user_cache.folder("parsed") is None
    assert user_cache.parsed(source, counting(calls)) == {"a": 1} and len(calls) == 3


def test_the_language_files_read_through_the_cache_are_the_parsed_files(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    for lang in ("en", "zh"):
        try:
            load_language.cache_clear()
            made = load_language(lang)  # parsed, and kept
            load_language.cache_clear()
            kept = load_language(lang)  # read back
        finally:
            load_language.cache_clear()
        source = ROOT / "templates" / "lang" / f"{lang}.toml"
        assert kept == made and kept["picture"] == tomllib.loads(source.read_text(encoding="utf-8"))["picture"]
    assert sorted(p.name for p in (tmp_path / "symattn" / "parsed").iterdir()) == ["en.marshal", "zh.marshal"]
