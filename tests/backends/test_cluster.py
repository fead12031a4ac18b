"""Beyond one process: dpframe releases on a real Dask ``distributed`` LocalCluster (two worker
*processes*, one thread each) and a real Spark standalone cluster (a master and two workers,
each its own JVM, started from the pyspark package's own ``bin/spark-class``).

Marked ``cluster`` and left out of the default run (``pytest -m cluster``, or
``bash .ci/run-cluster``): starting the JVMs and worker processes takes tens of seconds on a
two-core machine. Skipped with a message when ``distributed`` or Java is missing.

1. **Same answers as local mode, bit for bit**: seeded releases (``random_state=``) of count,
   sum, mean, variance and a group-by with declared keys give the same values and the same log
   entries (every field but time, ledger id and release id) on the cluster as on Spark's local
   mode / Dask's threaded scheduler; the source graph records the pid of every process that ran
   a partition, which shows the work ran on the workers.
2. **Privacy units**: bounding runs in pandas and Polars only, so a cluster frame with a
   ``privacy_unit`` is refused at ``protect`` exactly as in local mode (nothing read). A bounded
   release run *inside* each worker process (their own interpreters, their own string-hash
   seeds) gives the same released values and log entries as on the driver: the per-release
   bounding seed depends on ``random_state`` only.
3. **A worker killed mid-release** (Dask: the worker process running an aggregation task,
   SIGKILL; Spark: the whole process group of the worker JVM running an aggregation task —
   the Worker JVM, its executor JVM and Python workers, SIGKILL): both schedulers re-run the
   lost tasks on the surviving worker, so the release *completes*: the same value as without
   the kill, exactly one log entry, the budget spent once, and the durable ledger file agrees.
   When the engine gives up instead (forced on Dask with ``allowed-failures = 0``: the release
   gets ``KilledWorker``), the safety net spends the reservation, writes one "failed release"
   entry and locks the ledger. Either way: never a spent budget without an entry, never a
   partial log.
   **Every worker killed** (Dask: all worker processes, their nannies told not to restart
   them; Spark: the last worker's process group) during the aggregation: the engine would wait
   for ever; the release raises ``EngineTimeoutError`` within the test's small
   ``DPFRAME_ENGINE_TIMEOUT``, spends the reservation once, logs one "timed-out release"
   (durable ledger too) and does not lock the ledger; Spark's job group is cancelled.
4. **Clean shutdown**: the fixtures' finalizers stop the session/client and every process they
   started, then check that none of those pids (or process groups) is still alive.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import dpframe as dpf

pytestmark = pytest.mark.cluster

BOUNDS = {"x": (0.0, 100.0), "y": (-5.0, 5.0)}
KEYS = {"g": ["a", "b", "c"]}
IGNORED_LOG_FIELDS = {"time", "ledger_id", "release_id"}
REPO = str(Path(__file__).resolve().parents[2])
TIMINGS: dict[str, float] = {}
#: Python worker processes Spark ran tasks in (checked gone after the cluster is stopped)
SPARK_PYTHON_PIDS: set[int] = set()


def data(n: int = 400) -> pd.DataFrame:
    rng = np.random.default_rng(5)
    x = rng.uniform(-10, 110, n)
    x[::37] = math.nan
    return pd.DataFrame({"x": x, "y": rng.normal(0, 3, n).round(3),
                         "g": [["a", "b", "c", "zzz"][i % 4] for i in range(n)]})


def releases(frame: Any) -> tuple[list[Any], list[str]]:
    """Seeded releases of count, sum, mean, variance and a declared-key group-by, and the log
    entries they wrote (JSON text, so NaN compares equal), on a freshly protected frame."""
    pf = dpf.protect(frame, epsilon=10.0, bounds=BOUNDS, keys=KEYS, missing={"x": 50.0})
    values: list[Any] = [
        pf.dp.count(epsilon=0.5, random_state=1),
        pf.dp.sum("x", epsilon=0.5, random_state=2),
        pf.dp.mean("x", epsilon=0.5, random_state=3),
        pf.dp.variance("y", epsilon=0.5, random_state=4),
    ]
    table = pf.dp.groupby("g").mean("x", epsilon=0.5, random_state=5)
    values.append(table.to_dict("list"))
    both = pf.dp.release({"n": dpf.count(), "m": dpf.mean("y")}, epsilon=1.0, random_state=6)
    values.append(both.to_dict("list"))
    return values, log_entries(pf)


def log_entries(pf: Any) -> list[str]:
    log = pf.dp.log
    return [json.dumps({k: v for k, v in e.items() if k not in IGNORED_LOG_FIELDS},
                       sort_keys=True, default=str) for e in log.to_dict("records")]


def same_bits(a: Any, b: Any) -> bool:
    """Equal as floats bit for bit (NaN equal to NaN), recursively through lists and dicts."""
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_bits(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(map(same_bits, a, b))
    if isinstance(a, float | np.floating):
        return np.float64(a).tobytes() == np.float64(b).tobytes()
    return bool(a == b)


def remote() -> dict[str, Callable[..., Any]]:
    """Functions shipped to worker processes. Made here, as closures, so that cloudpickle sends
    them by value (the test module is not importable on the workers)."""

    def tag(folder: str, sleep: float) -> Callable[[pd.DataFrame], pd.DataFrame]:
        def run(part: pd.DataFrame) -> pd.DataFrame:
            import os as _os
            import time as _time
            import uuid

            if len(part):  # Dask calls it on an empty frame to learn the metadata
                name = Path(folder, f"{_os.getpid()}-{uuid.uuid4().hex}")
                Path(folder, f".{name.name}").write_text(str(_os.getpid()))
                _os.replace(Path(folder, f".{name.name}"), name)  # seen whole or not at all
                _time.sleep(sleep)
            return part
        return run

    def bounded_release() -> tuple[int, list[Any], list[str]]:
        import os as _os

        import dpframe as _dpf

        rng = np.random.default_rng(11)
        people = pd.DataFrame({"pid": [f"p{i // 6}" for i in range(240)],
                               "x": rng.uniform(-1, 2, 240),
                               "g": [["a", "b", "c"][i % 3] for i in range(240)]})
        pf = _dpf.protect(people, epsilon=10.0, bounds={"x": (-1.0, 2.0)}, keys=KEYS,
                          privacy_unit="pid", max_rows_per_unit=2, max_groups_per_unit=2)
        values = [pf.dp.mean("x", epsilon=1.0, random_state=7),
                  pf.dp.count_units(epsilon=1.0, random_state=8),
                  pf.dp.groupby("g").sum("x", epsilon=1.0, random_state=9).to_dict("list")]
        log = [json.dumps({k: v for k, v in e.items() if k not in IGNORED_LOG_FIELDS},
                          sort_keys=True, default=str) for e in pf.dp.log.to_dict("records")]
        return _os.getpid(), values, log

    return {"tag": tag, "bounded_release": bounded_release}


def pids_in(folder: Path) -> list[int]:
    """The pids in the markers ``tag`` wrote, in the order the tasks started."""
    done = [p for p in folder.iterdir() if not p.name.startswith(".")]
    return [int(p.read_text()) for p in sorted(done, key=os.path.getmtime)]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with contextlib.suppress(OSError):  # a zombie (exited, not yet reaped) is not alive
        if Path(f"/proc/{pid}/stat").read_text().split(") ")[-1].startswith("Z"):
            return False
    return True


def group_alive(pgid: int) -> list[int]:
    """Pids still running in process group ``pgid`` (read from /proc, like ``ps -g``)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            fields = stat.read_text().rsplit(") ", 1)[-1].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                out.append(int(stat.parent.name))
    return out


