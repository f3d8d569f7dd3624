"""The wording of prompts: this toolkit's rules, and the paper's templates verbatim.

The paper's texts (repo ``lacoco-lab/always_a_transformer``, ``retrieval/prompt_constants.py``
and the copying prompt builder) are reproduced exactly as its Python evaluates them, quirks
included, so that ``protocol="paper"`` rebuilds the prompts its figures come from:

* ``math_rule`` is one raw triple-quoted string in the paper's code, so the prompt contains the
  literal characters ``\\n"`` and ``r"`` and the source's indentation between its sentences;
* ``math_rule_explained`` is made of raw strings, so its line breaks are the two characters
  backslash and ``n``;
* ``simple_rule`` keeps the source's eight spaces of indentation on an otherwise empty line;
* the worked example of the ``*_explained`` templates counts the query in the context with
  ``context.split()``, on a context written without spaces, so it says "occurs 0 time(s)" for
  every context longer than one symbol.
"""

from __future__ import annotations

# --------------------------------------------------------------------------- this toolkit's wording

RULES = {
    "UL": "Each line lists tokens, then '|' and a query token that occurs once. Answer with the token right before the query.",
    "UR": "Each line lists tokens, then '|' and a query token that occurs once. Answer with the token right after the query.",
    "NLFirst": "Each line lists tokens, then '|' and a query token. Answer with the token right before its first occurrence.",
    "NRFirst": "Each line lists tokens, then '|' and a query token. Answer with the token right after its first occurrence.",
    "NLLast": "Each line lists tokens, then '|' and a query token. Answer with the token right before its last occurrence.",
    "NRLast": "Each line lists tokens, then '|' and a query token. Answer with the token right after its last occurrence.",
    "UF": "Copy the tokens of each line after ':' in the same order.",
    "UB": "Copy the tokens of each line after ':' in reverse order.",
    "NF": "Copy the tokens of each line after ':' in the same order.",
    "NB": "Copy the tokens of each line after ':' in reverse order.",
}

# --------------------------------------------------------------------------- the paper's retrieval templates

PAPER_RETRIEVAL_RULES = {  # (rule_simple, rule_math)
    "UL": ("The answer is the token immediately to the left of the single instance of the query token.",
           r"$t = 1$ and $x_{n+1} = x_{q_1-1}$"),
    "UR": ("The answer is the token immediately to the right of the single instance of the query token.",
           r"$t = 1$ and $x_{n+1} = x_{q_1+1}$"),
    "NLLast": ("When the query appears multiple times, the answer is the token just to the left of its last appearance.",
               r"$t > 1$ and $x_{n+1} = x_{q_t-1}$"),
    "NRLast": ("When the query appears multiple times, the answer is the token just to the right of its last appearance.",
               r"$t > 1$ and $x_{n+1} = x_{q_t+1}$"),
    "NLFirst": ("When the query appears multiple times, the answer is the token just to the left of its first appearance.",
                r"$t > 1$ and $x_{n+1} = x_{q_1-1}$"),
    "NRFirst": ("When the query appears multiple times, the answer is the token just to the right of its first appearance.",
                r"$t > 1$ and $x_{n+1} = x_{q_1+1}$"),
}

_MATH_PREAMBLE = (r"Let $X = x_1 \ldots x_n$ with $n \ge 4$ and $x_i \in \Sigma$ (token vocabulary).")
_INDENT = "\n" + " " * 8

PAPER_RETRIEVAL_TEMPLATES = {
    "simple_rule": ("Each line is written as ‘context|query: target’. The vertical bar ‘|’ separates the context "
                    "from the query token." + _INDENT + "\nAll strings below follow this rule: {rule_simple}\n\n{examples}"),
    "math_rule": (_MATH_PREAMBLE + r"  The final token $x_n$ is the query token $q$.\n" + '"' + _INDENT + 'r"'
                  + r"In the context $x_1 \ldots x_{{n-1}}$, $q$ appears $t$ times at indices $q_1, \ldots, q_t$ "
                  + r"($1 \le q_1 \le q_t \le n-1$).\n\n" + '"' + _INDENT + 'r"'
                  + r"Continuation token $x_{{n+1}}$ is defined by: {rule_math}\n\n" + '"' + _INDENT + 'r"'
                  + r"Examples:\n" + '"' + _INDENT + 'r"' + "{examples}"),
    "simple_rule_explained": ("Each line is written as context|query: target. The vertical bar | marks the query token.\n"
                              "All strings below follow this rule:\n{rule_simple}\n\nWorked example\n{explanation}\n\n"
                              "Now continue the sequence (fill in the targets):\n\n{examples}"),
    "math_rule_explained": (_MATH_PREAMBLE + " " + r"The final token $x_n$ is the query token $q$.\n"
                            + r"In the context $x_1 \ldots x_{{n-1}}$, $q$ appears $t$ times at indices "
                            + r"$q_1, \ldots, q_t$ ($1 \le q_1 \le q_t \le n-1$).\n\n"
                            + r"Continuation token $x_{{n+1}}$ is defined by:\n" + r"{rule_math}\n\n"
                            + r"Example - \n" + r"{explanation}\n\n" + r"Strings:\n\n" + r"{examples}"),
}

PAPER_EXPLANATION = ("{solved_line}\n• query token = “{query}” (everything after “|”)\n"
                     "• it occurs {occurrences} time(s) in the context\n• according to the rule → answer = “{target}”")

# --------------------------------------------------------------------------- the paper's copying templates

PAPER_COPYING_RULES = {  # (rule_simple, rule_hint)
    "forward": ("The output is exactly the same sequence as the input.", "in every example the output repeats the input unchanged."),
    "backward": ("The output is the input sequence written in reverse order.", "in every example the output is the input read backwards."),
}

PAPER_COPYING_TEMPLATES = {
    "bare": "{examples}",
    "obey": "Here are some samples of the format <bos> input : output <eos> where the rule being followed is - {rule_simple}\n\n{examples}",
    "hint": "Here are some examples where {rule_hint}\n\n{examples}",
}
