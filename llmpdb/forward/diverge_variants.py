"""The second run of ``diverge``: what ``--vs SETTING`` changes, and putting everything back afterwards.

Usage::

    setting = parse_setting("dtype=bf16")          # Setting("dtype", torch.bfloat16, "dtype=bfloat16")
    copy, cost = dtype_copy(model, torch.bfloat16)  # a cast deep copy; the user's model is never touched
    cast_floats(inputs, torch.bfloat16)             # new containers with floating tensors cast
    copy, cost, notes = checkpoint_copy(model, "ckpt/")  # a deep copy with a checkpoint's weights loaded
    with attn_implementation(model, "eager"):       # config switched, restored in a finally
        model(**inputs)
    with same_randomness(torch) as reset:           # RNG saved; reset() before each run; restored at the end
        model(**inputs); reset(); copy(**inputs)

``dtype=X`` never casts the user's model and back (that would change the weights' precision): it builds a
deep copy whose floating parameters and buffers are created in ``X`` directly (the copy never exists at
the old precision), after checking that the device has room for it. ``attn_implementation=X`` uses the
transformers API ``set_attn_implementation`` where the model has it (else the config's
``_attn_implementation``) and restores every config's stored value afterwards, however the run ends.
``ckpt=PATH`` loads a checkpoint (a ``.safetensors`` file, a ``torch.save`` pickle, a sharded folder or an
index) into a deep copy, after ``read_checkpoint`` vetted it (no pickle that runs code, no FIFO, no zip
bomb) and its shapes matched the model's; pickles load with ``weights_only=True``.
"""

from __future__ import annotations

import copy
import os
import sys
from collections import UserDict
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ..inspect.checkpoint import CheckpointError, find_state_dict, read_checkpoint
from ..inspect.kinds import instance_dict, is_hf, library_method, module_attr, stored
from ..inspect.safe import is_tensor, safe_getattr
from ..units import human_bytes

__all__ = ["Setting", "SettingError", "parse_setting", "dtype_copy", "cast_floats", "attn_implementation",
           "same_randomness", "free_bytes", "dropout_note", "DTYPE_NAMES", "checkpoint_copy", "kept_buffers"]

DTYPE_NAMES = {"float32": "float32", "fp32": "float32", "f32": "float32", "float": "float32",
               "bfloat16": "bfloat16", "bf16": "bfloat16", "float16": "float16", "fp16": "float16",
               "f16": "float16", "half": "float16", "float64": "float64", "fp64": "float64", "f64": "float64",
               "double": "float64"}
ATTN_KEYS = ("attn_implementation", "attn")


class SettingError(ValueError):
    """A ``--vs`` value that names no known change."""


@dataclass(frozen=True)
class Setting:
    kind: str      # "dtype", "attn", "ckpt" or "model"
    value: Any     # a torch dtype, an implementation name, a checkpoint path, or the other model's expression
    text: str


def parse_setting(text: str) -> Setting:
    """Usage: ``parse_setting("attn_implementation=eager")``; ``KEY=VALUE`` or an expression (another model)."""
    text = (text or "").strip()
    if not text:
        raise SettingError("--vs needs a SETTING: dtype=bfloat16, attn_implementation=eager or a model")
    key, sep, value = text.partition("=")
    key, value = key.strip(), value.strip()
    if sep and key.isidentifier() and not value.startswith("="):
        if key == "dtype":
            name = DTYPE_NAMES.get(value.lower().removeprefix("torch."))
            if name is None:
                raise SettingError(f"unknown dtype {value!r} (one of float32, bfloat16, float16, float64)")
            return Setting("dtype", getattr(sys.modules["torch"], name), f"dtype={name}")
        if key in ATTN_KEYS:
            if not value.replace("_", "").replace("-", "").replace("/", "").isalnum():
                raise SettingError(f"bad attention implementation {value!r} (eager, sdpa, flash_attention_2...)")
            return Setting("attn", value.strip("'\""), f"attn_implementation={value.strip(chr(39) + chr(34))}")
        if key == "ckpt":
            path = value.strip("'\"")
            if not path:
                raise SettingError("ckpt= needs a path (a .safetensors file, a torch.save file or a folder)")
            return Setting("ckpt", path, f"ckpt={path}")
        raise SettingError(f"unknown setting {key!r} (dtype=X, attn_implementation=X, ckpt=PATH, or an "
                           "expression giving a second model)")
    return Setting("model", text, text)


def _memory_available() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def free_bytes(device) -> int | None:
    """Usage: ``free_bytes(param.device)``; bytes free on that device (None when unknown)."""
    if str(safe_getattr(device, "type", "cpu")) == "cuda":
        try:
            return int(sys.modules["torch"].cuda.mem_get_info(device)[0])
        except Exception:  # an unusable device answer: unknown
            return None
    if str(safe_getattr(device, "type", "cpu")) == "cpu":
        return _memory_available()
    return None


