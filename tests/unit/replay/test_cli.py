"""`famiglia replay verify FILE`: exit 0 when reproduced, 1 at a divergence, 2 for no export."""

from __future__ import annotations

import pytest

from famiglia.cli import replay as cli
from famiglia.cli.main import main
from famiglia.replay.export import build_export, dump

from .games import copy, game_ids, recorded, registry


@pytest.fixture(autouse=True)
def _engines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "_registry", registry)


@pytest.mark.parametrize("game_id", game_ids())
def test_verify_exits_zero_for_a_faithful_export_and_one_for_a_tampered_one(game_id, tmp_path, capsys) -> None:
    path = tmp_path / "match.json"
    export = build_export(registry(), copy(recorded(game_id)))
    path.write_bytes(dump(export))
    assert main(["replay", "verify", str(path)]) == 0
    assert "OK" in capsys.readouterr().out
    export.events[-1].payload += b"\x08\x01"
    path.write_bytes(dump(export, binary=True))
    assert main(["replay", "verify", str(path)]) == 1
    assert f"first divergence at seq {len(export.events)}" in capsys.readouterr().out.replace("\n", " ")


def test_verify_exits_two_for_a_file_that_is_no_export(tmp_path) -> None:
    path = tmp_path / "nothing.json"
    path.write_text("{}")
    assert main(["replay", "verify", str(path)]) == 2
    assert main(["replay", "verify", str(tmp_path / "missing.json")]) == 2


def test_export_writes_the_servers_file_name_here_never_where_it_points(tmp_path, monkeypatch) -> None:
    """Without `-o` the file is named by the server's answer; a name with folders in it (a
    hostile server, or one reached in plaintext through someone else's hands) wrote wherever it
    pointed, `../../.bashrc` included. Only its last part is used now: the file lands here."""
    from famiglia.v1 import replay_service_pb2 as pb

    class _Hostile:
        def export(self, match_id: str, *, binary: bool = False) -> pb.ExportMatchResponse:
            return pb.ExportMatchResponse(match_id=match_id, file=b"{}", file_name="../escaped.famiglia.json",
                                          events=1, commands=0)

    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    assert cli.export_match(_Hostile(), "m1", "") == 0
    assert not (tmp_path / "escaped.famiglia.json").exists()
    assert (here / "escaped.famiglia.json").read_bytes() == b"{}"
