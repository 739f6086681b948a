"""The API server's validation rules for DRA objects, offline and pure.

``validate(obj, old=None, *, namespace_labels=None)`` returns :class:`FieldError` values whose
``str()`` is the line ``kubectl apply`` would print.
"""

from policies.validation.fielderrors import ErrorType, FieldError, Path, render
from policies.validation.validate import validate

__all__ = ["ErrorType", "FieldError", "Path", "render", "validate"]
