"""What a table's talk may hold, free of I/O: one set of checks for match chat (the command
service's, `services.command.chat`) and for a game whose engine carries the talk as a command
(Nothing Personal's `send_chat`, NP-M7), since both are shown to the other seats alike."""

from __future__ import annotations

import unicodedata

_INVISIBLE = frozenset({"Cf", "Zs", "Zl", "Zp", "Mn", "Me"})
"""Unicode categories that show nothing on their own (format characters such as U+200B,
U+FEFF or U+180E, spaces, combining marks): a message of nothing else looks empty."""

BLANK_FILLERS = frozenset("\u115f\u1160\u3164\uffa0\u2800\U0001d159")
"""Letters and symbols that show nothing, though their categories say they are visible: the
Hangul fillers U+115F, U+1160, U+3164 and U+FFA0 (Lo; a jamo sequence's placeholders, kept in
Korean text), the Braille blank U+2800 and the musical null notehead U+1D159 (So). Used to pass
for a name or a message that looks empty; here they count as invisible, so a message of nothing
else shows nothing, while a message with them among visible text stays as sent."""

REORDERING = frozenset(chr(c) for c in (*range(0x202A, 0x202F), *range(0x2066, 0x2070), *range(0xFFF9, 0xFFFC)))
"""Format characters that change how the text after them shows, past the message's own end on a
client that lays it out on a line with other text: the explicit directional embeddings, overrides
and isolates (U+202A-U+202E, U+2066-U+2069; UAX #9), whose scope an unclosed one carries over the
next sender's name and words (an RLO shows them reversed); the deprecated shaping and swapping
switches (U+206A-U+206F), each on until its opposite; and the interlinear annotation marks
(U+FFF9-U+FFFB), which may hide what they enclose. The other format characters stay: the zero
width joiners (emoji sequences, Persian and Indic spelling), the direction marks U+200E, U+200F
and U+061C (a writer's way of setting a number or a word in Hebrew or Arabic text: they open no
scope), the soft hyphen, the word joiner, the tags of a subdivision's flag."""


def shows_nothing(text: str) -> bool:
    """Whether `text` is blank to a reader: spaces, newlines, invisible characters and
    `BLANK_FILLERS` only (or nothing at all)."""
    return all(c in BLANK_FILLERS or c == "\n" or unicodedata.category(c) in _INVISIBLE for c in text)


def unshowable(text: str, what: str = "a chat message", *, lines: bool = True) -> str:
    """Why `text` may not be shown as it is (`what` names it in the answer), or "" when it may:
    a control character but newline (a lone carriage return, an escape or a NUL would let one
    message rewrite another's line on a terminal, or not be storable), a character of `REORDERING`
    (refused, not stripped, so the text shown is the text sent and its sender is told), or a lone
    surrogate (no character: not UTF-8; gRPC refuses it before, a caller in process may not).
    `lines=False`: one line (a name), a newline refused too, and the line and paragraph
    separators U+2028 and U+2029, which a client lays out as one."""
    if text.isprintable():  # cheap: most messages are printable all through
        return ""
    for char in text:
        category = unicodedata.category(char)
        if (char != "\n" or not lines) and category == "Cc":
            allowed = " (newline is the only one allowed)" if lines else ""
            return f"{what} may not hold the control character U+{ord(char):04X}{allowed}"
        if not lines and category in ("Zl", "Zp"):
            return f"{what} is one line: it may not hold the line or paragraph separator U+{ord(char):04X}"
        if "\ud800" <= char <= "\udfff":
            return f"{what} may not hold the lone surrogate U+{ord(char):04X} (no character: the text is not UTF-8)"
        if char in REORDERING:
            return (f"{what} may not hold U+{ord(char):04X}, which changes how the text after it shows "
                    "(other messages, names): U+200E and U+200F mark a direction without that")
    return ""
