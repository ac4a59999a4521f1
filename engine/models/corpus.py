"""A small built-in text corpus for training the tiny models' byte-level BPE tokenizers in process.

It mixes plain English about teamwork, short Python snippets, numbers and chat-style turns, so the
merges cover the kinds of prompts CoopLab's tasks produce. Any text stays encodable regardless,
because the tokenizer's alphabet holds all 256 bytes.
"""

from __future__ import annotations

_PROSE = """\
Two agents work together to solve a task. Each agent reads the prompt, writes an answer, and the
team receives one shared reward. When the first agent writes a helper function, the second agent
can call it. Good teams split the work, check each other, and finish on time.
The quick brown fox jumps over the lazy dog. A short story has a beginning, a middle and an end.
Write a summary of the article in two sentences. Make the second answer longer than the first.
Please explain the reason step by step, then give the final answer on its own line.
The weather is sunny today, and the river is calm. We walked to the market and bought apples,
bread, cheese and tea. The teacher asked the students to count from one to twenty.
Cooperation means sharing information, dividing labour, and trusting the partner to do its part.
A reviewer reads the draft and suggests improvements; the writer revises the text and tries again.
Question: what is the capital of France? Answer: Paris. Question: how many legs has a spider?
Answer: eight. Question: which number is larger, seven or nine? Answer: nine.
"""

_CODE = """\
def add(a, b):
    return a + b

def is_even(n: int) -> bool:
    \"\"\"Return True when n is even.\"\"\"
    return n % 2 == 0

def aux(values):
    total = 0
    for value in values:
        total += value
    return total

def main(values: list[int]) -> float:
    if not values:
        return 0.0
    return aux(values) / len(values)

class Counter:
    def __init__(self):
        self.count = 0

    def step(self):
        self.count += 1
        return self.count

import math
from typing import List
print(sorted([3, 1, 2]), len("hello"), math.sqrt(16))
assert add(2, 3) == 5
result = [x * x for x in range(10) if x % 3 != 0]
"""

_CHAT = """\
<|im_start|>system
You are a helpful assistant.<|im_end|>
<|im_start|>user
Hello! Can you help me write a function?<|im_end|>
<|im_start|>assistant
Of course. Here is a function that returns the sum of a list.<|im_end|>
"""


def tiny_corpus() -> list[str]:
    """The lines of the built-in corpus, plus numbers and the alphabet so digits and letters merge."""
    numbers = " ".join(str(i) for i in range(200))
    letters = " ".join("abcdefghijklmnopqrstuvwxyz") + " " + " ".join("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
    text = _PROSE + _CODE + _CHAT
    return [line for line in text.splitlines() if line.strip()] + [numbers, letters]
