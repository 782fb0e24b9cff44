"""Every verb that takes a lake URL refuses an empty segment first, through
the one parser (``LakeLocation.parse``), before asking anything of the store
or the environment."""

from __future__ import annotations

import pytest

from slatelake.cli import main


@pytest.mark.parametrize(
    "argv",
    [
        ["init", "s3://bucket//lakes/x"],
        ["fold", "s3://b//x"],
        ["maintain", "s3://bucket//lakes/x"],
        ["policy", "show", "s3://bucket//x"],
    ],
)
def test_a_verb_refuses_an_empty_url_segment_before_it_asks_for_a_region(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's refusal of a typed argument
        code = exc.code
    assert code not in (0, None)
    err = capsys.readouterr().err
    assert "empty, '.' or '..' segment" in err, err
    assert "no region" not in err
