"""The paper's in-context prompt formats, and their encoding into token ids.

Modules: ``config`` ([`PromptConfig`][interp.prompts.config.PromptConfig]: protocol, shots, template), ``templates`` (the
wording: this toolkit's and the paper's, verbatim), ``render`` (examples -> [`Prompt`][interp.prompts.render.Prompt]
text), ``encode`` (-> [`EncodedPrompt`][interp.prompts.encode.EncodedPrompt] ids, items of any number of tokens), ``answer_rule`` (what counts as
a correct answer under each protocol, for teacher forcing and for generation), ``layout``
(where each item, query and answer sits among the tokens).
"""

from interp.prompts.config import (ALL_TEMPLATES, DEFAULT_DEMO_LENGTH, PAPER_TEMPLATES, PROTOCOLS, TEMPLATES, PromptConfig, Protocol,
                     Template)
from interp.prompts.answer_rule import AnswerEnd, AnswerRule, answer_rule, first_tokens
from interp.prompts.encode import EncodedPrompt, bos_ids, encode_prompt, encode_prompts, prompt_rule, token_index_of_chars
from interp.prompts.layout import PromptLayout, prompt_layout
from interp.prompts.render import Prompt, build_prompt, build_prompts, render_line
from interp.prompts.templates import RULES

__all__ = [
    "ALL_TEMPLATES", "DEFAULT_DEMO_LENGTH", "PAPER_TEMPLATES", "PROTOCOLS", "RULES", "TEMPLATES", "AnswerEnd", "AnswerRule",
    "EncodedPrompt", "Prompt", "PromptConfig", "PromptLayout", "Protocol", "Template", "answer_rule", "bos_ids",
    "build_prompt", "build_prompts", "encode_prompt", "encode_prompts", "first_tokens", "prompt_layout", "prompt_rule",
    "render_line", "token_index_of_chars",
]
