"""Gradients of a model's parameters: norm, ``None``, frozen, NaN/Inf; grouped by layer.

Usage::

    report = grad_report(model)                  # every parameter
    report = grad_report(model, "layers.1")      # a dotted part, a suffix or a glob (``*proj.weight``)
    report.groups                                # [("model.layers.0", [ParamGrad, ...]), ...]
    report.trainable, report.frozen, report.no_grad_yet, report.bad

The norms read gradient values (the user asked for them): one ``vector_norm`` per gradient, computed in
float32 on the gradient's device; NaN and Inf are counted only where the norm is not finite. Parameter
values are never read. A parameter shared by several modules is listed once, under its first name.
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass, field
from fnmatch import fnmatchcase

from .shape_summary import tensor_shape

__all__ = ["ParamGrad", "GradReport", "grad_report", "layer_of", "param_matches"]

_LAYER = re.compile(r"^(.*?\.\d+)(?:\.|$)")


@dataclass(frozen=True)
class ParamGrad:
    """One parameter: ``status`` is ``ok``, ``none`` (no grad yet), ``frozen`` or ``bad`` (NaN/Inf)."""

    name: str
    shape: str
    status: str
    norm: float | None = None
    nan: int = 0
    inf: int = 0


@dataclass
class GradReport:
    groups: list[tuple[str, list[ParamGrad]]] = field(default_factory=list)

    def _count(self, *statuses: str) -> int:
        return sum(1 for _, params in self.groups for p in params if p.status in statuses)

    @property
    def trainable(self) -> int:
        return self._count("ok", "none", "bad")

    @property
    def frozen(self) -> int:
        return self._count("frozen")

    @property
    def no_grad_yet(self) -> int:
        return self._count("none")

    @property
    def bad(self) -> int:
        return self._count("bad")

    @property
    def total_norm(self) -> float | None:
        norms = [p.norm for _, params in self.groups for p in params if p.norm is not None]
        return math.sqrt(sum(n * n for n in norms)) if norms else None


def layer_of(name: str) -> str:
    """Usage: ``layer_of("model.layers.0.mlp.up_proj.weight")`` -> ``"model.layers.0"``; else the module."""
    match = _LAYER.match(name)
    if match:
        return match.group(1)
    return name.rpartition(".")[0] or name


def param_matches(pattern: str, name: str) -> bool:
    """Usage: ``param_matches("layers.1", "model.layers.1.mlp.up_proj.weight")`` -> True."""
    return any(fnmatchcase(name, p) for p in (pattern, f"*.{pattern}", f"{pattern}.*", f"*.{pattern}.*"))


def _grad_of(param) -> ParamGrad | tuple:
    torch = sys.modules["torch"]
    grad = param.grad
    if grad is None:
        return ("none", None, 0, 0)
    norm = float(torch.linalg.vector_norm(grad.detach(), dtype=torch.float32))
    if math.isfinite(norm):
        return ("ok", norm, 0, 0)
    return ("bad", norm, int(torch.isnan(grad).sum()), int(torch.isinf(grad).sum()))


def grad_report(model, pattern: str | None = None) -> GradReport:
    """Usage: ``grad_report(model, "layers.*.mlp")``; see the module docstring."""
    report = GradReport()
    index: dict[str, list[ParamGrad]] = {}
    for name, param in model.named_parameters():
        if pattern and not param_matches(pattern, name):
            continue
        if not param.requires_grad:
            entry = ParamGrad(name, tensor_shape(param), "frozen")
        else:
            status, norm, nan, inf = _grad_of(param)
            entry = ParamGrad(name, tensor_shape(param), status, norm, nan, inf)
        group = layer_of(name)
        if group not in index:
            index[group] = []
            report.groups.append((group, index[group]))
        index[group].append(entry)
    return report