def ancestors(pid: int) -> list[int]:
    """``pid`` and its parents up to (not including) init, from /proc."""
    chain = []
    while pid > 1:
        chain.append(pid)
        pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[-1].split()[1])
    return chain


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _assert_release_complete(got: Any, want: Any, pf: Any, pdf: Any, ledger: Any) -> None:
    """A worker killed mid-release left the release complete: the same bits as undisturbed,
    ε = 1 spent once, one ordinary log entry, and the durable ledger agrees."""
    assert same_bits(got, want)
    assert pf.dp.budget.epsilon_spent == 1.0
    entries = pf.dp.log.to_dict("records")
    assert len(entries) == 1 and entries[0]["epsilon"] == 1.0
    assert entries[0]["part"] != "failed"
    reread = dpf.protect(pdf.copy(), epsilon=10.0, bounds=BOUNDS, session=dpf.Session(path=ledger))
    assert reread.dp.budget.epsilon_spent == 1.0


def kill_mid_release(folder: Path, before: int, kill: Callable[[int], None],
                     release: Callable[[], Any], timeout: float = 240.0) -> tuple[Any, int]:
    """Run ``release`` in a thread; when the first partition task after the first ``before``
    ones starts (the aggregation, after the public-size re-count), kill its process with
    ``kill(pid)``. Returns the release's result and the pid killed."""
    result: dict[str, Any] = {}

    def target() -> None:
        try:
            result["value"] = release()
        except BaseException as exc:
            result["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while len(pids := pids_in(folder)) <= before:
        assert thread.is_alive() and time.monotonic() < deadline, result
        time.sleep(0.02)
    victim = pids[before]
    kill(victim)
    thread.join(timeout)
    assert not thread.is_alive(), "the release did not finish after the kill"
    if "error" in result:
        raise result["error"]
    return result["value"], victim


def tasks_before_aggregation(source: Callable[[str], Any], tmp_path: Path,
                             partitions: int) -> int:
    """How many partition tasks a release of a frame like ``source(folder)`` runs before its
    aggregation pass (the pre-release check of the public size re-counts the rows), from a
    dry run without sleeps: the tasks of the release's last pass are the aggregation."""
    folder = tmp_path / "dry"
    folder.mkdir()
    pf = dpf.protect(source(str(folder)), epsilon=10.0, bounds=BOUNDS, keys=KEYS,
                     missing={"x": 50.0})
    protect_tasks = len(pids_in(folder))
    pf.dp.mean("x", epsilon=1.0, random_state=3)
    release_tasks = len(pids_in(folder)) - protect_tasks
    assert release_tasks >= partitions and release_tasks % partitions == 0, release_tasks
    return release_tasks - partitions


# -- Dask: a distributed LocalCluster with two worker processes ------------------------------

@contextlib.contextmanager
def dask_local_cluster() -> Iterator[tuple[Any, Callable[[], set[int]], set[int]]]:
    """A LocalCluster of two worker processes (one thread each) and a client that is not the
    default scheduler (tests pick it with ``dask.config.set(scheduler=client.get)``). On exit
    both are closed and every worker and nanny-started process seen is checked gone."""
    distributed = pytest.importorskip(
        "distributed", reason="the cluster tests need Dask's own scheduler: "
        "pip install 'dpframe[cluster]'")
    # ":0": a free port for the scheduler's HTTP server (None still binds 8787)
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=":0", memory_limit="1GiB",
                                       host="127.0.0.1")
    client = distributed.Client(cluster, set_as_default=False)
    started: set[int] = set()

    def processes() -> set[int]:
        return set(client.run(os.getpid).values())

    try:
        client.wait_for_workers(2)
        started |= processes()
        yield client, processes, started
    finally:
        with contextlib.suppress(Exception):
            started |= processes()
        client.close()
        cluster.close()
        left = [p for p in started if alive(p)]
        assert not left, f"Dask worker processes still running after close: {left}"


