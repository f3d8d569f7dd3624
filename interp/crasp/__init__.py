"""C-RASP[pos]: a small interpreter, and the programs behind the paper's theory table.

C-RASP[pos] is C-RASP (Yang & Chiang, 2024) with the positional information of Huang et al.
(2025), who call it C-RASP[periodic, local]. The definition followed here is Definition 3 of
Jobanputra et al. (arXiv 2505.21785, App. A.1). A program is a sequence of operations, each
defining a vector over positions ``i = 1..n`` of the input:

Boolean-valued                                  Count-valued
  initial      Q_a(i): symbol i is a              counting     #[j <= i, psi(i, j)] P(j)
  Boolean      not P(i),  P1(i) and P2(i)         conditional  P(i) ? C1(i) : C2(i)
  constant     true                               addition     C1(i) + C2(i)
  positional   phi(i), phi periodic in i          subtraction  C1(i) - C2(i)
  comparison   C1(i) <= C2(i)                     constant     1

``psi`` is either "always" or a relation that depends only on ``i - j`` and holds at boundedly
many distances ([`Distance`][interp.crasp.operations.Distance]; the key example is ``j = i - 1``, "the previous position").
A task is expressible when a program defines ``NEXT_a(i)`` for every symbol ``a`` so that at each
output position exactly the correct next symbol holds; generation stops when none holds.

Everything is vectorised over a batch: Boolean vectors are ``Bool[Tensor, "batch pos"]``, counts
``Int[Tensor, "batch pos"]``. A *family* ``{F_a : a in A}`` of Boolean vectors with at most one
member true per position (the symbols ``Q_a``, "the previous symbol is a", ...) is a
[`Symbols`][interp.crasp.operations.Symbols], stored as the index of the true member. Programs that range over every symbol,
such as the paper's "for each bigram ab", are finite disjunctions of C-RASP operations; the
evaluator computes them at once instead of materialising ``|A|^2`` vectors (see [`lookup`][interp.crasp.operations.lookup]).

Sequences are ``<bos> context <sep> query`` for retrieval and ``<bos> string <sep> output...``
for copying, as in the paper's proofs (Lemma 7 retrieves "the symbol that had followed <bos>").
"""

from interp.crasp.operations import (PREVIOUS, Distance, Symbols, buckets, choose, conditional, conj, count, decode_argmax,
                         decode_next, disj, eq, exists, ge, initial, le, lookup, negate, one, periodic, restrict,
                         symbols, true, with_member)
from interp.crasp.programs import (PAPER_LEMMA, PROGRAMS, Program, ProgramFn, bound_needed, bounded_copy, bounded_last,
                       bounded_program, not_expressible_reason, program_for)
from interp.crasp.running import accuracy, exact_match, generate, run_program, teacher_forced
from interp.crasp.vocabulary import AMBIGUOUS, BOS, NONE, SEP, STOP, Vocabulary, encode, encode_batch

__all__ = [
    "AMBIGUOUS", "BOS", "Distance", "NONE", "PAPER_LEMMA", "PREVIOUS", "PROGRAMS", "Program", "ProgramFn", "SEP", "STOP",
    "Symbols", "Vocabulary", "accuracy", "bound_needed", "bounded_copy", "bounded_last",
    "bounded_program", "buckets", "choose", "conditional", "conj", "count", "decode_argmax", "decode_next",
    "disj", "encode", "encode_batch", "eq", "exact_match", "exists", "ge", "generate", "initial", "le",
    "lookup", "negate", "not_expressible_reason", "one", "periodic", "program_for", "restrict", "run_program",
    "symbols", "teacher_forced", "true", "with_member",
]
