"""What a teacher's trial of check found (issue 32): one number claimed under two names."""

import pytest

from symattn.checking.checker import check
from symattn.cli.commands import main
from symattn.input import builtin
from symattn.input.errors import SpecError
from symattn.input.messages import messages_in

MLA_HEADS = builtin.example_path("mla-heads", "en")


def test_a_shared_latent_claimed_under_two_names_is_refused_in_one_line(tmp_path, capsys):
    claims = tmp_path / "c.toml"
    claims.write_text(
        f'spec = "{MLA_HEADS.as_posix()}"\n[claims]\n"latent[1][1]" = "1"\n"h2.latent[1][1]" = "5"\n', encoding="utf-8"
    )
    assert main(["check", str(claims)]) == 2
    assert capsys.readouterr() == (
        "",
        f"symattn: {claims}: claims.h2.latent[1][1]: the same entry as claims.latent[1][1] (both keys name one"
        " number); claim it once\n",
    )


@pytest.mark.parametrize(
    "lang, message",
    [
        ("en", "the same entry as claims.h1.latent[3][2] (both keys name one number); claim it once"),
        ("zh", "与 claims.h1.latent[3][2] 是同一项（两个键指同一个数）；只声明一次"),
    ],
)
def test_two_heads_name_one_latent_in_both_languages(lang, message):
    with messages_in(lang), pytest.raises(SpecError) as info:  # a whole row of h1, one entry of h2
        check(MLA_HEADS, {"claims": {"h1.latent[3]": ["1.5", "0.5"], "h2": {"latent[3][2]": "0.5"}}})
    assert str(info.value) == f"<dict>: claims.h2.latent[3][2]: {message}"


def test_one_name_may_claim_an_entry_twice_and_other_entries_pass():
    report = check(MLA_HEADS, {"claims": {"latent[1]": ["1.5", "0.5"], "h2.latent[2][1]": "0.5", "latent[1][1]": "2"}})
    assert [(v.claim.key, v.claim.row, v.claim.col, v.verdict) for v in report.results] == [
        ("claims.latent[1]", 0, 0, "exact"),
        ("claims.latent[1][1]", 0, 0, "rounded"),
        ("claims.latent[1]", 0, 1, "exact"),
        ("claims.h2.latent[2][1]", 1, 0, "exact"),
    ]