def _tensors_of(model) -> list:
    """Every distinct parameter and buffer of ``model`` (tied weights once)."""
    seen, out = set(), []
    for t in list(model.parameters()) + list(model.buffers()):
        if id(t) not in seen:
            seen.add(id(t))
            out.append(t)
    return out


def dtype_copy(model, dtype) -> tuple[object, int]:
    """Usage: ``copy, nbytes = dtype_copy(model, torch.bfloat16)``; a deep copy with every floating parameter
    and buffer in ``dtype`` (others copied as they are). Raises ``MemoryError`` when the device lacks room."""
    torch = sys.modules["torch"]
    tensors = _tensors_of(model)
    item = torch.empty((), dtype=dtype).element_size()
    cost = sum(int(t.numel()) * (item if t.is_floating_point() else int(t.element_size())) for t in tensors)
    device = tensors[0].device if tensors else None
    free = free_bytes(device) if device is not None else None
    if free is not None and cost > 0.8 * free:
        raise MemoryError(f"a {str(dtype).replace('torch.', '')} copy of the model needs {human_bytes(cost)}; "
                          f"only {human_bytes(free)} free on {device}")
    memo: dict[int, Any] = {}
    with torch.no_grad():
        for t in tensors:
            if not t.is_floating_point():
                continue
            cast = t.detach().to(dtype=dtype, copy=True)
            if isinstance(t, torch.nn.Parameter):
                cast = torch.nn.Parameter(cast, requires_grad=t.requires_grad)
            memo[id(t)] = cast
    return copy.deepcopy(model, memo), cost


def _load_file(path: str, device, nested: str | None) -> dict:
    torch = sys.modules["torch"]
    if path.endswith(".safetensors"):
        from safetensors.torch import load_file
        return load_file(path, device=str(device))
    loaded = torch.load(path, weights_only=True, map_location=device)
    return find_state_dict(loaded, os.path.basename(path))[0]


def checkpoint_copy(model, path: str) -> tuple[object, int, list[str]]:
    """Usage: ``copy, nbytes, notes = checkpoint_copy(model, "ckpt/")``; a deep copy of ``model`` with the
    checkpoint's tensors copied into it (cast to the model's dtypes). Raises ``SettingError`` with one line
    for a checkpoint that cannot be read, does not fit the model's shapes, or would not fit in memory."""
    try:
        info = read_checkpoint(path)
    except CheckpointError as exc:
        raise SettingError(str(exc)) from None
    own = {k: (tuple(v.shape), v) for k, v in model.state_dict().items()}
    wrong = [k for k, meta in info.tensors.items() if k in own and tuple(meta.shape) != own[k][0]]
    if wrong:
        k = wrong[0]
        raise SettingError(f"{path}: {len(wrong)} tensor(s) of another shape than the model's, e.g. {k} "
                           f"{tuple(info.tensors[k].shape)} vs {own[k][0]}")
    shared = [k for k in info.tensors if k in own]
    if not shared:
        raise SettingError(f"{path}: no tensor name in common with the model (first: {next(iter(info.tensors), '?')})")
    tensors = _tensors_of(model)
    cost = sum(int(t.numel()) * int(t.element_size()) for t in tensors)
    device = tensors[0].device if tensors else "cpu"
    free = free_bytes(device)
    if free is not None and cost > 0.8 * free:
        raise SettingError(f"a copy of the model for {path} needs {human_bytes(cost)}; only {human_bytes(free)} free")
    notes = list(info.notes)
    missing = [k for k in own if k not in info.tensors]
    if missing:
        notes.append(f"{len(missing)} model tensor(s) not in {os.path.basename(path.rstrip(os.sep))} keep the "
                     f"model's values (e.g. {missing[0]})")
    extra = [k for k in info.tensors if k not in own]
    if extra:
        notes.append(f"{len(extra)} checkpoint tensor(s) the model does not have were ignored (e.g. {extra[0]})")
    cast = sorted({f"{info.tensors[k].dtype} → {str(own[k][1].dtype).removeprefix('torch.')}" for k in shared
                   if info.tensors[k].dtype != str(own[k][1].dtype).removeprefix("torch.")})
    if cast:
        notes.append(f"checkpoint tensors cast to the model's dtypes ({', '.join(cast)})")
    twin = copy.deepcopy(model)
    try:
        with sys.modules["torch"].no_grad():
            for file in info.files:
                twin.load_state_dict(_load_file(file, device, info.nested_under), strict=False)
    except Exception as exc:
        raise SettingError(f"{path}: cannot load: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}") from None
    return twin, cost, notes


