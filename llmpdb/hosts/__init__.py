"""Hosts llmpdb lives in: IPython/Jupyter (``%load_ext llmpdb``) and pytest (``pytest --llmpdb``).

Usage::

    %load_ext llmpdb                      # IPython: %debug and %pdb on open llmpdb (hosts/ipython.py)
    pytest --llmpdb                       # = --pdb --pdbcls=llmpdb:Pdb (hosts/pytest_plugin.py)
    pytest --llmpdb-trace                 # = --trace --pdbcls=llmpdb:Pdb

A stop inside a pytest run turns pytest's output capture off while the prompt is up, as pytest's own
``pdb.set_trace`` does (debugger/pytest_capture.py, the ``host capture`` stage of the stop pipeline).
"""
