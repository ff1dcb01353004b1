"""NP-H9's slots through the Redis store: held answers staged by one command replica, written
out in a slot a seat by another (`write_out.lua`), and both replicas, a fresh fold, a duplicate
and a replay agreeing afterwards."""

from __future__ import annotations

import random

import pytest

from famiglia.eventstore.redis_store import RedisEventStore
from famiglia.replay.verify import verify_envelopes
from services.command.bootstrap import bootstrap
from tests.unit.command.test_held_answers import (
    SETTINGS,
    _chat,
    _fresh_fold,
    _pass,
    _same_fold,
    _window_of_every_seat,
)

pytestmark = pytest.mark.redis


def test_held_answers_go_out_in_their_seats_slots_through_redis(redis_url: str) -> None:
    one_store, two_store = RedisEventStore.connect(redis_url), RedisEventStore.connect(redis_url)
    try:
        one = bootstrap(store=one_store, settings=SETTINGS)
        created, window = _window_of_every_seat(one, 4)
        match_id, tokens = created.match_id, created.seat_tokens
        two = bootstrap(store=two_store, settings=SETTINGS)
        two.get_view(match_id, two.viewer(match_id, None))
        version = one_store.version(match_id)
        answering, chatter = window.seats[:-1], window.seats[-1]
        for seat in reversed(answering):  # held on one replica, in reverse seat order
            assert _pass(one, match_id, tokens[seat], f"answer-{seat}").held
        # the other replica chats: its append conflicts, it catches up, and writes them out
        assert _chat(two, match_id, tokens[chatter], "chat-1", [answering[0]]).version == version + 4 + 1
        written = one_store.read(match_id, after=version)
        assert [(e.type, e.seat) for e in written[:4]] == [
            ("window_answered", s) if s in answering else ("window_padding", -1) for s in range(4)]
        assert one_store.read_staged(match_id) == []
        one.get_view(match_id, one.viewer(match_id, None))
        for replica in (one, two):
            _same_fold(replica.matches.get(match_id).match, _fresh_fold(replica, match_id))
            again = _pass(replica, match_id, tokens[answering[1]], f"answer-{answering[1]}")
            assert again.duplicate and [e.envelope.seq for e in again.events] == [version + answering[1] + 1]
        assert not _pass(one, match_id, tokens[chatter], "last").held
        assert verify_envelopes(one.registry, one_store.read(match_id)).divergence is None
    finally:
        one_store.close()
        two_store.close()


def _chain_with_an_answer_in_its_gap(redis_url: str, monkeypatch: pytest.MonkeyPatch, answer_in_gap: bool):
    """Two replicas; a window asking three seats. A chain on the first plays the second seat's
    answer (held) and then the third seat's chat (public, made while the window is open); if
    `answer_in_gap`, the first seat (a person) answers on the other replica between the two
    entries. (what the chat's seat was answered, what a spectator and the chat's seat see after)"""
    from services.command.app import ChainedCommand
    from tests.unit.command.test_held_answers import _TYPE_URL, _what_seat_sees, _window_match, pb

    one_store, two_store = RedisEventStore.connect(redis_url), RedisEventStore.connect(redis_url)
    try:
        one, two = bootstrap(store=one_store, settings=SETTINGS), bootstrap(store=two_store, settings=SETTINGS)
        created, window = _window_match(one, asked=3)  # the same seeds: the same window
        match_id, tokens = created.match_id, created.seat_tokens
        two.get_view(match_id, two.viewer(match_id, None))
        version = one_store.version(match_id)
        person, bot, chatter = window.seats
        passing = pb.Command(**{"pass": pb.Pass()}).SerializeToString()
        chat = pb.Command(send_chat=pb.SendChat(to=[person], text="well?")).SerializeToString()
        chain = [ChainedCommand(tokens[bot], f"bot:{{version}}:{bot}", _TYPE_URL, passing),
                 ChainedCommand(tokens[chatter], f"bot:{{version}}:{chatter}", _TYPE_URL, chat)]
        entry, gaps = one.submit_packed, []

        def then_the_person_answers(*args, **kwargs):  # type: ignore[no-untyped-def]
            done = entry(*args, **kwargs)
            if not gaps:  # between the chain's two entries
                gaps.append(done)
                if answer_in_gap:
                    assert _pass(two, match_id, tokens[person], "person").held
            return done

        monkeypatch.setattr(one, "submit_packed", then_the_person_answers)
        done = one.submit_chain(match_id, chain, version)
        monkeypatch.undo()
        assert gaps and gaps[0].held
        refusal = done.refusal and (done.refused_at, done.refusal.code)
        chatted = [(d.version, d.held, [(e.envelope.seq, e.envelope.command_id, e.event.SerializeToString())
                                        for e in d.events]) for d in done.taken[1:]]
        seen = [_what_seat_sees(one, match_id, token) for token in (None, tokens[chatter])]
        assert verify_envelopes(one.registry, one_store.read(match_id)).divergence is None
        return refusal, chatted, seen
    finally:
        one_store.close()
        two_store.close()


