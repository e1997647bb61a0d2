"""Modules told as they are made (``ModuleBirths``, Python 3.12+): built, deep-copied, copied, unpickled.
Torch-free (a plain base class with ``__init__``/``__setstate__`` plays ``torch.nn.Module``, as torch's
module class defines both), so it runs in the core suites on 3.12 and 3.13."""

from __future__ import annotations

import copy
import gc
import pickle
import sys

import pytest

from llmpdb.forward.module_births import TOOL_NAME, ModuleBirths, can_call, existing_modules

MONITORING = getattr(sys, "monitoring", None)
needs_monitoring = pytest.mark.skipif(MONITORING is None, reason="sys.monitoring is 3.12+")


class Base:
    """Plays torch's Module: a constructor every subclass runs, ``__getstate__``/``__setstate__``, no forward
    of its own."""

    def __init__(self):
        self.children = []

    def __getstate__(self):
        return self.__dict__.copy()

    def __setstate__(self, state):
        self.__dict__.update(state)

    def forward(self, x):
        raise NotImplementedError



class Layer(Base):
    def __init__(self, width):
        super().__init__()
        self.width = width

    def forward(self, x):
        return x * self.width


class Container(Base):  # a ModuleList: holds layers, cannot be called
    def __init__(self, layers):
        super().__init__()
        self.children = list(layers)


class Model(Base):
    def __init__(self):
        super().__init__()
        self.layers = Container([Layer(2), Layer(3)])

    def forward(self, x):
        for layer in self.layers.children:
            x = layer.forward(x)
        return x


def test_which_classes_can_be_called():
    assert can_call(Layer, Base, (Container,)) and can_call(Model, Base, (Container,))
    assert not can_call(Container, Base, (Container,))  # a holder without a forward of its own
    assert can_call(Base, Base, (Container,))  # a bare module may be given a forward on the instance


@needs_monitoring
def test_built_copied_and_unpickled_modules_are_told_once_each_with_their_state_in_place():
    told = []
    births = ModuleBirths(lambda module: told.append((type(module).__name__, dict(vars(module)))))
    assert births.start(Base, (Container,))
    try:
        tool = births.tool
        assert MONITORING.get_tool(tool) == TOOL_NAME
        model = Model()
        # Base.__init__ returned: the instance attributes exist when it is told (hooks can be added)
        assert [name for name, _ in told] == ["Model", "Layer", "Layer"]  # the container is not told
        assert all("children" in state for _, state in told)
        told.clear()
        twin = copy.deepcopy(model)
        assert sorted(name for name, _ in told) == ["Layer", "Layer", "Model"]
        assert told[-1][1]["layers"] is twin.layers  # __setstate__ returned: the state is in place
        told.clear()
        pickle.loads(pickle.dumps(model))
        copy.copy(model.layers.children[0])
        assert sorted(name for name, _ in told) == ["Layer", "Layer", "Layer", "Model"]
        told.clear()
        assert model.forward(1) == 6 and told == []  # running code tells nothing
    finally:
        births.stop()
    assert MONITORING.get_tool(tool) is None and births.tool is None
    Model()
    assert told == []  # stopped: the events are off and the tool id is given back


@needs_monitoring
def test_a_failing_listener_never_reaches_the_program_and_is_reported():
    errors = []

    def broken(module):
        raise RuntimeError("listener bug")

    births = ModuleBirths(broken, errors.append)
    assert births.start(Base, (Container,))
    try:
        model = Model()  # the program goes on
    finally:
        births.stop()
    assert model.forward(1) == 6 and [str(e) for e in errors] == ["listener bug"] * 3


@needs_monitoring
def test_no_free_tool_id_means_no_watch_and_nothing_taken():
    taken = [tool for tool in (3, 4) if MONITORING.get_tool(tool) is None]
    for tool in taken:
        MONITORING.use_tool_id(tool, "someone else")
    try:
        births = ModuleBirths(lambda module: None)
        assert not births.start(Base) and births.tool is None
        births.stop()  # harmless
    finally:
        for tool in taken:
            MONITORING.free_tool_id(tool)


def test_existing_modules_finds_the_callable_ones_alive_by_type():
    model = Model()
    gc.collect()
    found = [m for m in existing_modules(Base, (Container,)) if m is model or m in model.layers.children]
    assert sorted(type(m).__name__ for m in found) == ["Layer", "Layer", "Model"]
    assert not any(m is model.layers for m in existing_modules(Base, (Container,)))


@needs_monitoring
def test_the_state_pickle_and_copy_write_passes_by_on_state_which_may_leave_entries_out():
    seen = []

    def on_state(module, state):
        seen.append(type(module).__name__)
        state.pop("secret", None)  # what pickle writes, not the module: it keeps its attribute

    births = ModuleBirths(lambda module: None, on_state=on_state)
    assert births.start(Base, (Container,))
    try:
        layer = Layer(2)
        layer.secret = "debugger's"
        copied = copy.deepcopy(layer)
        loaded = pickle.loads(pickle.dumps(layer))
        shallow = copy.copy(layer)  # shares the module's dicts, as it would without llmpdb: not told
    finally:
        births.stop()
    assert seen == ["Layer", "Layer"] and layer.secret == "debugger's" and shallow.secret == "debugger's"
    assert not hasattr(copied, "secret") and not hasattr(loaded, "secret") and loaded.width == 2
    assert pickle.loads(pickle.dumps(layer)).secret == "debugger's"  # stopped: written as it is