@pytest.fixture(scope="module")
def dask_client() -> Iterator[tuple[Any, Callable[[], set[int]], set[int]]]:
    start = time.perf_counter()
    with dask_local_cluster() as running:
        TIMINGS["dask cluster start"] = time.perf_counter() - start
        yield running


def test_dask_cluster_gives_the_local_answers_bit_for_bit(dask_client, tmp_path):
    import dask
    import dask.dataframe as dd

    client, processes, _ = dask_client
    tag = remote()["tag"]
    pdf = data()

    def frame(folder: Path) -> Any:
        folder.mkdir()
        return dd.from_pandas(pdf, npartitions=4).map_partitions(tag(str(folder), 0.0),
                                                                 meta=pdf.iloc[:0])

    with dask.config.set(scheduler="threads"):
        local = releases(frame(tmp_path / "local"))
    start = time.perf_counter()
    with dask.config.set(scheduler=client.get):
        remote_ = releases(frame(tmp_path / "cluster"))
    TIMINGS["dask releases"] = time.perf_counter() - start
    assert same_bits(local[0], remote_[0])
    assert local[1] == remote_[1] and len(local[1]) >= 6
    assert set(pids_in(tmp_path / "local")) == {os.getpid()}
    ran_on = set(pids_in(tmp_path / "cluster"))
    assert ran_on <= processes() and len(ran_on) == 2, ran_on  # both workers, not the driver


