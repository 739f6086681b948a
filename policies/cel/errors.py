"""Errors of the DRA CEL environment, worded like cel-go and the Kubernetes DRA package.

Callers (validation, the allocator, the webhook) add the object and field path; these errors carry
only what the expression itself can tell: the column of a compile error, the device and the
missing key of a runtime error.
"""

from __future__ import annotations


class CELError(Exception):
    """Base of every error raised by policies.cel."""


class CompileError(CELError):
    """The expression does not parse or type-check in the chosen environment.

    ``column`` is 1-based like cel-go's ``<input>:line:column`` prefix (None when the error is about
    the expression as a whole, e.g. its length or its result type).
    """

    def __init__(self, message: str, column: int | None = None, line: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.column = column
        self.line = line

    def __reduce__(self) -> tuple[type[CompileError], tuple[str, int | None, int | None]]:
        # Pickled whole (the webhook compiles long selectors in a worker process), not as args[0].
        return (CompileError, (self.message, self.column, self.line))


class EvalError(CELError):
    """Evaluating an expression against one device failed; the allocator treats this as fatal.

    ``device`` is ``driver/pool/device`` when known, so that the message points at the data that
    made the selector fail (most often a missing attribute).
    """

    def __init__(self, message: str, device: str | None = None) -> None:
        super().__init__(f"device {device}: {message}" if device else message)
        self.message = message
        self.device = device
