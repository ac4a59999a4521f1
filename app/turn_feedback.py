"""What the environment told an agent between two turns, read from the prompts it stored (pure).

A multi-turn task's transition builds each agent's next prompt from the item, the agent's previous
reply and the environment's feedback (``engine.tasks.transitions.revise_with_feedback``: *Your previous
answer: … Feedback: … Write an improved answer.*). Transcripts store only the prompts, so the feedback
is the part of the next prompt that is new: what follows the agent's previous reply where the prompt
quotes it on lines of its own, else what follows the whole lines the two prompts share.
"""

from __future__ import annotations

import os


def quoted_end(prompt: str, reply: str, start: int) -> int | None:
    """Where the first quote of ``reply`` in ``prompt`` at or after ``start`` ends, counting only quotes
    that stand on lines of their own, spaces aside (so a short reply is not found inside a word); None
    without one. The first, not the last: feedback that quotes a line of the reply again (a traceback
    of a one-line reply) is feedback."""
    if not reply:
        return None
    position = prompt.find(reply, start)
    while position != -1:
        end = position + len(reply)
        line_start = prompt.rfind("\n", 0, position) + 1
        if not prompt[line_start:position].strip() and not prompt[end:].split("\n", 1)[0].strip():
            return end
        position = prompt.find(reply, position + 1)
    return None


def shared_lines(previous_prompt: str, prompt: str) -> int:
    """How much of ``prompt`` repeats ``previous_prompt``: their common start, cut back to a line's start
    unless it is the whole previous prompt (so a line that changed is shown whole, never from mid-word)."""
    shared = len(os.path.commonprefix([previous_prompt, prompt]))
    if shared == len(previous_prompt):
        return shared
    return prompt.rfind("\n", 0, shared) + 1


def feedback_between(previous_prompt: str, previous_reply: str, prompt: str) -> str:
    """The environment's text between a turn (its prompt and the agent's reply) and the agent's next
    prompt; empty when the next prompt adds nothing."""
    shared = shared_lines(previous_prompt, prompt)
    end = quoted_end(prompt, previous_reply.strip(), shared)
    new = prompt[end:] if end is not None else prompt[shared:]
    return new.strip()