def test_dask_privacy_units_refused_and_bounding_identical_in_every_worker(dask_client):
    import dask.dataframe as dd

    client, _, _ = dask_client
    people = pd.DataFrame({"pid": [i // 3 for i in range(30)], "x": np.linspace(-1, 2, 30)})
    with pytest.raises(dpf.UnsupportedInputError, match="not available on dask"):
        dpf.protect(dd.from_pandas(people, npartitions=2), epsilon=1.0,
                    bounds={"x": (-1.0, 2.0)}, privacy_unit="pid", max_rows_per_unit=2)
    bounded = remote()["bounded_release"]
    here = bounded()
    there = client.run(bounded)
    assert len(there) == 2
    for pid, values, log in there.values():
        assert pid != here[0]
        assert same_bits(values, here[1]) and log == here[2]
        assert json.loads(log[0])["privacy_unit"] == "pid"


def test_dask_worker_killed_mid_release(dask_client, tmp_path):
    """The scheduler re-runs the killed worker's task elsewhere (its nanny restarts it): the
    release completes with the value it has without the kill, one log entry, spent once."""
    import dask
    import dask.dataframe as dd

    client, processes, started = dask_client
    tag = remote()["tag"]
    pdf = data()
    reference = dpf.protect(pdf, epsilon=10.0, bounds=BOUNDS, keys=KEYS, missing={"x": 50.0})
    want = reference.dp.mean("x", epsilon=1.0, random_state=3)
    folder = tmp_path / "tags"
    folder.mkdir()
    ledger = tmp_path / "ledger.jsonl"
    start = time.perf_counter()
    with dask.config.set(scheduler=client.get):
        ddf = dd.from_pandas(pdf, npartitions=4).map_partitions(tag(str(folder), 1.0),
                                                                meta=pdf.iloc[:0])
        pf = dpf.protect(ddf, epsilon=10.0, bounds=BOUNDS, keys=KEYS, missing={"x": 50.0},
                         session=dpf.Session(path=ledger))
        before = len(pids_in(folder)) + tasks_before_aggregation(
            lambda f: dd.from_pandas(pdf, npartitions=4).map_partitions(tag(f, 0.0),
                                                                        meta=pdf.iloc[:0]),
            tmp_path, partitions=4)
        got, victim = kill_mid_release(
            folder, before=before, kill=lambda pid: os.kill(pid, signal.SIGKILL),
            release=lambda: pf.dp.mean("x", epsilon=1.0, random_state=3))
    TIMINGS["dask kill test"] = time.perf_counter() - start
    assert victim in started and not alive(victim)
    _assert_release_complete(got, want, pf, pdf, ledger)
    # the nanny's attempt to start a replacement worker fails in this in-process LocalCluster
    # ("cannot pickle '_asyncio.Future'", dask/distributed#3345): one worker is left, which is
    # why this test runs last of the Dask ones
    started |= processes()


def test_dask_release_that_loses_its_worker_for_good_spends_and_logs_the_failure(tmp_path):
    """The other outcome, forced: a scheduler that gives up on a task at its first lost worker
    (``distributed.scheduler.allowed-failures = 0``: the release gets ``KilledWorker``). The
    failure comes after the reservation, so the safety net spends it, writes one "failed
    release" entry (in memory and in the durable ledger) and locks the ledger; the caller gets
    ``ReleaseFailedError`` and nothing of the engine's exception."""
    import dask
    import dask.dataframe as dd

    tag = remote()["tag"]
    pdf = data()
    folder = tmp_path / "tags"
    folder.mkdir()
    ledger = tmp_path / "ledger.jsonl"
    start = time.perf_counter()
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}), \
            dask_local_cluster() as (client, _, _), \
            dask.config.set(scheduler=client.get):
        pf = dpf.protect(
            dd.from_pandas(pdf, npartitions=4).map_partitions(tag(str(folder), 1.0),
                                                              meta=pdf.iloc[:0]),
            epsilon=10.0, bounds=BOUNDS, keys=KEYS, missing={"x": 50.0},
            session=dpf.Session(path=ledger))
        before = len(pids_in(folder)) + tasks_before_aggregation(
            lambda f: dd.from_pandas(pdf, npartitions=4).map_partitions(tag(f, 0.0),
                                                                        meta=pdf.iloc[:0]),
            tmp_path, partitions=4)
        with pytest.raises(dpf.ReleaseFailedError) as info:
            kill_mid_release(folder, before=before,
                             kill=lambda pid: os.kill(pid, signal.SIGKILL),
                             release=lambda: pf.dp.mean("x", epsilon=1.0, random_state=3))
    TIMINGS["dask give-up test"] = time.perf_counter() - start
    assert info.value.__context__ is None and "KilledWorker" not in str(info.value)
    assert pf.dp.budget.epsilon_spent == 1.0
    entries = pf.dp.log.to_dict("records")
    assert len(entries) == 1 and entries[0]["part"] == "failed" and entries[0]["epsilon"] == 1.0
    assert pf.dp.session.ledger.locked
    with pytest.raises((dpf.LedgerError, dpf.ReleaseFailedError), match="answers nothing"):
        pf.dp.count(epsilon=0.1)
    reread = dpf.protect(pdf.copy(), epsilon=10.0, bounds=BOUNDS, session=dpf.Session(path=ledger))
    assert reread.dp.budget.epsilon_spent == 1.0 and reread.dp.session.ledger.locked


def _assert_timed_out_and_charged_once(info: Any, took: float, timeout: float, pf: Any,
                                       pdf: Any, ledger: Path) -> None:
    """Every worker killed during the aggregation: the release raised EngineTimeoutError
    (naming the setting) within the timeout, spent its ε = 1 once, logged one timed-out
    release (in memory and in the durable ledger file), and did not lock the ledger."""
    from dpframe.errors import EngineTimeoutError

    assert isinstance(info.value, EngineTimeoutError), repr(info.value)
    assert "DPFRAME_ENGINE_TIMEOUT" in str(info.value) and info.value.__context__ is None
    assert took < timeout + 5.0, took
    assert pf.dp.budget.epsilon_spent == 1.0
    entries = pf.dp.log.to_dict("records")
    assert [(e["query"], e["epsilon"]) for e in entries] == [("timed-out release", 1.0)]
    assert not pf.dp.session.ledger.locked
    reread = dpf.protect(pdf.copy(), epsilon=10.0, bounds=BOUNDS, session=dpf.Session(path=ledger))
    assert reread.dp.budget.epsilon_spent == 1.0 and not reread.dp.session.ledger.locked
    assert [e["query"] for e in reread.dp.log.to_dict("records")] == ["timed-out release"]


def test_dask_release_that_loses_every_worker_times_out_and_charges_once(tmp_path, monkeypatch):
    """Every worker process killed (SIGKILL) while the aggregation runs, and none restarted
    (the nannies are told not to, as when the machines are gone): the scheduler would
    wait for a worker for ever. The release raises EngineTimeoutError within the (here 5 s)
    DPFRAME_ENGINE_TIMEOUT, charged once and logged (docs/engines.md, "When the cluster
    dies")."""
    import dask
    import dask.dataframe as dd

    tag = remote()["tag"]
    pdf = data()
    folder = tmp_path / "tags"
    folder.mkdir()
    ledger = tmp_path / "ledger.jsonl"
    timeout = 5.0
    start = time.perf_counter()
    with dask_local_cluster() as (client, processes, _), dask.config.set(scheduler=client.get):
        pf = dpf.protect(
            dd.from_pandas(pdf, npartitions=4).map_partitions(tag(str(folder), 0.5),
                                                              meta=pdf.iloc[:0]),
            epsilon=10.0, bounds=BOUNDS, keys=KEYS, missing={"x": 50.0},
            session=dpf.Session(path=ledger))
        before = len(pids_in(folder)) + tasks_before_aggregation(
            lambda f: dd.from_pandas(pdf, npartitions=4).map_partitions(tag(f, 0.0),
                                                                        meta=pdf.iloc[:0]),
            tmp_path, partitions=4)
        workers = processes()
        for nanny in client.cluster.workers.values():
            nanny.close_gracefully()  # (distributed: "we shouldn't try to restart workers")
        killed: dict[str, float] = {}

        def kill_all(_: int) -> None:
            for pid in workers:
                os.kill(pid, signal.SIGKILL)
            killed["at"] = time.monotonic()

        monkeypatch.setenv("DPFRAME_ENGINE_TIMEOUT", str(timeout))
        with pytest.raises(dpf.DPFrameError) as info:
            kill_mid_release(folder, before=before, kill=kill_all, timeout=60.0,
                             release=lambda: pf.dp.mean("x", epsilon=1.0, random_state=3))
        took = time.monotonic() - killed["at"]
        assert not any(alive(p) for p in workers)
    TIMINGS["dask all-workers-lost test"] = time.perf_counter() - start
    _assert_timed_out_and_charged_once(info, took, timeout, pf, pdf, ledger)


# -- Spark: a standalone master and two workers, each its own JVM ----------------------------

def spark_home() -> str:
    pyspark = pytest.importorskip("pyspark")
    if shutil.which("java") is None:
        pytest.skip("the Spark cluster tests need Java (17) on the PATH; it is missing")
    return str(Path(pyspark.__file__).parent)


def wait_for_workers(ui_port: int, n: int, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with (contextlib.suppress(OSError, ValueError),
              urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as r):
            if int(json.load(r).get("aliveworkers", 0)) >= n:
                return
        time.sleep(0.5)
    raise TimeoutError(f"the Spark master did not see {n} workers in {timeout} s")


@pytest.fixture(scope="module")
def spark_local_answers() -> tuple[list[Any], list[str]]:
    """The releases on Spark's local mode (the suite's local session), taken before the
    cluster session replaces it (one SparkContext per process)."""
    spark_home()
    from conftest import spark_session

    answers = releases(spark_session().createDataFrame(data()))
    import conftest

    if conftest._SPARK:  # stopped here; a later local test starts a new one
        conftest._SPARK.pop().stop()
    return answers


@pytest.fixture(scope="module")
def spark_cluster(spark_local_answers, tmp_path_factory) -> Iterator[dict[str, Any]]:
    home = spark_home()
    from conftest import TEST_JVM_OPTIONS
    from pyspark.sql import SparkSession

    work = tmp_path_factory.mktemp("spark")
    env = {**os.environ, "SPARK_HOME": home, "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_LOG_DIR": str(work), "SPARK_WORKER_DIR": str(work / "work"),
           "SPARK_DAEMON_MEMORY": "256m", "SPARK_DAEMON_JAVA_OPTS": TEST_JVM_OPTIONS,
           "PYSPARK_PYTHON": sys.executable,
           "PYTHONPATH": os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")]))}
    spark_class = [os.path.join(home, "bin", "spark-class")]
    port, ui = free_port(), free_port()
    url = f"spark://127.0.0.1:{port}"
    procs: list[subprocess.Popen[bytes]] = []

    def launch(name: str, args: list[str]) -> subprocess.Popen[bytes]:
        log = open(work / f"{name}.log", "wb")  # noqa: SIM115 (closed with the process)
        proc = subprocess.Popen([*spark_class, *args], env=env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        procs.append(proc)
        return proc

    start = time.perf_counter()
    spark = None
    try:
        launch("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                          "--port", str(port), "--webui-port", str(ui)])
        workers = [launch(f"worker{i}", [
            "org.apache.spark.deploy.worker.Worker", url, "--cores", "1", "--memory", "512m",
            "--host", "127.0.0.1", "--webui-port", str(free_port()),
            "--work-dir", str(work / f"work{i}")]) for i in range(2)]
        wait_for_workers(ui, 2)
        TIMINGS["spark master+workers start"] = time.perf_counter() - start
        spark = (SparkSession.builder.master(url).appName("dpframe-cluster-tests")
                 .config("spark.driver.host", "127.0.0.1")
                 .config("spark.driver.extraJavaOptions", TEST_JVM_OPTIONS)
                 .config("spark.executor.extraJavaOptions", TEST_JVM_OPTIONS)
                 .config("spark.executor.memory", "512m")
                 .config("spark.executor.cores", "1")
                 .config("spark.cores.max", "2")
                 .config("spark.ui.enabled", "false")
                 .config("spark.sql.shuffle.partitions", "2")
                 .config("spark.sql.execution.arrow.pyspark.enabled", "false")
                 .config("spark.pyspark.python", sys.executable)
                 .config("spark.executorEnv.PYTHONPATH", env["PYTHONPATH"])
                 .getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        deadline = time.monotonic() + 180
        while spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() < 3:  # + driver
            assert time.monotonic() < deadline, "the executors did not register"
            time.sleep(0.5)
        TIMINGS["spark cluster + session start"] = time.perf_counter() - start
        yield {"spark": spark, "url": url, "workers": workers, "local": spark_local_answers}
    finally:
        if spark is not None:
            spark.stop()
        for proc in reversed(procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(30)
        deadline = time.monotonic() + 30
        while (left := [p for proc in procs for p in group_alive(proc.pid)]) and (
                time.monotonic() < deadline):
            time.sleep(0.2)
        for pid in left:  # an executor JVM its worker did not take down in 30 s
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        assert not left, f"Spark processes still running after shutdown: {left}"
        deadline = time.monotonic() + 30
        while (python := [p for p in SPARK_PYTHON_PIDS if alive(p)]) and (
                time.monotonic() < deadline):
            time.sleep(0.2)
        assert not python, f"Spark's Python workers still running after shutdown: {python}"


def test_spark_cluster_gives_the_local_answers_bit_for_bit(spark_cluster):
    spark = spark_cluster["spark"]
    start = time.perf_counter()
    values, log = releases(spark.createDataFrame(data()))
    TIMINGS["spark releases"] = time.perf_counter() - start
    want_values, want_log = spark_cluster["local"]
    assert same_bits(values, want_values)
    assert log == want_log and len(log) >= 6


def test_spark_privacy_units_refused_and_bounding_identical_in_every_executor(spark_cluster):
    spark = spark_cluster["spark"]
    people = pd.DataFrame({"pid": [i // 3 for i in range(30)], "x": np.linspace(-1, 2, 30)})
    with pytest.raises(dpf.UnsupportedInputError, match="not available on spark"):
        dpf.protect(spark.createDataFrame(people), epsilon=1.0, bounds={"x": (-1.0, 2.0)},
                    privacy_unit="pid", max_rows_per_unit=2)
    bounded = remote()["bounded_release"]
    here = bounded()
    there = spark.sparkContext.parallelize(range(4), 4).mapPartitions(
        lambda _: [bounded()]).collect()
    assert len(there) == 4
    SPARK_PYTHON_PIDS.update(pid for pid, _, _ in there)
    for pid, values, log in there:
        assert pid != here[0]
        assert same_bits(values, here[1]) and log == here[2]


def test_spark_worker_killed_mid_release(spark_cluster, tmp_path):
    """Kills the worker running an aggregation task (Worker JVM, executor JVM and Python
    workers: one process group). Spark re-runs the lost tasks on the other executor and the
    release completes: the value it has without the kill, one log entry, spent once. Runs last
    in this module: the cluster has one worker afterwards."""
    spark = spark_cluster["spark"]
    tag = remote()["tag"]
    pdf = data()
    schema = spark.createDataFrame(pdf).schema
    reference = dpf.protect(pdf, epsilon=10.0, bounds=BOUNDS, keys=KEYS, missing={"x": 50.0})
    want = reference.dp.mean("x", epsilon=1.0, random_state=3)
    folder = tmp_path / "tags"
    folder.mkdir()
    ledger = tmp_path / "ledger.jsonl"
    slow = tag(str(folder), 2.0)
    start = time.perf_counter()
    source = spark.createDataFrame(pdf).repartition(4).mapInPandas(
        lambda parts: (slow(p) for p in parts), schema=schema)
    pf = dpf.protect(source, epsilon=10.0, bounds=BOUNDS, keys=KEYS, missing={"x": 50.0},
                     session=dpf.Session(path=ledger))
    counted = len(pids_in(folder))
    worker_groups = {w.pid for w in spark_cluster["workers"]}

    def kill(pid: int) -> None:
        # the Python worker runs under the pyspark daemon (its own process group), a child of
        # the executor JVM, a child of the Worker JVM (whose group the executor shares)
        chain = ancestors(pid)
        group = next((os.getpgid(p) for p in chain if os.getpgid(p) in worker_groups), None)
        assert group is not None, "the task ran outside the workers' process trees"
        SPARK_PYTHON_PIDS.update(chain[:2])
        daemon_group = os.getpgid(pid)  # (read first: the Python worker exits with the JVMs)
        os.killpg(group, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):  # (already gone with its JVMs)
            os.killpg(daemon_group, signal.SIGKILL)  # the daemon and its Python workers

    got, victim = kill_mid_release(folder, before=2 * counted, kill=kill,
                                   release=lambda: pf.dp.mean("x", epsilon=1.0, random_state=3))
    TIMINGS["spark kill test"] = time.perf_counter() - start
    assert counted >= 2 and not alive(victim)
    _assert_release_complete(got, want, pf, pdf, ledger)


def test_spark_release_that_loses_every_worker_times_out_and_charges_once(spark_cluster,
                                                                          tmp_path,
                                                                          monkeypatch):
    """Runs after the single-kill test, which left one worker: that one is killed too (its
    Worker and executor JVMs' process group, and the task's Python workers) while the
    aggregation runs. Spark would wait for an executor for ever; the release raises
    EngineTimeoutError within the (here 10 s) DPFRAME_ENGINE_TIMEOUT, cancels its job group,
    and is charged once and logged. The cluster has no worker afterwards (the fixture stops
    the master)."""
    spark = spark_cluster["spark"]
    tag = remote()["tag"]
    pdf = data()
    schema = spark.createDataFrame(pdf).schema
    folder = tmp_path / "tags"
    folder.mkdir()
    ledger = tmp_path / "ledger.jsonl"
    timeout = 10.0
    slow = tag(str(folder), 0.5)
    start = time.perf_counter()
    source = spark.createDataFrame(pdf).repartition(4).mapInPandas(
        lambda parts: (slow(p) for p in parts), schema=schema)
    pf = dpf.protect(source, epsilon=10.0, bounds=BOUNDS, keys=KEYS, missing={"x": 50.0},
                     session=dpf.Session(path=ledger))
    counted = len(pids_in(folder))
    left = [w.pid for w in spark_cluster["workers"] if group_alive(w.pid)]
    assert len(left) == 1, left  # (the single-kill test took the other one)
    killed: dict[str, float] = {}

    def kill_all(pid: int) -> None:
        SPARK_PYTHON_PIDS.update(ancestors(pid)[:2])
        daemon_group = os.getpgid(pid)  # (read first: the Python worker exits with the JVMs)
        os.killpg(left[0], signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):  # (already gone with its JVMs)
            os.killpg(daemon_group, signal.SIGKILL)  # the daemon and its Python workers
        killed["at"] = time.monotonic()

    monkeypatch.setenv("DPFRAME_ENGINE_TIMEOUT", str(timeout))
    with pytest.raises(dpf.DPFrameError) as info:
        kill_mid_release(folder, before=2 * counted, kill=kill_all, timeout=90.0,
                         release=lambda: pf.dp.mean("x", epsilon=1.0, random_state=3))
    took = time.monotonic() - killed["at"]
    TIMINGS["spark all-workers-lost test"] = time.perf_counter() - start
    assert not group_alive(left[0])
    _assert_timed_out_and_charged_once(info, took, timeout, pf, pdf, ledger)
    # cancelJobGroup posts an event to Spark's DAG scheduler, which ends the job a moment later:
    # the job must be gone within a few seconds (an uncancelled one would wait for ever)
    tracker = spark.sparkContext.statusTracker()
    deadline = time.monotonic() + 15.0
    while tracker.getActiveJobsIds() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert tracker.getActiveJobsIds() == []  # cancelled


def test_zz_timings(capsys):
    """Prints the timings measured above (pytest -s shows them; nothing is asserted)."""
    with capsys.disabled():
        for name, seconds in TIMINGS.items():
            print(f"\n[cluster timing] {name}: {seconds:.1f} s", end="")