def cast_floats(value: Any, dtype, depth: int = 3) -> Any:
    """Usage: ``cast_floats(inputs, torch.bfloat16)``; floating tensors cast, containers rebuilt (a dict
    subclass or ``UserDict`` as a shallow copy), everything else the same object. The original is unchanged."""
    if is_tensor(value):
        return value.to(dtype) if value.is_floating_point() else value
    if depth <= 0:
        return value
    cls = type(value)
    if cls in (tuple, list):
        return cls(cast_floats(v, dtype, depth - 1) for v in value)
    if issubclass(cls, dict):
        items = {k: cast_floats(v, dtype, depth - 1) for k, v in dict.items(value)}
        if cls is dict:
            return items
        new = copy.copy(value)
        for k, v in items.items():
            dict.__setitem__(new, k, v)
        return new
    if issubclass(cls, UserDict):
        data = stored(value, "data", None)
        if type(data) is not dict:
            return value
        new = copy.copy(value)
        instance_dict(new)["data"] = {k: cast_floats(v, dtype, depth - 1) for k, v in data.items()}
        return new
    return value


def _configs(model) -> list:
    found, seen = [], set()
    for module in model.modules():
        config = module_attr(module, "config", None)
        stack = [config]
        while stack:
            cfg = stack.pop()
            if cfg is None or id(cfg) in seen or not is_hf(cfg, "PretrainedConfig", "PreTrainedConfig"):
                continue
            seen.add(id(cfg))
            found.append(cfg)
            for key in stored(cfg, "sub_configs", None) or getattr(type(cfg), "sub_configs", {}) or {}:
                stack.append(instance_dict(cfg).get(key))
    return found


def current_attn(model) -> str | None:
    """The root config's stored attention implementation (``sdpa``), read from its instance dict."""
    config = module_attr(model, "config", None)
    return instance_dict(config).get("_attn_implementation_internal") if config is not None else None


@contextmanager
def attn_implementation(model, name: str):
    """Switch the model's attention implementation for the block; every config's stored value comes back."""
    configs = _configs(model)
    if not configs:
        raise SettingError(f"{type(model).__name__} has no transformers config: attn_implementation cannot be set")
    saved = [(cfg, dict.copy(instance_dict(cfg))) for cfg in configs]
    keys = ("_attn_implementation_internal", "_attn_implementation")
    try:
        setter = library_method(model, "set_attn_implementation")
        try:
            if setter is not None:
                setter(name)
            else:
                configs[0]._attn_implementation = name
        except Exception as exc:
            first = (str(exc).strip().splitlines() or [""])[0][:200]
            raise SettingError(f"attn_implementation={name} refused: {type(exc).__name__}: {first}") from None
        if current_attn(model) != name:
            raise SettingError(f"{type(model).__name__} kept attn_implementation={current_attn(model)!r}: it cannot "
                               f"switch to {name!r} at runtime")
        yield
    finally:
        for cfg, before in saved:
            own = instance_dict(cfg)
            for key in keys:
                if key in before:
                    own[key] = before[key]
                else:
                    own.pop(key, None)


@contextmanager
def kept_buffers(torch, *models):
    """Buffers a run changes in place (a BatchNorm's running stats in training mode, a step counter) get
    their values back at exit; yields the list of the paths put back, filled at exit."""
    saved, seen = [], set()
    for model in models:
        for name, buf in model.named_buffers():
            if id(buf) not in seen and is_tensor(buf) and not safe_getattr(buf, "is_meta", False):
                seen.add(id(buf))
                saved.append((name, buf, buf.detach().clone()))
    restored: list[str] = []
    try:
        yield restored
    finally:
        with torch.no_grad():   # by value: batch_norm updates running stats without bumping their version
            for name, buf, value in saved:
                if not torch.equal(buf, value):
                    buf.copy_(value)
                    if name not in restored:
                        restored.append(name)


@contextmanager
def same_randomness(torch):
    """Save torch's RNG states (CPU, and CUDA when initialised); ``reset()`` goes back to them; restored at exit."""
    cpu = torch.get_rng_state()
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() and torch.cuda.is_initialized() else None

    def reset() -> None:
        torch.set_rng_state(cpu)
        if cuda is not None:
            torch.cuda.set_rng_state_all(cuda)

    try:
        yield reset
    finally:
        reset()


def dropout_note(model) -> str | None:
    """A warning when the model is in training mode with dropout (a ``Dropout`` module, or a config's
    ``*dropout`` value > 0): both runs start from the same RNG state, so their masks match only while they
    draw random numbers alike."""
    if not module_attr(model, "training", False):
        return None
    ps = [stored(m, "p", 0) for m in model.modules() if type(m).__name__.startswith("Dropout")]
    config = module_attr(model, "config", None)
    ps += [v for k, v in instance_dict(config).items() if str(k).endswith("dropout")] if config is not None else []
    ps = [p for p in ps if type(p) in (float, int) and p > 0]
    if not ps:
        return "the model is in training mode (no dropout > 0 found)"
    return (f"the model is in training mode with dropout (p up to {max(ps)}): both runs start from the same RNG "
            "state, so masks match only while both draw random numbers alike")
