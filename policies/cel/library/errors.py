"""The one error type every library function raises for a CEL runtime error.

The message is the text cel-go would put in its error value (for example ``"integer overflow"`` or
``"index out of range: 7"``), so callers can show it unchanged or wrap it with the selector's name.
"""

from __future__ import annotations


class CELEvalError(Exception):
    """A runtime error inside a CEL function call; ``str(err)`` is cel-go's wording."""
