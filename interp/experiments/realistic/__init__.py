"""Realistic copying tasks of the paper: Lorem Ipsum echoing (where do copies go wrong?) and git
commit histories listed in written or reversed order (does reversing hurt?)."""

from interp.experiments.realistic.alignment import ambiguous_positions, base_rate, edit_transitions, needleman_wunsch, transition_index
from interp.experiments.realistic.git_history import GIT_TASKS, GitConfig, GitRow, History, evaluate_git, expected_lines, git_prompt, run_git
from interp.experiments.realistic.lorem import CopyResult, LoremConfig, LoremSummary, analyse_copy, echo_prompt, lorem_paragraphs, run_lorem

__all__ = [
    "ambiguous_positions", "base_rate", "edit_transitions", "needleman_wunsch", "transition_index",
    "GIT_TASKS", "GitConfig", "GitRow", "History", "evaluate_git", "expected_lines", "git_prompt", "run_git",
    "CopyResult", "LoremConfig", "LoremSummary", "analyse_copy", "echo_prompt", "lorem_paragraphs", "run_lorem",
]
