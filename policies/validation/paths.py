"""Paths inside a volume or on the host, checked as ``pkg/apis/core/validation`` checks them
(``validatePathNoBacksteps``, ``validateLocalDescendingPath``, ``ValidateLocalNonReservedPath``)."""

from __future__ import annotations

from policies.validation.fielderrors import ErrorList, Path, invalid


def no_backsteps(target: str, path: Path) -> ErrorList:
    """No ``..`` element (one error, however many there are)."""
    if ".." in target.replace("\\", "/").split("/"):
        return [invalid(path, target, "must not contain '..'")]
    return []


def relative_no_backsteps(target: str, path: Path) -> ErrorList:
    """validateLocalDescendingPath: relative, without ``..``."""
    errs = [invalid(path, target, "must be a relative path")] if target.startswith("/") else []
    return errs + no_backsteps(target, path)


def local_non_reserved(target: str, path: Path) -> ErrorList:
    """ValidateLocalNonReservedPath: relative, without ``..``, not starting with ``..``."""
    errs = relative_no_backsteps(target, path)
    if target.startswith("..") and not target.startswith("../"):
        errs.append(invalid(path, target, "must not start with '..'"))
    return errs
