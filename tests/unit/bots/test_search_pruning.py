"""What the search may skip in Nostra City's Trial (`pruning`): a bribe only moves the verdict
(NC-T01, NC-V05), so a loyal seat bribes with its Innocent Notes, a Snitch with its Guilty ones."""

from __future__ import annotations

from famiglia.bots import Decision, make_policy
from famiglia.bots.pruning import pruned
from famiglia.rules.nostra_city import ENGINE
from famiglia.rules.nostra_city.data import NOTE_MARK, VENDETTA
from tests.unit.nostra_city.helpers import END, meeting_table, notes, seat, table

SNITCH = next(v.id for v in VENDETTA if v.kind == "snitch")


def _trial(hand: tuple[str, ...] = ()):
    """Seat 0 to act in a 3-seat March Trial with one Note of each kind and two Free Wiseguys."""
    from famiglia.rules.nostra_city.state import Phase

    s = table(meeting_table(3), phase=Phase.TRIAL, month=3, turn=0, order=(0, 1, 2), verdict=0)
    bank = tuple(sorted(notes(10000, "I") + notes(10000, "G") + notes(5000)))
    return seat(s, 0, bank=bank, hand=hand, busy=frozenset({"W18"}))


def _marks(commands) -> set[str]:  # noqa: ANN001
    out = set()
    for c in commands:
        kind = c.WhichOneof("kind")
        out.add("end" if kind == "end_turn" else
                kind if kind != "corrupt" else "".join(NOTE_MARK[n] or "U" for n in c.corrupt.notes))
    return out


def test_a_loyal_seat_in_its_trial_turn_tries_only_its_innocent_bribes() -> None:
    state = _trial()
    legal = ENGINE.legal_commands(state, 0, limit=64)
    assert {"I", "G", "U", "end"} <= _marks(legal)
    assert _marks(pruned("nostra_city", state, 0, legal)) == {"I"}


def test_a_snitch_in_its_trial_turn_tries_only_its_guilty_bribes() -> None:
    state = _trial(hand=(SNITCH,))
    legal = ENGINE.legal_commands(state, 0, limit=64)
    assert _marks(pruned("nostra_city", state, 0, legal)) - {"play_vendetta"} == {"G"}


def test_without_a_note_of_the_mark_it_wants_a_seat_never_bribes_against_its_verdict() -> None:
    state = _trial()
    state = seat(state, 0, bank=tuple(b for b in state.players[0].bank if NOTE_MARK[b] != "I"))
    assert _marks(pruned("nostra_city", state, 0, ENGINE.legal_commands(state, 0, limit=64))) == {"U", "end"}


def test_outside_the_trial_and_in_other_games_nothing_is_pruned() -> None:
    state = meeting_table(3)
    legal = ENGINE.legal_commands(state, 0, limit=64)
    assert pruned("nostra_city", state, 0, legal) == list(legal)
    assert pruned("goodcritters", _trial(), 0, [END]) == [END]


def test_the_search_bribes_with_the_mark_its_seat_wants() -> None:
    """February, one Innocent Note among Guilty and unmarked ones: ahead on the verdict (V = 4) or
    behind (V = -4), 60 iterations spread over every Note and Wiseguy ended the turn or bribed with
    an unmarked Note for some seeds (for every seed at V = 4: the Note kept for later looked as
    good); with the Trial pruned the choice is the Innocent bribe, whichever the seed."""
    for verdict in (4, -4):
        state = table(_trial(), verdict=verdict, month=2)
        state = seat(state, 0, bank=tuple(sorted(notes(10000, "I") + notes(10000, "G", 3) + notes(5000, "", 4))))
        legal = tuple(ENGINE.legal_commands(state, 0, limit=64))
        for seed in range(6):
            decision = Decision("nostra_city", 0, ENGINE.view(state, 0), legal, 9, seed=seed)
            chosen = make_policy("ismcts?iterations=60&seconds=100").choose(ENGINE, decision)
            assert _marks([chosen]) == {"I"}, (verdict, seed)
