"""One-line reasons why a weights file (checkpoint, adapter, model ``.bin``) could not be read.

Every loader here refuses pickles that hold more than tensors (torch's ``weights_only`` loader,
or safetensors, which has no code at all); what remains is saying so in one line that names
the file, instead of torch's page-long advice to retry with ``weights_only=False``.
"""

from __future__ import annotations

import pickle

from safetensors import SafetensorError

# What torch.load, safetensors and the libraries above them raise for a file that is not sound.
READ_ERRORS: tuple[type[BaseException], ...] = (pickle.UnpicklingError, SafetensorError, EOFError, OSError)


def first_line(err: BaseException) -> str:
    """The first non-empty line of an error message (its type when it has none).

    >>> first_line(ValueError("bad header\\nmore advice"))
    'bad header'
    """
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return lines[0] if lines else type(err).__name__


def unreadable_reason(err: BaseException) -> str:
    """Why a weights file was not read, in one line.

    >>> unreadable_reason(EOFError("Ran out of input"))
    'EOFError: Ran out of input'
    """
    if isinstance(err, pickle.UnpicklingError):
        named = [line.strip() for line in str(err).splitlines() if "Unsupported" in line or "GLOBAL" in line]
        detail = named[0] if named else first_line(err)
        return f"it is a pickle holding more than tensors, refused unopened as loading it could run code ({detail})"
    if isinstance(err, SafetensorError):
        return f"it is not a complete safetensors file ({first_line(err)})"
    return f"{type(err).__name__}: {first_line(err)}"