def test_np_h9_an_answer_given_between_two_chain_entries_does_not_make_the_next_stale(
        redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """NP-H9: a chain's fresh entry was held to the position the entry before it left, held
    answers counted. An answer another seat gave in the gap between two entries (on another
    replica) moved that position and not the version, so the next entry was refused as
    `stale_version`: whoever sent the chain learnt that someone had answered. The next entry
    goes in at the version the entry before left, as a SubmitCommand sent with it would, and
    the chain's answer and what the table sees are the same whether or not anyone answered."""
    quiet = _chain_with_an_answer_in_its_gap(redis_url, monkeypatch, answer_in_gap=False)
    answered = _chain_with_an_answer_in_its_gap(redis_url, monkeypatch, answer_in_gap=True)
    assert quiet[0] is None and quiet[1]
    assert answered == quiet


def test_np_h9_a_chain_retried_long_after_its_held_answer_was_written_out_is_its_first_answer(
        redis_url: str) -> None:
    """A chain plays a seat's window answer (held) and another seat's chat (public, behind a
    block of slots that writes the answer out), naming each "{version}". Retried after more
    than 64 blocks more (chats while the window stays open), on another replica:
    the answer's duplicate was told apart from a public command by the padding runs the fold
    keeps, the newest 64 only, so it was taken for public, named the next entry by its slot's
    version, and the chat, now another id, was refused as stale instead of answered again."""
    from services.command.app import ChainedCommand
    from tests.unit.command.test_held_answers import _TYPE_URL, _to_a_window, pb

    one_store, two_store = RedisEventStore.connect(redis_url), RedisEventStore.connect(redis_url)
    try:
        one, two = bootstrap(store=one_store, settings=SETTINGS), bootstrap(store=two_store, settings=SETTINGS)
        for seed in range(1, 40):  # a window asking two seats, in a match of chatty seats
            created = one.create_match("nothing_personal", 3, seed=seed, options={"chats_per_phase": "50"})
            match_id, tokens = created.match_id, created.seat_tokens
            window = _to_a_window(one, match_id, tokens, random.Random(seed), 2)
            if window is not None:
                break
        answering, chatter = window.seats[0], window.seats[1]
        passing = pb.Command(**{"pass": pb.Pass()}).SerializeToString()
        chain = [ChainedCommand(tokens[answering], "bot:{version}:a", _TYPE_URL, passing),
                 ChainedCommand(tokens[chatter], "bot:{version}:c", _TYPE_URL,
                                pb.Command(send_chat=pb.SendChat(to=[answering], text="well?")).SerializeToString())]
        version = one_store.version(match_id)
        first = one.submit_chain(match_id, chain, version)
        assert first.refusal is None and [d.held for d in first.taken] == [True, False]
        chatty = [s for s in range(3) if s != answering]
        for i in range(65):  # the window stays open: each chat goes in behind a block of its own
            done = _chat(one, match_id, tokens[chatty[i % 2]], f"chat-{i}", [answering])
            assert done.version == first.taken[1].version + (i + 1) * 4
        again = two.submit_chain(match_id, chain, version)
        assert again.refusal is None, (again.refused_at, again.refusal)
        assert all(d.duplicate for d in again.taken)
        assert again.taken[1].version == first.taken[1].version
    finally:
        one_store.close()
        two_store.close()


def test_a_seat_that_chats_in_a_window_keeps_its_deadline_on_every_replica_NP_D1(redis_url: str,
                                                                                 monkeypatch) -> None:
    """NP-D1, one timeout a decision: a seat asked in a card window (20 s) that chats goes in
    behind the window's slots, the others' held answers written out ahead of it by another
    replica (`write_out.lua`). The chat answers nothing, so the seat is still asked the same
    window, on the same clock, as both replicas and a fold from the store (a restarted
    dispatcher's) show it: the turn clocks read the chat's kind from the command its stored
    event carries. The chat used to restart the seat's clock; the seat's answer ends it."""
    from famiglia.eventstore import envelopes as stamping
    from famiglia.matchstate import MatchState

    wall = [1_700_000_000.0]
    monkeypatch.setattr(stamping, "time", type("Clock", (), {"time": staticmethod(lambda: wall[0])}))
    one_store, two_store = RedisEventStore.connect(redis_url), RedisEventStore.connect(redis_url)
    try:
        one = bootstrap(store=one_store, settings=SETTINGS)
        created, window = _window_of_every_seat(one, 4)
        match_id, tokens = created.match_id, created.seat_tokens
        answering, chatter = window.seats[:-1], window.seats[-1]
        opened = one_store.read(match_id)[-1].timestamp.ToMilliseconds()  # the command that opened it
        deadline = one.get_view(match_id, one.viewer(match_id, tokens[chatter])).deadline_ms
        assert deadline == opened + 20_000  # NP-D5's 20 s, from the window's opening
        two = bootstrap(store=two_store, settings=SETTINGS)
        for seat in answering:
            wall[0] += 3.0
            assert _pass(one, match_id, tokens[seat], f"answer-{seat}").held
        wall[0] += 4.0
        assert not _chat(two, match_id, tokens[chatter], "chat-1", [answering[0]]).held
        for replica in (one, two):
            viewer = replica.viewer(match_id, tokens[chatter])
            assert replica.get_view(match_id, viewer).deadline_ms == deadline
            assert replica.legal_commands(match_id, viewer).deadline_ms == deadline
        fresh = MatchState.from_envelopes(one.registry, one_store.read(match_id), clocks=True)
        assert {s: round(t * 1000) for s, t in fresh.deadlines().items()} == {chatter: deadline}
        wall[0] += 1.0
        assert not _pass(two, match_id, tokens[chatter], "answer-last").held  # the window's last answer
        m = two.matches.get(match_id).match
        asked = [p.timeout_seconds for p in m.engine.pending(m.state) if p.seat == chatter and p.timeout_seconds > 0]
        expected = round(wall[0] * 1000 + asked[0] * 1000) if asked else 0  # asked anew, or not at all
        assert two.get_view(match_id, two.viewer(match_id, tokens[chatter])).deadline_ms == expected
    finally:
        one_store.close()
        two_store.close()
