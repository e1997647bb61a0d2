"""llmpdb/identity.py: who a process is under each launcher, read from the environment the launcher sets (torchrun,
accelerate and deepspeed set RANK/WORLD_SIZE; srun, Open MPI and PMI their own), and hostile values read as unset."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmpdb import identity
from llmpdb.identity import LAUNCHERS, current_rank, launcher, local_rank, rank_suffix, world_size

ALL_VARS = sorted({v for row in LAUNCHERS for v in row[1:]} | {"LLMPDB_RANK"})


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in ALL_VARS:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_a_plain_process_is_no_rank():
    assert (current_rank(), world_size(), local_rank(), launcher(), rank_suffix()) == (None, None, None, None, "")


@pytest.mark.parametrize("env, expected", [
    ({"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1"}, ("torchrun", 3, 4, 1)),            # torchrun/accelerate
    ({"SLURM_PROCID": "5", "SLURM_STEP_NUM_TASKS": "8", "SLURM_LOCALID": "1"}, ("srun", 5, 8, 1)),
    ({"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "0"},
     ("mpirun", 2, 4, 0)),
    ({"PMI_RANK": "1", "PMI_SIZE": "2"}, ("mpirun", 1, 2, None)),
    # torchrun inside an allocation: its own variables win over SLURM's
    ({"RANK": "1", "WORLD_SIZE": "2", "SLURM_PROCID": "0", "SLURM_STEP_NUM_TASKS": "1"}, ("torchrun", 1, 2, None)),
])
def test_each_launcher(clean_env, env, expected):
    for name, value in env.items():
        clean_env.setenv(name, value)
    assert launcher() == expected
    assert (current_rank(), world_size(), local_rank()) == expected[1:]
    assert rank_suffix() == f" r{expected[1]}"


def test_a_slurm_batch_script_without_srun_is_one_process(clean_env):
    """sbatch sets SLURM_PROCID=0 and the allocation's SLURM_NTASKS for the batch script itself; only srun's
    job steps have SLURM_STEP_NUM_TASKS. Waiting for 8 ranks that never start would hang the stop."""
    clean_env.setenv("SLURM_PROCID", "0")
    clean_env.setenv("SLURM_NTASKS", "8")
    assert launcher() is None and current_rank() is None


@pytest.mark.parametrize("rank, world", [("inf", "2"), ("-1", "2"), ("1e3", "2"), (" 1", "2"), ("1", "nan"),
                                         ("2", "2"), ("5", "2"), ("1", "0"), ("1", "9" * 5000), ("١", "2")])
def test_hostile_or_inconsistent_values_read_as_no_job(clean_env, rank, world):
    clean_env.setenv("RANK", rank)
    clean_env.setenv("WORLD_SIZE", world)
    assert launcher() is None and current_rank() is None and world_size() is None


def test_interactive_rank_defaults_to_zero_on_nonsense(clean_env):
    for value, expected in (("2", 2), ("inf", 0), ("-3", 0), ("", 0)):
        clean_env.setenv("LLMPDB_RANK", value)
        assert identity.interactive_rank() == expected


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(ALL_VARS), st.text(max_size=30)))
def test_any_environment_gives_an_answer_never_an_exception(env):
    with pytest.MonkeyPatch.context() as patch:
        for name in ALL_VARS:
            patch.delenv(name, raising=False)
        for name, value in env.items():
            if "\x00" not in value:
                patch.setenv(name, value)
        found = launcher()
        assert found is None or (0 <= found[1] < found[2])
        assert isinstance(identity.interactive_rank(), int)
