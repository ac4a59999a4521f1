"""Reusable transitions with CoMLRL's keyword-only signature."""

from __future__ import annotations

import pytest

from engine.tasks import TaskError
from engine.tasks.transitions import alternate_roles, revise_with_feedback, role_for_turn


def call(transition, completions, histories=None):
    n = len(completions)
    return transition(
        prompt="Add two numbers.",
        agent_completions=completions,
        num_agents=n,
        prompt_history_per_agent=histories or [["Add two numbers."]] * n,
        response_history_per_agent=[[c] for c in completions],
    )


def test_revise_with_feedback_uses_each_agents_own_answer_and_feedback():
    seen = []

    def feedback(*, prompt, completion, agent_index, turn, agent_completions):
        seen.append((prompt, completion, agent_index, turn, tuple(agent_completions)))
        return f"agent {agent_index}: {len(completion)} chars"

    transition = revise_with_feedback(feedback, template="{original}|{previous}|{feedback}|{turn}")
    prompts = call(transition, ["1+1", "def add(a, b): return a + b"])
    assert prompts == [
        "Add two numbers.|1+1|agent 0: 3 chars|2",
        "Add two numbers.|def add(a, b): return a + b|agent 1: 27 chars|2",
    ]
    assert seen[0] == ("Add two numbers.", "1+1", 0, 1, ("1+1", "def add(a, b): return a + b"))


def test_revise_without_feedback_asks_generically_and_can_drop_the_original():
    transition = revise_with_feedback(include_original=False)
    (prompt,) = call(transition, ["draft"])
    assert "draft" in prompt and "Check your answer" in prompt
    assert not prompt.startswith("Add two numbers.")


def test_revise_with_original_per_agent():
    transition = revise_with_feedback(original=lambda prompt, agent: f"[role {agent}] {prompt}", template="{original}")
    assert call(transition, ["a", "b"]) == ["[role 0] Add two numbers.", "[role 1] Add two numbers."]


def test_alternate_roles_single_agent_switches_every_turn():
    transition = alternate_roles(["writer", "critic"], role_templates=["W:{previous}:{turn}", "C:{previous}:{turn}"])
    # after turn 1 (writer) the agent becomes the critic, after turn 2 the writer again
    assert call(transition, ["draft"], histories=[["p1"]]) == ["C:draft:2"]
    assert call(transition, ["critique"], histories=[["p1", "p2"]]) == ["W:critique:3"]


def test_alternate_roles_two_agents_swap_and_see_the_partner():
    transition = alternate_roles(["writer", "critic"], role_templates=["W:{previous}", "C:{previous}"])
    # turn 1: agent 0 writer, agent 1 critic; turn 2: swapped, each sees the other's reply
    assert call(transition, ["text", "notes"]) == ["C:notes", "W:text"]
    assert [role_for_turn(i, 2, 2) for i in range(2)] == [1, 0]


def test_transition_factories_reject_bad_setup():
    with pytest.raises(TaskError, match="at least two roles"):
        alternate_roles(["solo"])
    with pytest.raises(TaskError, match="template field"):
        revise_with_feedback(template="{oops}")
    with pytest.raises(TaskError, match="2 role templates for 3 roles"):
        alternate_roles(["a", "b", "c"], role_templates=["{previous}", "{previous}"])
    with pytest.raises(TaskError, match="got 1 completions for 2 agents"):
        revise_with_feedback()(prompt="p", agent_completions=["x"], num_agents=2)
